#!/usr/bin/env python
"""Pipeline benchmark: a cold run vs a re-run that finds the artifact published, in the same run.

Two levels, each from a fresh NEURONFORGE_HOME (empty compile cache, empty inductor cache, empty store):
- core:    `neuronforge.pipeline.run_target` in this process (what one Airflow task chain does);
- airflow: `airflow dags test neuronforge_compile_publish` (adds Airflow's start-up and task overhead).
Prints wall times, the ratio cold / hit, and the compiler invocations of each run (hit goal: 0).

    .venv/bin/python bench/pipeline.py [--skip-airflow]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def core(home: Path) -> tuple[float, float, int, int]:
    from neuronforge import settings
    from neuronforge.demo import DEMO_TARGET
    from neuronforge.pipeline import run_target
    from neuronforge.stores import open_store
    from neuronforge.target import TargetSpec

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
    from neuronforge import settings
    from neuronforge.demo import DAG_ID, DEMO_TARGET
    from neuronforge.demo import airflow as run_airflow

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


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--skip-airflow", action="store_true")
    args = ap.parse_args()
    levels = [("core", core)] + ([] if args.skip_airflow else [("airflow", airflow)])
    print(f"{'level':<9}{'cold s':>9}{'hit s':>9}{'cold/hit':>10}{'compiles cold':>15}{'compiles hit':>14}")
    for name, fn in levels:
        with tempfile.TemporaryDirectory(prefix=f"nf-bench-{name}-") as tmp:
            cold_s, hit_s, c_cold, c_hit = fn(Path(tmp))
        print(f"{name:<9}{cold_s:>9.2f}{hit_s:>9.3f}{cold_s / hit_s:>9.0f}x{c_cold:>15}{c_hit:>14}")


if __name__ == "__main__":
    main()
