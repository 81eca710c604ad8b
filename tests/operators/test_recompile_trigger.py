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

from neuronforge.artifacts.farm_index import record_failure
from neuronforge.farm import recompile
from neuronforge.stores import open_store
from neuronforge_airflow.operators.recompile import RebuildsSettledTrigger


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


# Whether a task on a Neuron queue can start: what `check_workers` decides from Celery's answer.


def test_only_celery_routes_by_queue() -> None:
    from neuronforge_airflow.operators.recompile import queue_served

    for executor in ("LocalExecutor", "KubernetesExecutor"):
        served, why = queue_served(executor, None, "neuron-2.26.1")
        assert served and executor in why


def test_celery_without_a_consumer_of_the_queue_is_not_served() -> None:
    from neuronforge_airflow.operators.recompile import queue_served

    answer = {"w1@a": [{"name": "default"}], "w2@b": [{"name": "default"}, {"name": "bulk"}]}
    served, why = queue_served("CeleryExecutor", answer, "neuron-2.26.1")
    assert not served and "no Celery worker consumes queue 'neuron-2.26.1'" in why and "w2@b: bulk, default" in why
    assert queue_served("CeleryExecutor", None, "neuron-2.26.1") == (
        False,
        "no Celery worker answered, so nothing consumes queue 'neuron-2.26.1'",
    )
    served, why = queue_served("CeleryExecutor", {**answer, "w3@c": [{"name": "neuron-2.26.1"}]}, "neuron-2.26.1")
    assert served and why == "queue 'neuron-2.26.1' is consumed by w3@c"
    # Asking failed (broker down): let the watch try; its own timeouts bound the wait.
    served, why = queue_served("CeleryExecutor", ConnectionError("refused"), "neuron-2.26.1")
    assert served and "refused" in why


def test_one_watch_per_neuron_queue_and_what_each_profile_gets_when_it_did_not_report(monkeypatch) -> None:
    """A watch reports the profiles routed to its queue; a profile whose queue's watch reported
    nothing gets why, naming the queue (no consumer, or the watch failed)."""
    from neuronforge.profiles import neuron_queues, registry
    from neuronforge.profiles.base import Pins
    from neuronforge.profiles.optimum_neuron import PROFILE as OPTIMUM
    from neuronforge.profiles.vllm_neuron import PROFILE as VLLM
    from neuronforge.profiles.vllm_neuron import VllmNeuronProfile
    from neuronforge_airflow.operators.recompile import _queue_reports, profiles_on, watch_task_id

    class Release2270(VllmNeuronProfile):
        pins = Pins("2.27.0", "2.22.12471.0+b4a00d10", dict(VLLM.pins.packages))

    newer = Release2270()
    registered = registry.all_profiles()
    monkeypatch.setattr(registry, "all_profiles", lambda: (*registered, newer))
    assert neuron_queues() == [
        "neuron-2.21.1",
        "neuron-compile-2.26.1",
        "neuron-compile-2.27.0",
        "neuron-compile-2.28.0",
        "neuron-compile-2.31.1",
        "neuron-compile-2.32.0",
        "neuron-compile-2.33.0",
    ]
    assert [p.ref for p in profiles_on("neuron-compile-2.32.0")] == ["vllm-neuron-native@2.32.0"]
    assert [p.ref for p in profiles_on("neuron-2.21.1")] == ["lmi-neuronx@2.21.1"]
    assert watch_task_id("neuron-compile-2.27.0") == "watch_toolchain_neuron_compile_2_27_0"
    assert {p.ref for p in profiles_on("neuron-compile-2.26.1")} == {OPTIMUM.ref, VLLM.ref}
    assert [p.ref for p in profiles_on("neuron-compile-2.27.0")] == ["vllm-neuron@2.27.0"]

    class TI:
        def xcom_pull(self, task_ids: str, key: str = "return_value"):
            pulls = {
                ("check_workers", "workers"): {
                    "neuron-compile-2.26.1": {"served": True, "detail": "consumed by w1"},
                    "neuron-compile-2.27.0": {
                        "served": False,
                        "detail": "no Celery worker consumes queue 'neuron-compile-2.27.0'",
                    },
                },
                ("watch_toolchain_neuron_compile_2_26_1", "return_value"): {VLLM.ref: {"backend": "nxdi"}},
            }
            return pulls.get((task_ids, key))

    got = _queue_reports(TI(), [OPTIMUM, VLLM, newer])
    assert got[VLLM.ref] == {"backend": "nxdi"}
    assert got[OPTIMUM.ref] == (
        "no worker of queue 'neuron-compile-2.26.1' reported the toolchain of optimum-neuron@2.26.1: "
        "watch_toolchain_neuron_compile_2_26_1 did not succeed"
    )
    assert got[newer.ref] == (
        "no worker of queue 'neuron-compile-2.27.0' reported the toolchain of vllm-neuron@2.27.0: "
        "no Celery worker consumes queue 'neuron-compile-2.27.0'"
    )


def test_default_executor_reads_the_first_configured_one(monkeypatch) -> None:
    from neuronforge_airflow.operators.recompile import default_executor

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
def test_a_real_celery_worker_on_the_default_queue_does_not_serve_a_neuron_queue(tmp_path: Path) -> None:
    """redis + a Celery worker of Airflow's Celery app consuming `default` only: the answer
    `check_workers` gets through `celery_active_queues` says nobody consumes `neuron-2.26.1`."""
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
            "import json; from neuronforge_airflow.operators.recompile import celery_active_queues, queue_served\n"
            "print(json.dumps(queue_served('CeleryExecutor', celery_active_queues(2.0), 'neuron-2.26.1')))"
        )
        deadline = time.monotonic() + 90
        while True:  # until the worker is up and answers
            out = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True, check=True)
            served, why = json.loads(out.stdout.strip().splitlines()[-1])
            if "cpu-probe@" in why or time.monotonic() > deadline:
                break
        assert served is False and "no Celery worker consumes queue 'neuron-2.26.1'" in why
        assert "cpu-probe@" in why and ": default" in why
    finally:
        for proc in (worker, redis):
            if proc is not None:
                proc.terminate()
                try:
                    proc.wait(timeout=20)
                except subprocess.TimeoutExpired:
                    proc.kill()
