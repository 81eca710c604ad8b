"""`RebuildsSettledTrigger`: the recompile DAG's deferred wait, run on an event loop as the
triggerer would, against a real directory store."""

from __future__ import annotations

import asyncio
import importlib
import json
import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

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


# Whether a task on queue `neuron` can start: what `check_workers` decides from Celery's answer.


def test_only_celery_routes_by_queue() -> None:
    from operators.recompile import queue_served

    for executor in ("LocalExecutor", "KubernetesExecutor"):
        served, why = queue_served(executor, None, "neuron")
        assert served and executor in why


def test_celery_without_a_consumer_of_the_queue_is_not_served() -> None:
    from operators.recompile import queue_served

    answer = {"w1@a": [{"name": "default"}], "w2@b": [{"name": "default"}, {"name": "bulk"}]}
    served, why = queue_served("CeleryExecutor", answer, "neuron")
    assert not served and "no Celery worker consumes queue 'neuron'" in why and "w2@b: bulk, default" in why
    assert queue_served("CeleryExecutor", None, "neuron") == (
        False,
        "no Celery worker answered, so nothing consumes queue 'neuron'",
    )
    served, why = queue_served("CeleryExecutor", {**answer, "w3@c": [{"name": "neuron"}]}, "neuron")
    assert served and why == "queue 'neuron' is consumed by w3@c"
    # Asking failed (broker down): let the watch try; its own timeouts bound the wait.
    served, why = queue_served("CeleryExecutor", ConnectionError("refused"), "neuron")
    assert served and "refused" in why


def test_default_executor_reads_the_first_configured_one(monkeypatch) -> None:
    from operators.recompile import default_executor

    monkeypatch.setenv(
        "AIRFLOW__CORE__EXECUTOR", "gpu:airflow.providers.celery.executors.celery_executor.CeleryExecutor,LocalExecutor"
    )
    assert default_executor() == "CeleryExecutor"
    monkeypatch.setenv("AIRFLOW__CORE__EXECUTOR", "LocalExecutor")
    assert default_executor() == "LocalExecutor"


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.skipif(shutil.which("redis-server") is None, reason="redis-server (Debian package) not installed")
def test_a_real_celery_worker_on_the_default_queue_does_not_serve_neuron(tmp_path: Path) -> None:
    """redis + a Celery worker of Airflow's Celery app consuming `default` only: the answer
    `check_workers` gets through `celery_active_queues` says nobody consumes `neuron`."""
    port = _free_port()
    env = {**os.environ, "AIRFLOW__CELERY__BROKER_URL": f"redis://127.0.0.1:{port}/0"}
    redis = subprocess.Popen(
        ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--dir", str(tmp_path)],
        stdout=subprocess.DEVNULL,
    )
    worker = None
    try:
        celery = str(Path(sys.executable).parent / "celery")
        app = "airflow.providers.celery.executors.celery_executor.app"
        worker = subprocess.Popen(
            [celery, "-A", app, "worker", "-Q", "default", "-n", "cpu-probe@%h", "--pool", "solo", "--without-mingle"],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        probe = (
            "import json; from operators.recompile import celery_active_queues, queue_served\n"
            "print(json.dumps(queue_served('CeleryExecutor', celery_active_queues(2.0), 'neuron')))"
        )
        deadline = time.monotonic() + 90
        while True:  # until the worker is up and answers
            out = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True, check=True)
            served, why = json.loads(out.stdout.strip().splitlines()[-1])
            if "cpu-probe@" in why or time.monotonic() > deadline:
                break
        assert served is False and "no Celery worker consumes queue 'neuron'" in why
        assert "cpu-probe@" in why and ": default" in why
    finally:
        for proc in (worker, redis):
            if proc is not None:
                proc.terminate()
                try:
                    proc.wait(timeout=20)
                except subprocess.TimeoutExpired:
                    proc.kill()
