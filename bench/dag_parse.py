#!/usr/bin/env python
"""DAG parse and serialization: what the dag-processor pays for each DAG file on every loop, and every
task before it runs.

Airflow 3's dag-processor handles each file in a child process of its manager: it imports the file
(the DAG objects built), then serializes each DAG (`DagSerialization.to_dict`) and sends the JSON back
to be stored; every task instance re-parses its DAG file before it runs. Measured side by side, in
the same run:

1. per file, in a fresh interpreter that has imported Airflow's Task SDK and the standard provider's
   TaskFlow decorators first (what a task's process holds before it parses; nothing of the scheduler):
   `parse` — the DAG file executed (wall seconds, and `cpu s`: its CPU seconds, which a busy machine
   stretches less); then `serialize` — each of its DAGs through `DagSerialization.to_dict`,
   after a throwaway DAG warmed the serializer (the manager's child inherits it loaded), with the
   `jsonschema` schema checks it made (Param validation) counted. `--runs` fresh interpreters, medians;
2. the dag-processor itself (`--processor-loops`, 0 to skip): a real `airflow dag-processor` over a
   copy of each tree's DAG files and the floor DAG (a temporary AIRFLOW_HOME, SQLite, one parsing
   process, a file re-parsed every 5 s), read from the `dag` table: `last_parse_duration`, the seconds
   from the child's start to its result (fork, parse, serialize) that the manager records per file
   each loop. The first loop (cold caches, DB rows created) is left out; medians of the rest.

Rows: `floor` (a one-task DAG importing nothing of ours), each of `dags/*.py` at this checkout and,
per `--against REF` (repeatable), the same files at git revision REF (a temporary worktree). Goals:
every DAG file parses in <= 0.3 s and serializes in <= 0.2 s (medians), importing nothing heavy
(torch, transformers, boto3, ...) and none of Airflow's scheduler side (airflow.models.dagrun, ...).

    .venv/bin/python bench/dag_parse.py [--runs 7] [--against a16237d] [--processor-loops 3]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PARSE_GOAL_S = 0.3
SERIALIZE_GOAL_S = 0.2
HEAVY = ("torch", "transformers", "safetensors", "numpy", "huggingface_hub", "boto3", "botocore", "s3transfer")
# Airflow's scheduler side: nothing a DAG file needs at parse (tests/test_import_structure.py's list).
CORE = ("airflow.models.dagrun", "airflow.models.taskinstance", "airflow.models.serialized_dag", "airflow.api")
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
# What a task's process has imported before it parses its DAG file. (Before issue 41 this also
# preloaded the standard provider's trigger_dagrun module, which hid what it cost the recompile DAG.)
PRELOAD = "import airflow.sdk\nimport airflow.providers.standard.decorators.python\n"
TIMED = """
import sys, time, json, importlib.util
sys.path.insert(0, {root!r})
{preload}
from airflow.sdk.definitions._internal.contextmanager import DagContext
t, cpu = time.perf_counter(), time.process_time()
spec = importlib.util.spec_from_file_location("dagfile", {path!r})
module = importlib.util.module_from_spec(spec)
sys.modules["dagfile"] = module  # as Airflow's importer does: the DAGs it builds register with it
DagContext.current_autoregister_module_name = "dagfile"
spec.loader.exec_module(module)
parse_s, parse_cpu = time.perf_counter() - t, time.process_time() - cpu
DagContext.current_autoregister_module_name = None
loaded = set(sys.modules)
heavy = sorted({{m.split(".")[0] for m in loaded}} & set({heavy!r}))
core = sorted(m for m in loaded if m in {core!r} or m.startswith(tuple(c + "." for c in {core!r})))
dags = [d for d, m in DagContext.autoregistered_dags if m is module]

import jsonschema
from airflow.sdk import DAG
from airflow.sdk.bases.operator import BaseOperator
from airflow.serialization.serialized_objects import DagSerialization

with DAG("warm_up", schedule=None) as warm:
    BaseOperator(task_id="t")
DagSerialization.to_dict(warm)
checks = [0]
for cls in (jsonschema.Draft202012Validator, jsonschema.Draft7Validator, jsonschema.Draft4Validator):
    def counting(klass, *a, _o=cls.check_schema.__func__, **k):
        checks[0] += 1
        return _o(klass, *a, **k)
    cls.check_schema = classmethod(counting)
t = time.perf_counter()
for d in dags:
    DagSerialization.to_dict(d)
serialize_s = time.perf_counter() - t
print(json.dumps({{"parse": parse_s, "parse_cpu": parse_cpu, "serialize": serialize_s, "heavy": heavy, "core": core,
                  "tasks": sum(len(d.tasks) for d in dags), "checks": checks[0]}}))
"""


def _run(root: Path, path: Path, importtime: bool = False) -> subprocess.CompletedProcess[str]:
    code = TIMED.format(root=str(root), preload=PRELOAD, path=str(path), heavy=HEAVY, core=CORE)
    cmd = [sys.executable, *(["-X", "importtime"] if importtime else []), "-c", code]
    env = {**os.environ, "AIRFLOW__CORE__LOAD_EXAMPLES": "False"}
    return subprocess.run(cmd, cwd=root, capture_output=True, text=True, timeout=300, check=True, env=env)


def compile_tree(tree: Path) -> None:
    """Bytecode for every module a DAG file imports, as a deployment has it (an installed or imaged
    checkout, or any that ran once): without it (a fresh worktree, PYTHONDONTWRITEBYTECODE) each parse
    would compile our sources again."""
    dirs = [str(tree / d) for d in ("neuronforge", "neuronforge_airflow", "dags")]
    subprocess.run([sys.executable, "-m", "compileall", "-q", *dirs], cwd=tree, check=True, capture_output=True)


def time_file(root: Path, path: Path, runs: int) -> dict:
    parse, cpu, serialize, last = [], [], [], {}
    for _ in range(runs):
        last = json.loads(_run(root, path).stdout.strip().splitlines()[-1])
        parse.append(last["parse"])
        cpu.append(last["parse_cpu"])
        serialize.append(last["serialize"])
    return {
        "parse": statistics.median(parse),
        "parse_max": max(parse),
        "parse_cpu": statistics.median(cpu),
        "serialize": statistics.median(serialize),
        **{k: last[k] for k in ("heavy", "core", "tasks", "checks")},
    }


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


def _airflow_env(home: Path, tree: Path, dags: Path) -> dict[str, str]:
    return {
        **os.environ,
        "AIRFLOW_HOME": str(home),
        "AIRFLOW__CORE__DAGS_FOLDER": str(dags),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__DAG_PROCESSOR__PARSING_PROCESSES": "1",  # one file at a time: no file waits on another
        "AIRFLOW__DAG_PROCESSOR__MIN_FILE_PROCESS_INTERVAL": "5",
        "AIRFLOW__DAG_PROCESSOR__PRINT_STATS_INTERVAL": "0",
        "PYTHONPATH": os.pathsep.join([str(tree), *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))]),
    }


def _durations(db: Path) -> dict[str, list[tuple[str, float]]]:
    """Per DAG, its distinct (last_parsed_time, last_parse_duration) seen so far in one read."""
    try:
        with sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5) as conn:
            rows = conn.execute(
                "SELECT dag_id, last_parsed_time, last_parse_duration FROM dag WHERE last_parse_duration IS NOT NULL"
            ).fetchall()
    except sqlite3.Error:  # not created yet, or locked by a write: the next poll reads it
        return {}
    return {dag_id: [(str(at), float(seconds))] for dag_id, at, seconds in rows}


def processor_durations(tree: Path, dag_files: list[Path], floor: Path, loops: int, tmp: Path) -> dict[str, dict]:
    """Run `airflow dag-processor` over `dag_files` and the floor DAG until each file was parsed
    `loops` times after its first (or 8 minutes passed); per DAG id, the median `last_parse_duration`."""
    home, dags = tmp / "home", tmp / "dags"
    dags.mkdir(parents=True)
    for path in [*dag_files, floor]:
        shutil.copy(path, dags / path.name)
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(dags)], check=True, capture_output=True)
    env = _airflow_env(home, tree, dags)
    airflow = str(Path(sys.executable).with_name("airflow"))
    subprocess.run([airflow, "db", "migrate"], env=env, check=True, capture_output=True, timeout=600)
    seen: dict[str, dict[str, float]] = {}
    with open(tmp / "dag-processor.log", "w") as log:
        proc = subprocess.Popen(
            [airflow, "dag-processor"], env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )
    try:
        deadline = time.monotonic() + 480
        want = len(dag_files) + 1
        while time.monotonic() < deadline and proc.poll() is None:
            for dag_id, samples in _durations(home / "airflow.db").items():
                seen.setdefault(dag_id, {}).update(samples)
            if len(seen) >= want and all(len(s) > loops for s in seen.values()):
                break
            time.sleep(0.5)
    finally:
        os.killpg(proc.pid, signal.SIGTERM)  # the processor and its parsing children, by its group
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    out = {}
    for dag_id, samples in seen.items():
        ordered = [seconds for _, seconds in sorted(samples.items())][1:]  # the first loop left out
        out[dag_id] = {"median": statistics.median(ordered) if ordered else None, "loops": len(ordered)}
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--against", action="append", default=[], help="a git revision whose DAG files are timed too")
    ap.add_argument("--processor-loops", type=int, default=3, help="dag-processor loops timed per tree (0: skip)")
    args = ap.parse_args()

    dag_files = sorted(p.name for p in (ROOT / "dags").glob("*.py"))
    results: dict[tuple[str, str], dict] = {}
    processor: dict[str, dict[str, dict]] = {}
    with tempfile.TemporaryDirectory(prefix="nf-dagparse-") as tmp:
        floor_path = Path(tmp) / "floor_dag.py"
        floor_path.write_text(FLOOR_DAG)
        subprocess.run([sys.executable, "-m", "compileall", "-q", str(floor_path)], check=True, capture_output=True)
        floor = time_file(ROOT, floor_path, args.runs)
        trees = [("this checkout", ROOT)]
        for ref in args.against:
            tree = Path(tmp) / f"against-{len(trees)}"
            subprocess.run(["git", "worktree", "add", "--detach", "-q", str(tree), ref], cwd=ROOT, check=True)
            trees.append((ref, tree))
        try:
            for _, tree in trees:
                compile_tree(tree)
            print(
                f"floor (one-task DAG, nothing of ours): parse median {floor['parse']:.3f} s, "
                f"serialize {floor['serialize']:.3f} s\n"
            )
            print(
                f"{'DAG file':<38}{'tree':<15}{'parse s':>8}{'/floor':>8}{'max':>7}{'cpu s':>7}"
                f"{'serialize s':>12}{'/floor':>8}{'tasks':>6}{'schema checks':>14}  heavy / scheduler modules"
            )
            for dag_file in dag_files:
                for label, tree in trees:
                    if not (tree / "dags" / dag_file).exists():
                        continue
                    r = results[(dag_file, label)] = time_file(tree, tree / "dags" / dag_file, args.runs)
                    imported = ", ".join(r["heavy"] + r["core"][:2] + (["…"] if len(r["core"]) > 2 else [])) or "-"
                    print(
                        f"{dag_file:<38}{label[:14]:<15}{r['parse']:>8.3f}{r['parse'] / floor['parse']:>7.1f}x"
                        f"{r['parse_max']:>7.3f}{r['parse_cpu']:>7.3f}"
                        f"{r['serialize']:>12.3f}{r['serialize'] / floor['serialize']:>7.1f}x"
                        f"{r['tasks']:>6}{r['checks']:>14}  {imported}"
                    )
            print("\nslowest of our imports (self time, one -X importtime run, this checkout):")
            for dag_file in dag_files:
                slow = slowest_imports(ROOT, ROOT / "dags" / dag_file)
                print(f"  {dag_file}: " + ", ".join(f"{name} {s * 1000:.0f} ms" for name, s in slow))
            for label, tree in trees if args.processor_loops > 0 else ():
                files = [tree / "dags" / f for f in dag_files if (tree / "dags" / f).exists()]
                work = Path(tmp) / f"processor-{len(processor)}"
                processor[label] = processor_durations(tree, files, floor_path, args.processor_loops, work)
        finally:
            for _, tree in trees[1:]:
                subprocess.run(["git", "worktree", "remove", "--force", str(tree)], cwd=ROOT, check=False)

    if processor:
        print(f"\ndag-processor, per file per loop (`last_parse_duration`, median of {args.processor_loops} loops):")
        floor_s = processor["this checkout"].get("floor", {}).get("median")
        print(f"  floor (one-task DAG): {floor_s:.3f} s" if floor_s else "  floor: not parsed")
        for dag_file in dag_files:
            dag_id = dag_file.removesuffix(".py")
            cells = []
            for label, _ in trees:
                got = processor.get(label, {}).get(dag_id, {}).get("median")
                cells.append(f"{label}: {got:.3f} s" if got is not None else f"{label}: not parsed")
            print(f"  {dag_id:<36} " + "; ".join(cells))

    for ref in args.against:
        print(f"\nthis checkout against {ref}, same run:")
        for dag_file in dag_files:
            new, old = results.get((dag_file, "this checkout")), results.get((dag_file, ref))
            if new and old:
                print(
                    f"  {dag_file}: parse {old['parse'] / new['parse']:.1f}x faster, "
                    f"serialize {old['serialize'] / new['serialize']:.1f}x faster"
                )

    mine = {f: r for (f, label), r in results.items() if label == "this checkout"}
    goals = [
        (
            f"every DAG file parses in <= {PARSE_GOAL_S} s (median)",
            all(r["parse"] <= PARSE_GOAL_S for r in mine.values()),
        ),
        (
            f"every DAG file serializes in <= {SERIALIZE_GOAL_S} s (median)",
            all(r["serialize"] <= SERIALIZE_GOAL_S for r in mine.values()),
        ),
        ("nothing heavy imported", not any(r["heavy"] for r in mine.values())),
        ("none of Airflow's scheduler side imported", not any(r["core"] for r in mine.values())),
    ]
    print()
    for goal, met in goals:
        print(f"{'met' if met else 'NOT MET'}: {goal}")
    ok = all(met for _, met in goals)
    print(f"\n{'PASS' if ok else 'FAIL'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
