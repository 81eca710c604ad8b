"""`bench/dag_parse.py --runs 1 --processor-loops 1` runs end to end: the floor DAG and every DAG file
parsed and serialized in fresh interpreters, the heavy/scheduler-modules column and the slowest
imports printed, and a real `airflow dag-processor` read for each file's per-loop duration. Timings
are the bench's to report, not asserted; that no DAG file imports anything heavy is (here and in
tests/test_import_structure.py)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_one_run_prints_parse_serialization_and_the_dag_processor_for_every_dag_file() -> None:
    proc = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "dag_parse.py"), "--runs", "1", "--processor-loops", "1"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=900,
    )
    out = proc.stdout
    assert "floor (one-task DAG, nothing of ours)" in out, f"{out}\n{proc.stderr[-3000:]}"
    files = sorted(p.name for p in (ROOT / "dags").glob("*.py"))
    rows = [line for line in out.splitlines() if line.startswith("neuronforge_") and "this checkout" in line]
    assert sorted(r.split()[0] for r in rows) == files
    assert all(r.rstrip().endswith("-") for r in rows), rows  # nothing heavy, none of the scheduler's side
    # the tasks and schema-check columns: the compile DAG's many tasks serialized with no per-task check
    compile_row = next(r for r in rows if r.startswith("neuronforge_compile_publish.py")).split()
    assert int(compile_row[-3]) > 40 and int(compile_row[-2]) == 0, compile_row
    processor = out.split("dag-processor, per file per loop", 1)[1]
    for name in files:
        assert re.search(rf"{name.removesuffix('.py')}\s+this checkout: \d+\.\d+ s", processor), processor
    assert "slowest of our imports" in out and ("PASS" in out or "FAIL" in out)
