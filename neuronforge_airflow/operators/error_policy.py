"""The one error policy of every neuronforge task: what a task raises for an exception, by the outcome
its class declares (`neuronforge.common.errors.outcome`, which the CLI's exit codes follow too).

- An error of ours, or a disk error, is its one line (masked; in the form's words), raised as
  `AirflowException` when its class is retryable — it may pass on its own: an unreachable store or Hub,
  a lease taken over, a full disk — so the task is retried as its `retries` say, else as
  `AirflowFailException`: no retry can change bad input, a rejected checkpoint, a refused promotion, a
  lost race (retrying one would overrule its winner), a missing bucket, rejected credentials.
- Anything else is a bug: raised as it is, its traceback the report.

    with by_policy():            # in a task's body
        ...
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from airflow.sdk.exceptions import AirflowException, AirflowFailException

Places = Sequence[Path] | Callable[[], Sequence[Path]]


def failure(exc: BaseException, places: Places = ()) -> AirflowException | None:
    """The Airflow exception for `exc` by its outcome; None when `exc` is not explained (a bug).
    `places`: where the task writes, named by a disk error whose exception names no file."""
    from neuronforge.common.errors import outcome

    found = outcome(exc, places, surface="form")
    if found is None:
        return None
    return (AirflowException if found.retryable else AirflowFailException)(found.line)


@contextmanager
def by_policy(places: Places = ()) -> Iterator[None]:
    """Run a task's body under the policy: Airflow's own exceptions (a skip, a deferral, a failure the
    body chose) pass as they are; any other exception becomes its `failure`, a bug stays itself."""
    try:
        yield
    except AirflowException:
        raise
    except Exception as exc:
        raised = failure(exc, places)
        if raised is None:
            raise
        raise raised from None
