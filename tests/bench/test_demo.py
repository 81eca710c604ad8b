"""`bench/demo.py` splits the demo's output into its steps. The bench itself runs `make demo` (minutes):
it is run by hand and its numbers go to the README and docs/benchmarks.md; only its reading is tested."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
spec = importlib.util.spec_from_file_location("bench_demo", ROOT / "bench" / "demo.py")
assert spec is not None and spec.loader is not None
demo = importlib.util.module_from_spec(spec)
sys.modules[spec.name] = demo  # its dataclasses look their module up
spec.loader.exec_module(demo)


def test_the_steps_are_read_from_the_run_lines_not_the_progress_lines() -> None:
    lines = [
        (1.0, "Airflow home /x/.neuronforge/airflow (SQLite); store file:///x/.neuronforge/store"),
        (20.0, ""),
        (20.0, "run 1: airflow dags test neuronforge_compile_publish on the embedded default"),
        (30.0, "  run 1: task fetch (10s)"),
        (40.0, "run 1: task compile (20s)"),  # a progress line at the start of a line: not an end
        (116.0, "run 1: compiled and published in 96s (log /x/demo-run-1.log)"),
        (117.0, "run 2: the same request again"),
        (138.0, "run 2: cache hit: nothing fetched or compiled in 21s (log /x/demo-run-2.log)"),
        (150.0, "Timings: cold build 96s, cache hit 21s"),
    ]
    steps = demo.segments(lines, 0.0, 160.0)
    assert [(name, end - start) for name, start, end in steps] == [
        ("prepare", 20.0),
        ("run 1", 96.0),
        ("run 2", 21.0),
        ("report", 22.0),
    ]
    assert demo.segments([(5.0, "something else")], 0.0, 9.0) == [("(no run lines: see the log)", 0.0, 9.0)]
