"""A run killed at each stage, then the identical rerun (issue 39: "a run that dies frees its work at
once"), and every long-running command writing to a reader that went away.

`kill -INT` / `kill -TERM` at each stage of `neuronforge run` (claim, download/verify, plan, compile,
smoke, publish; tests/reliability/stalled_cli.py holds the run there): exit 130 / 143 within 2 s of the
signal, one line after it naming the stage and that nothing was published, no traceback, the
toolchain child stopped, the lease released, no manifest — and the identical rerun starts building
at once and publishes. `kill -KILL` cannot be caught: the rerun on the same host still starts within
5 s (the dead holder's lease taken over at once: `leases`, same-host takeover).

Signals are sent with `Popen.send_signal` to the CLI's process: a shell's `&` job ignores SIGINT.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from tests.reliability.harness import cli, gone, snapshot
from tests.reliability.test_matrix import COMMANDS, DONE, _publish_some

ROOT = Path(__file__).resolve().parents[2]
TARGET = ["--instance", "inf2.xlarge", "--tp", "1", "--seq-len", "64"]
# `run`'s stages, as the one line names them (tests/reliability/stalled_cli.py stalls each)
STAGES = ("claim_build", "fetch_checkpoint", "plan_target", "compile_graphs", "smoke", "publish_artifact")
CAUGHT = {"INT": 130, "TERM": 143}
SIGNAL_TO_EXIT_S = 2.0
RERUN_STARTS_S = 5.0

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One NEURONFORGE_HOME for the module: the embedded model is generated once."""
    return tmp_path_factory.mktemp("kills-home")


@pytest.fixture
def env(home: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    monkeypatch.setenv("NEURONFORGE_HOME", str(home))
    monkeypatch.delenv("NEURONFORGE_STORE", raising=False)
    return {**os.environ, "PYTHONPATH": str(ROOT), "NEURONFORGE_HOME": str(home)}


class Stalled:
    """`neuronforge run` stopped at a stage in a child process, its stderr read line by line with the
    time each line came."""

    def __init__(self, stage: str, store: Path, marker: Path, env: dict[str, str]) -> None:
        argv = [sys.executable, "-m", "tests.reliability.stalled_cli", stage, str(marker)]
        argv += ["run", *TARGET, "--store", f"file://{store}"]
        self.proc = subprocess.Popen(
            argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, cwd=ROOT, text=True, errors="replace"
        )
        self.lines: list[tuple[float, str]] = []
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()
        self.marker = marker

    def _read(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.lines.append((time.monotonic(), line.rstrip("\n")))

    def wait_for_stage(self, timeout_s: float = 240.0) -> int:
        deadline = time.monotonic() + timeout_s
        while not self.marker.exists():
            assert self.proc.poll() is None, f"exited {self.proc.returncode}: {self.text()}"
            assert time.monotonic() < deadline, f"never reached the stage: {self.text()}"
            time.sleep(0.05)
        return int(self.marker.read_text())

    def kill(self, sig: signal.Signals) -> tuple[int, float]:
        """Send `sig`; (exit code, seconds from the signal to the exit)."""
        sent = time.monotonic()
        self.proc.send_signal(sig)
        code = self.proc.wait(timeout=60)
        took = time.monotonic() - sent
        self.reader.join(10)
        self.sent = sent
        return code, took

    def after_signal(self) -> list[str]:
        return [line for at, line in self.lines if at >= self.sent]

    def text(self) -> str:
        return "\n".join(line for _, line in self.lines)


def _leases(store: Path) -> dict[str, dict]:
    return {p.name: json.loads(p.read_text()) for p in store.glob("locks/*") if not p.name.startswith(".")}


def _published(store: Path) -> list[str]:
    return sorted(str(p.relative_to(store)) for p in (*store.glob("index/*.json"), *store.rglob("manifest.json")))


CASES = [(stage, sig) for stage in STAGES for sig in CAUGHT]


@pytest.mark.parametrize(("stage", "sig"), CASES, ids=[f"{st}|kill -{sig}" for st, sig in CASES])
def test_a_caught_signal_frees_the_build_and_the_rerun_publishes(
    stage: str, sig: str, env: dict[str, str], tmp_path: Path
) -> None:
    store = tmp_path / "store"
    run = Stalled(stage, store, tmp_path / "reached", env)
    child = run.wait_for_stage()
    code, took = run.kill(getattr(signal, f"SIG{sig}"))

    assert code == CAUGHT[sig], (code, run.text())
    assert took < SIGNAL_TO_EXIT_S, f"exited {took:.2f} s after the signal"
    said = run.after_signal()
    assert len(said) == 1, said
    assert said[0].startswith(f"interrupted by SIG{sig}: `neuronforge run` stopped during {stage}"), said
    assert "nothing was published" in said[0], said
    assert "Traceback" not in run.text() and "KeyboardInterrupt" not in run.text(), run.text()
    if stage == "compile_graphs":  # the toolchain child (a session of its own) went with it
        assert gone(child, 1.0), f"the compile child {child} still runs"
    assert _published(store) == []  # data first, manifest last: no manifest, no index entry
    held = {k: v for k, v in _leases(store).items() if v["expires"] > time.time()}
    assert held == {}, held

    rerun = cli(["run", *TARGET, "--store", f"file://{store}"])
    assert rerun.traceback is None, rerun.traceback
    assert rerun.code == 0, rerun.text
    summary = json.loads(rerun.out)
    assert summary["status"] == "published"
    assert summary["timings"]["claim_build"] < RERUN_STARTS_S, summary["timings"]


@pytest.mark.parametrize("stage", STAGES)
def test_after_kill_9_the_rerun_on_this_host_starts_within_5_s(stage: str, env: dict[str, str], tmp_path: Path) -> None:
    store = tmp_path / "store"
    run = Stalled(stage, store, tmp_path / "reached", env)
    child = run.wait_for_stage()
    code, _ = run.kill(signal.SIGKILL)
    assert code == -signal.SIGKILL
    rerun = Stalled("fetch_checkpoint", store, tmp_path / "rerun-reached", env)
    started = time.monotonic()
    try:
        rerun.wait_for_stage(timeout_s=RERUN_STARTS_S + 5)
        took = time.monotonic() - started
    finally:
        rerun.proc.kill()
        rerun.proc.wait()
        if stage == "compile_graphs" and not gone(child, 2.0):  # never leak it, whatever the assertion says
            with contextlib.suppress(ProcessLookupError):
                os.killpg(child, signal.SIGKILL)
    assert took < RERUN_STARTS_S, f"the rerun started building {took:.1f} s after"
    if stage == "compile_graphs":  # the toolchain child ended with its worker (neuronforge_toolchain.orphan)
        assert gone(child, 1.0), f"the compile child {child} outlived its SIGKILLed worker"


def test_a_second_signal_while_cleaning_up_ends_it_at_once(env: dict[str, str], tmp_path: Path) -> None:
    """Ctrl+C, and Ctrl+C again while the first one's cleanup waits for a toolchain child that ignores
    SIGTERM: the same one line, 130, at once, and the child killed."""
    store = tmp_path / "store"
    run = Stalled("compile_graphs!", store, tmp_path / "reached", env)
    child = run.wait_for_stage()
    run.sent = time.monotonic()
    run.proc.send_signal(signal.SIGINT)
    time.sleep(0.15)  # within the child's grace
    again = time.monotonic()
    run.proc.send_signal(signal.SIGINT)
    code = run.proc.wait(timeout=60)
    took = time.monotonic() - again
    run.reader.join(10)
    assert code == 130 and took < 0.3, (code, took)
    said = run.after_signal()
    assert len(said) == 1 and said[0].startswith("interrupted by SIGINT"), said
    assert "during compile_graphs" in said[0], said
    assert gone(child, 1.0), f"the compile child {child} still runs"


def test_a_child_that_ignores_sigterm_is_killed_within_the_promise(env: dict[str, str], tmp_path: Path) -> None:
    run = Stalled("compile_graphs!", tmp_path / "store", tmp_path / "reached", env)
    child = run.wait_for_stage()
    code, took = run.kill(signal.SIGTERM)
    assert code == 143 and took < SIGNAL_TO_EXIT_S, (code, took, run.text())
    assert len(run.after_signal()) == 1, run.after_signal()
    assert gone(child, 1.0), f"the compile child {child} still runs"


# -- the DAG's tasks ----------------------------------------------------------------------------------
@pytest.fixture
def leased(env: dict[str, str], tmp_path: Path, tiny_llama_template: Path) -> tuple[Path, dict]:
    """A build prepared, claimed (its lease held) and fetched as the DAG's tasks hand it on: the state
    compile_graphs receives, and the store."""
    from neuronforge.pipeline.buildstate import BuildState
    from neuronforge.pipeline.stage import Context
    from neuronforge.pipeline.stages import claim
    from neuronforge.profiles import parse_target
    from neuronforge.stores import open_store
    from neuronforge_airflow.operators.compile_publish import run_stage_task

    store = tmp_path / "store"
    target = parse_target({"instance_type": "inf2.xlarge", "tp_degree": 1, "sequence_length": 64, "profile": "cpu"})
    start = BuildState(model=str(tiny_llama_template), target=target, store_uri=f"file://{store}")
    prepared = BuildState.model_validate(run_stage_task("prepare", start.model_dump(mode="json")))
    claimed = claim.claim(prepared, Context(open_store(f"file://{store}"), tmp_path / "work"), 600.0, 0.1)
    assert claimed.lease is not None
    return store, run_stage_task("fetch_checkpoint", claimed.model_dump(mode="json"))


@pytest.mark.parametrize("sig", ["TERM", "INT"])
def test_a_stopped_task_stops_its_children_releases_the_lease_and_says_so(
    sig: str, leased: tuple[Path, dict], env: dict[str, str], tmp_path: Path
) -> None:
    """Airflow stops a task with SIGTERM (SIGINT first when its supervisor escalates) and SIGKILL 5 s
    later; its own SIGTERM handler leaves the task running. The task unwinds instead: the toolchain
    child stopped, the lease released, one log line, `AirflowTaskTerminated`."""
    store, state = leased
    state_file = tmp_path / "state.json"
    state_file.write_text(json.dumps(state))
    assert [v for v in _leases(store).values() if v["expires"] > time.time()], "the fetch task hands the lease on"
    marker = tmp_path / "reached"
    argv = ["--task", "compile_graphs", str(marker), str(state_file)]
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.reliability.stalled_cli", *argv],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**env, "PYTHONWARNINGS": "ignore"},
        cwd=ROOT,
        text=True,
    )
    deadline = time.monotonic() + 120
    while not marker.exists():
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
        time.sleep(0.05)
    child = int(marker.read_text())
    sent = time.monotonic()
    proc.send_signal(getattr(signal, f"SIG{sig}"))
    assert proc.stdout is not None
    stuck = threading.Timer(30, proc.kill)  # a task that goes on after the signal (as Airflow's leaves it)
    stuck.start()
    said = []  # until the task has ended (what the interpreter's teardown takes after is Airflow's)
    while not (said and said[-1].startswith("AirflowTaskTerminated")) and (line := proc.stdout.readline()):
        said.append(line)
    took = time.monotonic() - sent
    out, err = proc.communicate(timeout=60)
    stuck.cancel()
    out = "".join(said) + out
    assert proc.returncode == 0 and took < SIGNAL_TO_EXIT_S, (proc.returncode, took, out, err)
    line = f"interrupted by SIG{sig}: the task stopped during compile_graphs; nothing was published "
    line += "(its build lease is released)"
    assert out.strip().splitlines()[-1] == f"AirflowTaskTerminated: {line}", out
    assert (out + err).count(line) == 2 and "Traceback" not in out + err, out + err  # the log line, the raise
    assert gone(child, 1.0), f"the compile child {child} still runs"
    assert [v for v in _leases(store).values() if v["expires"] > time.time()] == []
    assert _published(store) == []


# -- a reader that goes away, for every long-running command ----------------------------------------
# The commands that work for a while and then write their answer (the short ones: test_cli_closed_pipe.py).
LONG_RUNNING = {
    "run": ["run", *TARGET, "--store", "{store}"],
    "fetch": COMMANDS["fetch"],
    "quantize": COMMANDS["quantize"],
    "sweep": COMMANDS["sweep"],
    "verify": COMMANDS["verify"],
    "gc": COMMANDS["gc"],
    "recompile": COMMANDS["recompile"],
    "index rebuild": COMMANDS["index rebuild"],
    "catalog stale": COMMANDS["catalog stale"],
    "cache prune": COMMANDS["cache prune"],
    "ls": COMMANDS["ls"],
    "store ls": COMMANDS["store ls"],
}
WRITERS = {"run", "fetch", "quantize", "gc", "index rebuild", "cache prune"}


@pytest.mark.parametrize("command", sorted(LONG_RUNNING))
def test_output_to_a_closed_pipe_ends_quietly(
    command: str, env: dict[str, str], tmp_path: Path, tiny_llama_template: Path
) -> None:
    store = tmp_path / "store"
    artifact = _publish_some(store)
    catalog = tmp_path / "models.yaml"
    target = "{instance_type: inf2.xlarge, tp_degree: 2, sequence_length: 64, dtype: fp32, profile: cpu}"
    catalog.write_text(f"models:\n  - source: {tiny_llama_template}\n    targets:\n      - {target}\n")
    fill = {
        "store": str(store),
        "model": str(tiny_llama_template),
        "work": str(tmp_path / "work"),
        "out": str(tmp_path / "sweep.json"),
        "artifact": artifact[:12],
    }
    argv = [a.format(**fill) for a in LONG_RUNNING[command]]
    before = snapshot(store)
    proc = subprocess.Popen(
        [sys.executable, "-m", "neuronforge.interfaces.cli", *argv],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**env, "NEURONFORGE_CATALOG": str(catalog), "PYTHONWARNINGS": "ignore"},
        cwd=tmp_path,
    )
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()  # the reader is gone before the command says anything
    err = proc.stderr.read().decode()
    code = proc.wait(timeout=300)
    assert "Traceback" not in err and "BrokenPipeError" not in err, err
    assert code in {141, *DONE.get(command, {0})}, (code, err)
    if command in WRITERS:  # what it wrote is whole: the store verifies
        checked = cli(["verify", "--store", str(store)])
        assert checked.code == 0, checked.text
    else:
        assert snapshot(store) == before
    shutil.rmtree(tmp_path / "work", ignore_errors=True)
