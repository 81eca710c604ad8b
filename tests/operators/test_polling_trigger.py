"""`PollingTrigger`, the one polling loop of the deferrable waits, and `BuildFinishedTrigger` on it:
run on an event loop as the triggerer would, rebuilt from its serialized form first."""

from __future__ import annotations

import asyncio
import importlib
import threading
import time
from pathlib import Path
from typing import Any

from neuronforge.artifacts import leases
from neuronforge.stores import open_store
from neuronforge_airflow.triggers.build_finished import BuildFinishedTrigger
from neuronforge_airflow.triggers.polling import PollingTrigger

KEY = "b" * 64


def _rebuilt(trigger: PollingTrigger) -> PollingTrigger:
    """What the triggerer does with a deferred task's trigger: import its classpath, call it with its kwargs."""
    path, kwargs = trigger.serialize()
    module, _, name = path.rpartition(".")
    return getattr(importlib.import_module(module), name)(**kwargs)


def _first_event(trigger: PollingTrigger) -> dict[str, Any]:
    async def first():
        async for event in trigger.run():
            return event.payload

    return asyncio.run(first())


class Countdown(PollingTrigger):
    """Answers on its `answer_at`-th poll; None never."""

    FIELDS = ("answer_at", "poll_s", "deadline")

    def __init__(self, answer_at: int | None, poll_s: float, deadline: float | None = None) -> None:
        super().__init__()
        self.answer_at, self.poll_s, self.deadline, self.polls = answer_at, poll_s, deadline, 0

    def poll(self) -> dict[str, Any] | None:
        self.polls += 1
        return {"polls": self.polls} if self.polls == self.answer_at else None

    def at_deadline(self) -> dict[str, Any]:
        return {"deadline": self.polls}


def test_polls_every_poll_s_until_the_check_answers() -> None:
    trigger = Countdown(answer_at=3, poll_s=0.05)
    started = time.monotonic()
    assert _first_event(trigger) == {"polls": 3}
    assert 0.1 <= time.monotonic() - started < 5  # two waits of poll_s between three polls


def test_fires_at_the_deadline_after_one_last_poll() -> None:
    trigger = Countdown(answer_at=None, poll_s=10.0, deadline=time.time() + 0.2)
    started = time.monotonic()
    payload = _first_event(trigger)
    assert payload == {"deadline": 2}  # a poll, a wait cut to the deadline, a last poll
    assert time.monotonic() - started < 5


def test_serializes_to_its_own_classpath_and_fields() -> None:
    path, kwargs = BuildFinishedTrigger("file:///s", KEY, 3.0).serialize()
    assert (path, kwargs) == (
        "neuronforge_airflow.triggers.build_finished.BuildFinishedTrigger",
        {"store_uri": "file:///s", "key": KEY, "poll_s": 3.0},
    )
    from neuronforge_airflow.triggers.rebuilds_settled import RebuildsSettledTrigger

    path, kwargs = RebuildsSettledTrigger("file:///s", [], deadline=5.0, poll_s=1.0).serialize()
    assert path == "neuronforge_airflow.triggers.rebuilds_settled.RebuildsSettledTrigger"
    assert kwargs == {"store_uri": "file:///s", "states": [], "deadline": 5.0, "poll_s": 1.0}


# Where each trigger was serialized from before it moved to triggers/ (issue 55): a task deferred then is
# in the database under that classpath, and the triggerer of the upgraded deployment must still run it.
EARLIER_CLASSPATHS = {
    "neuronforge_airflow.operators.build_claim.BuildFinishedTrigger": "neuronforge_airflow.triggers.build_finished",
    "neuronforge_airflow.operators.recompile.RebuildsSettledTrigger": "neuronforge_airflow.triggers.rebuilds_settled",
}


def test_a_trigger_deferred_by_the_earlier_classpath_runs_after_the_upgrade(tmp_path: Path) -> None:
    """As the triggerer of Airflow 3 loads a stored trigger (`TriggerRunnerSupervisor`'s
    `get_trigger_by_classpath`: `import_string` of the row's classpath, called with its kwargs), a row
    written under the earlier classpath gives the moved class, which runs."""
    from airflow._shared.module_loading import import_string

    for earlier, module in EARLIER_CLASSPATHS.items():
        cls = import_string(earlier)
        assert cls.__module__ == module and cls.__name__ == earlier.rpartition(".")[2], earlier
    store_uri = f"file://{tmp_path / 'store'}"
    stored = (
        "neuronforge_airflow.operators.build_claim.BuildFinishedTrigger",
        {"store_uri": store_uri, "key": KEY, "poll_s": 0.1},
    )
    trigger = import_string(stored[0])(**stored[1])
    assert _first_event(trigger) == {"status": "free"}  # nobody holds the lease: the wait is over
    settled = import_string("neuronforge_airflow.operators.recompile.RebuildsSettledTrigger")(
        store_uri=store_uri, states=[], deadline=time.time() + 5, poll_s=0.1
    )
    assert _first_event(settled) == {"settled": True}  # no rebuilds: settled at the first poll


def test_build_finished_fires_free_when_the_holder_releases_its_lease(tmp_path: Path) -> None:
    store_uri = f"file://{tmp_path / 'store'}"
    store = open_store(store_uri)
    lease = leases.try_acquire(store, KEY, "someone-else")
    assert lease is not None
    threading.Timer(0.4, lambda: leases.release(store, lease)).start()
    started = time.monotonic()
    assert _first_event(_rebuilt(BuildFinishedTrigger(store_uri, KEY, poll_s=0.1))) == {"status": "free"}
    assert 0.3 < time.monotonic() - started < 10  # it waited while the lease was live


def test_build_finished_fires_published_with_the_hit(tmp_path: Path, monkeypatch) -> None:
    from neuronforge_airflow.triggers import build_finished

    hit = {"manifest_uri": "file:///s/m.json"}
    monkeypatch.setattr(build_finished, "_published", lambda store_uri, key: hit if key == KEY else None)
    trigger = _rebuilt(BuildFinishedTrigger(f"file://{tmp_path}", KEY, poll_s=0.1))
    assert _first_event(trigger) == {"status": "published", "hit": hit}
