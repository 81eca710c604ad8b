#!/usr/bin/env python
"""DAG parse time: what the dag-processor and every task pay to import each DAG file.

Airflow 3's dag-processor parses each file in a process forked from its manager (Airflow imported,
no DAG module), and every task instance re-parses its DAG file before it runs. So each file is timed
here the same way: a fresh interpreter that has imported Airflow's SDK and the standard provider
first, then the DAG file executed (its imports and the DAG object built). Measured side by side,
in the same run:

- `floor`: a one-task DAG file importing nothing of ours (what any DAG costs);
- each of `dags/*.py` at this checkout;
- with `--against REF`: the same files at git revision REF (a temporary worktree), e.g. the commit
  before the import restructuring, so the ratio is measured, not remembered.

Prints the median and max of `--runs` runs per file, the ratio to the floor, the heavy modules the
file pulled in (torch, transformers, boto3, …; `tests/test_import_structure.py` fails on any), and
the slowest of our modules by `python -X importtime`. Goal: every DAG file <= 0.3 s (median).

    .venv/bin/python bench/dag_parse.py [--runs 7] [--against a16237d]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
GOAL_S = 0.3
HEAVY = ("torch", "transformers", "safetensors", "numpy", "huggingface_hub", "boto3", "botocore", "s3transfer")
FLOOR_DAG = """
import pendulum
from airflow.sdk import dag, task


@dag(schedule=None, start_date=pendulum.datetime(2026, 1, 1, tz="UTC"), catchup=False)
def floor():
    @task
    def noop() -> None:
        return None

    noop()


floor()
"""
# What the dag-processor's process has imported before it parses a file.
PRELOAD = (
    "import airflow.sdk\n"
    "import airflow.providers.standard.decorators.python\n"
    "import airflow.providers.standard.operators.trigger_dagrun\n"
)
TIMED = """
import sys, time, json, importlib.util
sys.path.insert(0, {root!r})
{preload}
t = time.perf_counter()
spec = importlib.util.spec_from_file_location("dagfile", {path!r})
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
seconds = time.perf_counter() - t
heavy = sorted({{m.split(".")[0] for m in sys.modules}} & set({heavy!r}))
print(json.dumps({{"seconds": seconds, "heavy": heavy}}))
"""


def _run(root: Path, path: Path, importtime: bool = False) -> subprocess.CompletedProcess[str]:
    code = TIMED.format(root=str(root), preload=PRELOAD, path=str(path), heavy=HEAVY)
    cmd = [sys.executable, *(["-X", "importtime"] if importtime else []), "-c", code]
    return subprocess.run(cmd, cwd=root, capture_output=True, text=True, timeout=300, check=True)


def time_file(root: Path, path: Path, runs: int) -> dict:
    samples, heavy = [], []
    for _ in range(runs):
        out = json.loads(_run(root, path).stdout.strip().splitlines()[-1])
        samples.append(out["seconds"])
        heavy = out["heavy"]
    return {"median": statistics.median(samples), "max": max(samples), "heavy": heavy}


def slowest_imports(root: Path, path: Path, n: int = 5) -> list[tuple[str, float]]:
    """Our modules (and the heavy ones) by self time in one `-X importtime` run."""
    rows = []
    for line in _run(root, path, importtime=True).stderr.splitlines():
        parts = line.split("|")
        if len(parts) != 3 or not parts[0].startswith("import time:"):
            continue
        name = parts[2].strip()
        try:
            self_us = int(parts[0].split(":")[1])
        except ValueError:
            continue
        if name.split(".")[0] in ("neuronforge", "neuronforge_airflow", *HEAVY):
            rows.append((name, self_us / 1e6))
    return sorted(rows, key=lambda r: -r[1])[:n]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--against", default=None, help="a git revision whose DAG files are timed too (worktree)")
    args = ap.parse_args()

    with tempfile.TemporaryDirectory(prefix="nf-dagparse-") as tmp:
        floor_path = Path(tmp) / "floor_dag.py"
        floor_path.write_text(FLOOR_DAG)
        floor = time_file(ROOT, floor_path, args.runs)
        trees = [("this checkout", ROOT)]
        if args.against:
            against_tree = Path(tmp) / "against"
            subprocess.run(
                ["git", "worktree", "add", "--detach", "-q", str(against_tree), args.against], cwd=ROOT, check=True
            )
            trees.append((args.against, against_tree))
        try:
            print(f"floor (one-task DAG, nothing of ours): median {floor['median']:.3f} s, max {floor['max']:.3f} s\n")
            print(f"{'DAG file':<40}{'tree':<16}{'median s':>10}{'max s':>8}{'/ floor':>9}  heavy modules")
            results: dict[tuple[str, str], dict] = {}
            for dag_file in sorted(p.name for p in (ROOT / "dags").glob("*.py")):
                for label, tree in trees:
                    if not (tree / "dags" / dag_file).exists():
                        continue
                    r = time_file(tree, tree / "dags" / dag_file, args.runs)
                    results[(dag_file, label)] = r
                    print(
                        f"{dag_file:<40}{label[:15]:<16}{r['median']:>10.3f}{r['max']:>8.3f}"
                        f"{r['median'] / floor['median']:>8.1f}x  {', '.join(r['heavy']) or '-'}"
                    )
            print("\nslowest of our imports (self time, one -X importtime run, this checkout):")
            for dag_file in sorted(p.name for p in (ROOT / "dags").glob("*.py")):
                slow = slowest_imports(ROOT, ROOT / "dags" / dag_file)
                print(f"  {dag_file}: " + ", ".join(f"{name} {s * 1000:.0f} ms" for name, s in slow))
            mine = [r for (_, label), r in results.items() if label == trees[0][0]]
            ok = all(r["median"] <= GOAL_S and not r["heavy"] for r in mine)
            if args.against:
                for dag_file in sorted({f for f, _ in results}):
                    new, old = results.get((dag_file, trees[0][0])), results.get((dag_file, args.against))
                    if new and old:
                        print(f"  {dag_file}: {old['median'] / new['median']:.1f}x faster than at {args.against}")
        finally:
            if args.against:
                subprocess.run(["git", "worktree", "remove", "--force", str(against_tree)], cwd=ROOT, check=False)
    print(f"\n{'PASS' if ok else 'FAIL'} (goal: every DAG file <= {GOAL_S} s median, nothing heavy imported)")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
