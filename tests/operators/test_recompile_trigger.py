"""`RebuildsSettledTrigger`: the recompile DAG's deferred wait, run on an event loop as the
triggerer would, against a real directory store."""

from __future__ import annotations

import asyncio
import importlib
import threading
import time
from pathlib import Path

from neuronforge import recompile
from neuronforge.failures import record_failure
from neuronforge.stores import open_store
from operators.recompile import RebuildsSettledTrigger


def _first_event(trigger: RebuildsSettledTrigger):
    async def first():
        async for event in trigger.run():
            return event.payload

    return asyncio.run(first())


def _states() -> list[dict]:
    state = recompile.TargetState(0, "m", 1, "slug", {}, recompile.STALE, key="a" * 64, run_id="recompile__x__00")
    return [state.to_json()]


def test_fires_when_the_triggered_rebuild_records_its_end(tmp_path: Path) -> None:
    store_uri = f"file://{tmp_path / 'store'}"
    trigger = RebuildsSettledTrigger(store_uri, _states(), deadline=time.time() + 30, poll_s=0.1)
    # As the triggerer does: rebuild the trigger from its serialized form.
    path, kwargs = trigger.serialize()
    module, _, name = path.rpartition(".")
    trigger = getattr(importlib.import_module(module), name)(**kwargs)
    later = threading.Timer(
        0.5,
        lambda: record_failure(open_store(store_uri), "a" * 64, "smoke_ticket", RuntimeError("x"), "recompile__x__00"),
    )
    later.start()
    started = time.monotonic()
    assert _first_event(trigger) == {"settled": True}
    assert 0.4 < time.monotonic() - started < 10


def test_gives_up_at_the_deadline_and_says_so(tmp_path: Path) -> None:
    store_uri = f"file://{tmp_path / 'store'}"
    # A failure recorded by some other run does not count as this rebuild's end.
    record_failure(open_store(store_uri), "a" * 64, "plan_target", RuntimeError("x"), "someone-else")
    trigger = RebuildsSettledTrigger(store_uri, _states(), deadline=time.time() + 0.5, poll_s=0.1)
    assert _first_event(trigger) == {"settled": False}
