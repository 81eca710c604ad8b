"""`make demo`: the whole pipeline on the embedded default, driven by Airflow.

1. initialises a private Airflow home (SQLite) under `.neuronforge/airflow`,
2. generates the embedded default model (a tiny seeded Llama + tokenizer; no network),
3. runs the DAG `neuronforge_compile_publish` with `airflow dags test` (resolve, fetch, plan,
   compile on the CPU ahead-of-time backend, compile-cache sync, smoke test, publish),
4. runs it again: a cache hit that compiles nothing,
5. shows and verifies the artifact these runs published (the URI the runs' tasks reported, not the
   newest in the store), the two runs' times, and what the planner says about a real Llama-3.1-8B.

While a run works, its task and the steps' heartbeats are shown (a live line on a terminal).

Store: `NEURONFORGE_STORE` (default `.neuronforge/store`); work dir: `NEURONFORGE_HOME` (default `.neuronforge`).
"""

from __future__ import annotations

import json
import logging
import re
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from neuronforge.common import progress, settings
from neuronforge.common.deployment_names import COMPILE_DAG
from neuronforge.common.errors import InvalidInput
from neuronforge.common.secrets import mask_logs, print_line
from neuronforge.interfaces import local_airflow
from neuronforge.pipeline.planner import plan
from neuronforge.spec.modelconfig import ModelArch
from neuronforge.spec.target import TargetSpec

DAG_ID = COMPILE_DAG
FIRST = f"airflow dags test {DAG_ID} on the embedded default"
# run 1's announcement, by what the store holds before it (`already_published`): True, False, unknown
INTRO_FIRST = {
    False: f"{FIRST} (a cold build: compiles for about a minute)",
    True: f"{FIRST} (the store already holds this artifact: a cache hit)",
    None: FIRST,
}
INTRO_AGAIN = "the same request again (a cache hit: nothing to fetch or compile)"
DEMO_TARGET = settings.DEFAULT_TARGET
# meta-llama/Llama-3.1-8B config.json (architecture fields as published)
LLAMA_3_1_8B = {
    "architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 4096,
    "intermediate_size": 14336, "num_attention_heads": 32, "num_hidden_layers": 32,
    "num_key_value_heads": 8, "max_position_embeddings": 131072, "vocab_size": 128256,
    "tie_word_embeddings": False, "torch_dtype": "bfloat16",
}  # fmt: skip


def airflow(*args: str, log: Path | None = None) -> int:
    return local_airflow.run_airflow(*args, env=local_airflow.airflow_env(), log=log)


# `airflow dags test` prints the task logs as structlog lines: `<time> [info     ] <message> [<logger>] loc=...`
_LINE = re.compile(r"^\S+ \[\w+\s*\] (?P<msg>.*?)\s+\[(?P<logger>[\w.]+)\](?: loc=(?P<loc>\S+))?")
_TASK = re.compile(r"\[DAG TEST\] starting task_id=(?P<task>\S+)")
_RESULT = re.compile(r"^(?P<status>published|cache hit) (?P<slug>\S+): (?P<uri>\S+/manifest\.json)$")


@dataclass
class DagRun:
    """What one `airflow dags test` run reported about the demo's target."""

    rc: int
    seconds: float
    log: Path
    status: str = ""  # "published" or "cache hit", as the run's task logged it
    manifest_uri: str = ""


def run_dag(conf: str, log: Path, what: str) -> DagRun:
    """`airflow dags test`, its output kept in `log` and followed while it runs: the task it is in
    and the steps' heartbeats (`neuronforge.common.progress`) shown as progress; its result read back."""
    exe = Path(sys.executable).parent / "airflow"
    started = time.monotonic()
    result = DagRun(rc=0, seconds=0.0, log=log)
    with (
        progress.step(what) as step,
        open(log, "w", encoding="utf-8") as out,
        subprocess.Popen(
            [str(exe), "dags", "test", DAG_ID, "--conf", conf],
            env=local_airflow.airflow_env(),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        ) as proc,
    ):
        assert proc.stdout is not None
        for line in proc.stdout:
            out.write(line)
            m = _LINE.match(line)
            if not m:
                continue
            msg = m["msg"]
            if task := _TASK.search(msg):
                step.note(f"task {task['task']}")
            elif (m["loc"] or "").startswith("progress.py"):  # a step's heartbeat or its duration
                step.note(msg)
            elif found := _RESULT.match(msg):
                result.status, result.manifest_uri = found["status"], found["uri"]
        result.rc = proc.wait()
    result.seconds = time.monotonic() - started
    return result


def main() -> int:
    """Progress: a live display on a terminal, else one line per task and heartbeat on stdout."""
    mask_logs()  # as the CLI's `main`: every log line masked (common.secrets)
    lines = logging.StreamHandler(sys.stdout)
    lines.setFormatter(logging.Formatter("  %(message)s"))
    logger = logging.getLogger("neuronforge.common.progress")
    level, propagate = logger.level, logger.propagate
    logger.addHandler(lines)
    logger.setLevel(logging.INFO)
    logger.propagate = False
    old = progress.use(progress.for_cli(quiet=False, machine=False))
    try:
        return demo()
    finally:
        progress.use(old)
        logger.removeHandler(lines)
        logger.setLevel(level)
        logger.propagate = propagate


def already_published() -> bool | None:
    """Whether the store holds the demo's artifact before run 1, asked as the DAG's first task asks
    it (`find_published`: the cache key, one index lookup); None when it cannot be told here (then
    run 1 is announced without a guess). Only the announcement depends on it: the runs report
    what they did."""
    from neuronforge.interfaces.cli.options import opened_store
    from neuronforge.pipeline.buildstate import BuildState
    from neuronforge.pipeline.stages.prepare import find_published
    from neuronforge.profiles import parse_target

    uri = settings.store_uri()
    try:
        state = BuildState(
            model=settings.DEFAULT_MODEL, target=parse_target({"profile": "cpu", **DEMO_TARGET}), store_uri=uri
        )
        return find_published(state, opened_store(uri, must_exist=False), settings.work_dir()) is not None
    except Exception as exc:  # an announcement is no reason to fail: the DAG's own prepare reports it
        logging.getLogger(__name__).info("whether the store holds the demo's artifact: not known (%s)", exc)
        return None


def demo() -> int:
    home = settings.home()
    print(f"Airflow home {local_airflow.default_home()} (SQLite); store {settings.store_uri()}")
    try:
        # the cluster policy, the database, the neuron_cores pool: as `neuronforge airflow` has them
        with progress.heartbeat("preparing Airflow's metadata DB"):
            revision = local_airflow.init_home(local_airflow.default_home(), local_airflow.airflow_env())
    except InvalidInput as exc:
        print_line(f"error: {exc}")
        return 1
    print(local_airflow.said(revision))
    conf = json.dumps({"model": settings.DEFAULT_MODEL, "targets": [DEMO_TARGET]})

    runs: list[DagRun] = []
    for attempt in (1, 2):
        log = home / "airflow" / f"demo-run-{attempt}.log"
        intro = INTRO_FIRST[already_published()] if attempt == 1 else INTRO_AGAIN
        print(f"\nrun {attempt}: {intro}")
        run = run_dag(conf, log, f"run {attempt}")
        if run.rc != 0 or not run.manifest_uri:
            print_line(f"error: the DAG run failed (exit {run.rc}); log: {log}")
            return 1
        kind = "compiled and published" if run.status == "published" else "cache hit: nothing fetched or compiled"
        print(f"run {attempt}: {kind} in {run.seconds:.0f}s (log {log})")
        runs.append(run)
    cold, hit = runs
    if hit.manifest_uri != cold.manifest_uri:
        print_line(f"error: run 2 found {hit.manifest_uri}, not run 1's {cold.manifest_uri}")
        return 1

    from neuronforge.artifacts.opening import open_artifact
    from neuronforge.interfaces.cli import main as cli

    print()
    cli(["ls", settings.store_uri()])
    key = open_artifact(cold.manifest_uri, None, by="show").key
    print(f"\nThis demo's artifact (cache key {key}):")
    cli(["show", cold.manifest_uri])
    print("\nIts consumer's load-time rules, re-checked on a downloaded copy:")
    cli(["verify", cold.manifest_uri])
    print("\nThe serving profiles (the Neuron ones compile on Neuron workers):")
    cli(["profiles", "--brief"])

    big = ModelArch.from_config(LLAMA_3_1_8B)
    print("\nThe planner on a real config (meta-llama/Llama-3.1-8B, bf16, 4096 tokens):")
    for tp in (1, 2):
        t = TargetSpec.parse(
            {"instance_type": "inf2.xlarge", "tp_degree": tp, "sequence_length": 4096, "profile": "vllm-neuron"}
        )
        memory = next(c for c in plan(big, t).checks if c.name == "memory")
        print(f"  tp={tp}: {memory.message}")
    print(f"\nTimings: {timings(cold, hit)}")
    print(NEXT)
    return 0


NEXT = """
Next:
  make airflow                      the Airflow UI: trigger a build from its form, browse the catalog
  neuronforge profiles              every serving profile, its lifecycle per instance family, its sources
  neuronforge plan --help           will a model fit a target, and if not, what would
  docs/releasing.md                 approve, promote and roll back builds by release channel"""


def timings(cold: DagRun, hit: DagRun) -> str:
    """The demo's two runs, each named for what it did."""
    if cold.status == "published":
        return f"cold build {cold.seconds:.0f}s, cache hit {hit.seconds:.0f}s"
    return (
        f"cache hit {cold.seconds:.0f}s and {hit.seconds:.0f}s: the store already held this artifact "
        "(`make clean` removes .neuronforge/ for a cold build)"
    )


if __name__ == "__main__":
    sys.exit(main())
