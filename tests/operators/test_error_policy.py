"""Every task follows one error policy (`neuronforge_airflow/operators/error_policy.py`, issue 55): an
error of ours is its one line, retried only when its class is retryable; a bug keeps its traceback; an
Airflow exception the body raises passes as it is. The sweep's trial, which once mapped only bad input,
follows it too: a store that does not answer is retried, not judged."""

from __future__ import annotations

import errno

import pytest
from airflow.sdk.exceptions import AirflowException, AirflowFailException, AirflowSkipException

from neuronforge.common.errors import InvalidInput, StoreUnreachable
from neuronforge_airflow.operators import sweep
from neuronforge_airflow.operators.error_policy import by_policy, failure


def _raised(exc: BaseException) -> BaseException:
    with pytest.raises(BaseException) as caught, by_policy():
        raise exc
    return caught.value


def test_an_error_of_ours_is_its_line_retried_only_when_it_may_pass() -> None:
    refused = _raised(InvalidInput("tp 3 does not divide 32 heads: use 2 or 4"))
    assert type(refused) is AirflowFailException and str(refused) == "tp 3 does not divide 32 heads: use 2 or 4"
    unreachable = _raised(StoreUnreachable("cannot reach the S3 endpoint http://127.0.0.1:9 (refused)"))
    assert type(unreachable) is AirflowException and "127.0.0.1:9" in str(unreachable)
    full = _raised(OSError(errno.ENOSPC, "No space left on device", "/srv/work"))
    assert type(full) is AirflowException and "/srv/work" in str(full)


def test_a_bug_and_airflows_own_exceptions_pass_as_they_are() -> None:
    bug = KeyError("a bug")
    assert _raised(bug) is bug
    skip = AirflowSkipException("decided without a compile")
    assert _raised(skip) is skip
    assert failure(bug) is None


def test_the_sweeps_trial_retries_an_unreachable_store_and_fails_bad_input(monkeypatch) -> None:
    trial = sweep.try_candidates("default").function
    plan = {"request": {}}
    monkeypatch.setattr(sweep.SweepRequest, "model_validate", classmethod(lambda cls, data: object()))
    for exc, kind in [
        (StoreUnreachable("cannot reach the S3 endpoint http://127.0.0.1:9"), AirflowException),
        (InvalidInput("tp 3 does not divide 32 heads"), AirflowFailException),
    ]:

        def decide(request, candidate, exc=exc):
            raise exc

        monkeypatch.setattr(sweep, "decide", decide)
        with pytest.raises(AirflowException) as caught:
            trial(plan, {"tp": 3, "batch_size": 1, "sequence_length": 1024})
        assert type(caught.value) is kind and str(caught.value) == str(exc)


def test_a_class_based_operator_declares_the_policy_and_the_hook_once(monkeypatch, tmp_path) -> None:
    """`NeuronforgeOperator`: `run` under the policy, `hook` on the operator's connection id."""
    from neuronforge_airflow.operators.base import NeuronforgeOperator
    from neuronforge_airflow.operators.build_claim import ClaimBuildOperator
    from neuronforge_airflow.operators.recompile import AwaitRebuildsOperator

    class Refusing(NeuronforgeOperator):
        def run(self, context):
            raise InvalidInput("tp 3 does not divide 32 heads")

    with pytest.raises(AirflowFailException, match="tp 3 does not divide 32 heads"):
        Refusing(task_id="refusing").execute({})
    monkeypatch.setenv(
        "AIRFLOW_CONN_FARM_B", '{"conn_type": "neuronforge", "extra": {"store": "file://%s"}}' % (tmp_path / "b")
    )
    operator = Refusing(task_id="other", neuronforge_conn_id="farm_b")
    assert operator.hook.store_uri() == f"file://{tmp_path / 'b'}"
    assert issubclass(ClaimBuildOperator, NeuronforgeOperator) and issubclass(
        AwaitRebuildsOperator, NeuronforgeOperator
    )
