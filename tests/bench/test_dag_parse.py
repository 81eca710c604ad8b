"""`bench/dag_parse.py --runs 1` runs end to end: the floor DAG and every DAG file timed in fresh
interpreters, the heavy-module column and the slowest imports printed. Timings are the bench's to
report, not asserted; that no DAG file imports anything heavy is (here and in
tests/test_import_structure.py)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_one_run_prints_every_dag_file_and_nothing_heavy() -> None:
    proc = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "dag_parse.py"), "--runs", "1"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    out = proc.stdout
    assert "floor (one-task DAG, nothing of ours)" in out, f"{out}\n{proc.stderr[-3000:]}"
    rows = [line for line in out.splitlines() if line.startswith("neuronforge_") and "this checkout" in line]
    assert sorted(r.split()[0] for r in rows) == sorted(p.name for p in (ROOT / "dags").glob("*.py"))
    assert all(r.rstrip().endswith("-") for r in rows), rows  # the heavy-modules column is empty
    assert "slowest of our imports" in out and ("PASS" in out or "FAIL" in out)
