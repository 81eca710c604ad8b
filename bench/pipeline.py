#!/usr/bin/env python
"""Pipeline benchmark: a cold run vs a re-run that finds the artifact published.

Three levels, each from a fresh NEURONFORGE_HOME (empty compile cache, empty inductor cache, empty store):
- core:      `neuronforge.pipeline.runner.run_target` in this process (what one Airflow task chain does);
- airflow:   `airflow dags test neuronforge_compile_publish` (adds Airflow's start-up and task overhead);
- scheduler: runs triggered through the REST API of a real deployment (tests/deployment/airflow_deploy.py:
             PostgreSQL, api-server, scheduler, dag-processor, triggerer; LocalExecutor by default, or
             `--executor CeleryExecutor` with its redis and Celery workers), side by side with a one-task
             no-op DAG in the same deployment: `--runs` cold runs (each into a store of its own, the
             executing home's work dir emptied first), then as many hits and no-op runs, alternating
             (after one uncounted no-op run). A run's time is the scheduler's own record, queued -> end.
             Prints the medians and hit / no-op (issue 26's goal: <= 2.0x).
Prints wall times, the ratio cold / hit, and the compiler invocations of each run (hit goal: 0).

    .venv/bin/python bench/pipeline.py [--skip-airflow] [--skip-scheduler] [--runs 3] [--executor LocalExecutor]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

NOOP_DAG_ID = "neuronforge_bench_noop"
NOOP_DAG = f'''"""bench/pipeline.py's baseline: one task that does nothing, in the same deployment."""

import pendulum
from airflow.sdk import dag, task


@dag(dag_id="{NOOP_DAG_ID}", schedule=None, start_date=pendulum.datetime(2026, 1, 1, tz="UTC"), catchup=False)
def noop_dag():
    @task
    def noop() -> None:
        return None

    noop()


noop_dag()
'''


def core(home: Path) -> tuple[float, float, int, int]:
    from neuronforge.common import settings
    from neuronforge.interfaces.demo import DEMO_TARGET
    from neuronforge.pipeline.runner import run_target
    from neuronforge.spec.target import TargetSpec
    from neuronforge.stores import open_store

    os.environ["NEURONFORGE_HOME"] = str(home)
    model = settings.DEFAULT_MODEL
    target = TargetSpec.parse({k: v for k, v in DEMO_TARGET.items()})
    store = open_store(settings.store_uri())
    t = time.perf_counter()
    cold = run_target(model, target, store, settings.work_dir())
    cold_s = time.perf_counter() - t
    t = time.perf_counter()
    hit = run_target(model, target, store, settings.work_dir())
    hit_s = time.perf_counter() - t
    assert hit.status == "cache-hit", hit.status
    return cold_s, hit_s, cold.compiler_invocations, hit.compiler_invocations


def airflow(home: Path) -> tuple[float, float, int, int]:
    from neuronforge.common import settings
    from neuronforge.interfaces.demo import DAG_ID, DEMO_TARGET
    from neuronforge.interfaces.demo import airflow as run_airflow

    os.environ["NEURONFORGE_HOME"] = str(home)
    run_airflow("db", "migrate")
    conf = json.dumps({"model": settings.DEFAULT_MODEL, "targets": [DEMO_TARGET]})
    times, invocations = [], []
    for i in (1, 2):
        log = home / f"run-{i}.log"
        t = time.perf_counter()
        rc = run_airflow("dags", "test", DAG_ID, "--conf", conf, log=log)
        times.append(time.perf_counter() - t)
        text = log.read_text()
        if rc != 0 or "state=success" not in text:
            raise SystemExit(f"airflow run {i} failed: see {log}")
        invocations.append(text.count("(compiled,"))  # one log line per graph the compiler built
    return times[0], times[1], invocations[0], invocations[1]


def _seconds(run: dict, start: str = "queued_at") -> float:
    def at(field: str) -> datetime:
        return datetime.fromisoformat(run[field].replace("Z", "+00:00"))

    return (at("end_date") - at(start)).total_seconds()


def _timed_run(dep, dag_id: str, conf: dict, timeout: float = 900) -> dict:
    """Trigger through the REST API and poll (every 0.2 s) until the run ends; the run as the API
    reports it, with `wall` (trigger to seen ended) and `ran` (its task instances not skipped)."""
    t = time.perf_counter()
    r = dep.trigger(dag_id, conf)
    assert r.status_code in (200, 201), r.text
    run_id = r.json()["dag_run_id"]
    deadline = time.monotonic() + timeout
    while (run := dep.run(dag_id, run_id))["state"] not in ("success", "failed"):
        if time.monotonic() > deadline:
            raise SystemExit(f"{dag_id} {run_id} still {run['state']} after {timeout:.0f}s")
        time.sleep(0.2)
    run["wall"] = time.perf_counter() - t
    if run["state"] != "success":
        raise SystemExit(f"{dag_id} {run_id} ended {run['state']}:\n{dep.describe(dag_id, run_id)}")
    tis = dep.task_instances(dag_id, run_id)
    run["ran"] = sorted(f"{ti['task_id']}[{ti['map_index']}]" for ti in tis if ti["state"] != "skipped")
    run["skipped"] = sum(ti["state"] == "skipped" for ti in tis)
    return run


def scheduler(runs: int, executor: str) -> dict[str, list[dict]]:
    from neuronforge.common.settings import DEFAULT_TARGET
    from tests.deployment.airflow_deploy import COMPILE_DAG, deploy, teardown

    root = Path(tempfile.mkdtemp(prefix="nf-bench-scheduler-"))
    root.chmod(0o755)  # PostgreSQL may run as another account
    t = time.perf_counter()
    dep = deploy(root, executor=executor, extra_dags={f"{NOOP_DAG_ID}.py": NOOP_DAG})
    print(f"deployment ({executor}) up in {time.perf_counter() - t:.0f}s at {root}", flush=True)
    try:
        deadline = time.monotonic() + 240
        while dep.request("GET", f"/api/v2/dags/{NOOP_DAG_ID}").status_code != 200:
            if time.monotonic() > deadline:
                raise SystemExit(f"{NOOP_DAG_ID} not parsed after 240s")
            time.sleep(1)
        dep.unpause(NOOP_DAG_ID)
        # where the default queue's tasks run: the scheduler (LocalExecutor) or the Celery workers
        homes = [w.home for w in dep.workers if w.queues == "default"] or [root / "scheduler-home"]
        out: dict[str, list[dict]] = {"cold": [], "hit": [], "no-op": []}
        stores = [f"s3://{dep.bucket}/bench-cold-{i}" for i in range(runs)]
        for store in stores:
            for home in homes:  # nothing compiled before: no compile cache, no inductor cache
                shutil.rmtree(home / "work", ignore_errors=True)
            out["cold"].append(_timed_run(dep, COMPILE_DAG, {"targets": [DEFAULT_TARGET], "store": store}))
            print(f"cold  {_seconds(out['cold'][-1]):6.2f}s", flush=True)
        _timed_run(dep, NOOP_DAG_ID, {})  # uncounted: the no-op DAG's first run
        for _ in range(runs):
            out["hit"].append(_timed_run(dep, COMPILE_DAG, {"targets": [DEFAULT_TARGET], "store": stores[0]}))
            out["no-op"].append(_timed_run(dep, NOOP_DAG_ID, {}))
            print(f"hit   {_seconds(out['hit'][-1]):6.2f}s  no-op {_seconds(out['no-op'][-1]):6.2f}s", flush=True)
        return out
    finally:
        teardown(dep)
        shutil.rmtree(root, ignore_errors=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--skip-airflow", action="store_true")
    ap.add_argument("--skip-scheduler", action="store_true")
    ap.add_argument("--skip-core", action="store_true")
    ap.add_argument("--runs", type=int, default=3, help="scheduler level: runs of each kind (default 3)")
    ap.add_argument("--executor", default="LocalExecutor", choices=("LocalExecutor", "CeleryExecutor"))
    args = ap.parse_args()
    levels = ([] if args.skip_core else [("core", core)]) + ([] if args.skip_airflow else [("airflow", airflow)])
    if levels:
        print(f"{'level':<9}{'cold s':>9}{'hit s':>9}{'cold/hit':>10}{'compiles cold':>15}{'compiles hit':>14}")
    for name, fn in levels:
        with tempfile.TemporaryDirectory(prefix=f"nf-bench-{name}-") as tmp:
            cold_s, hit_s, c_cold, c_hit = fn(Path(tmp))
        print(f"{name:<9}{cold_s:>9.2f}{hit_s:>9.3f}{cold_s / hit_s:>9.0f}x{c_cold:>15}{c_hit:>14}")
    if args.skip_scheduler:
        return
    out = scheduler(args.runs, args.executor)
    print(f"\nscheduler ({args.executor}), {args.runs} runs each, medians (queued -> end; trigger -> seen ended):")
    medians = {}
    for kind, runs in out.items():
        medians[kind] = statistics.median(_seconds(r) for r in runs)
        wall = statistics.median(r["wall"] for r in runs)
        ran = runs[-1]["ran"]
        print(
            f"  {kind:<6}{medians[kind]:>8.2f}s{wall:>8.2f}s   task instances run: {len(ran)}, skipped: "
            f"{runs[-1]['skipped']}" + (f" ({', '.join(ran)})" if len(ran) <= 3 else "")
        )
    ratio = medians["hit"] / medians["no-op"]
    print(f"  hit / no-op = {ratio:.2f}x (goal <= 2.0x: {'met' if ratio <= 2.0 else 'NOT met'})")


if __name__ == "__main__":
    main()
