"""Leases that notice death, with real processes: a holder SIGKILLed on this host is taken over at
once (not after its TTL), a running one never; a holder on another host (a foreign boot id) after its
TTL of a few heartbeats; and `neuronforge run` as users run it twice — the waiter says who holds the
build, once, at the default verbosity, and builds within 5 s of the first run's death."""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from neuronforge.artifacts import layout, leases
from neuronforge.stores import open_store

ROOT = Path(__file__).resolve().parents[1]
KEY = "d" * 64

# A process that takes the lease (a TTL of 10 minutes: only its death can free it early), says so, and waits.
HOLD = """
import sys, time
from neuronforge.artifacts import leases
from neuronforge.stores import open_store
lease = leases.try_acquire(open_store(sys.argv[1]), sys.argv[2], "holder", ttl_s=600)
print("held" if lease else "refused", flush=True)
time.sleep(600)
"""


def _holder(store_uri: str, key: str = KEY) -> subprocess.Popen:
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLD, store_uri, key],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert proc.stdout is not None and proc.stdout.readline().strip() == "held"
    return proc


def test_a_holder_killed_on_this_host_is_taken_over_at_once(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    store = open_store(f"file://{tmp_path / 'store'}")
    proc = _holder(store.root_uri)
    try:
        held = leases.current(store, KEY)
        assert held is not None and held.owner is not None and held.owner.pid == proc.pid
        assert leases.state(held) == leases.LIVE and held.expires - held.heartbeat == pytest.approx(600)
        assert leases.try_acquire(store, KEY, "waiter") is None  # a running holder of this host keeps it
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    assert leases.state(leases.current(store, KEY)) == leases.DEAD_HERE
    started = time.monotonic()
    with caplog.at_level(logging.WARNING, "neuronforge.artifacts.leases"):
        taken = leases.try_acquire(store, KEY, "waiter")
    assert taken is not None and time.monotonic() - started < 1  # at once, not 600 s later
    assert f"took over from holder: pid {proc.pid} is gone on this host" in caplog.text


def test_a_reused_pid_is_not_taken_for_the_holder(tmp_path: Path) -> None:
    """The holder died and the kernel gave its PID to another process (here: this one): its start
    time, recorded in the lease, is not this process's, so the lease is dead all the same."""
    store = open_store(f"file://{tmp_path / 'store'}")
    lease = leases.try_acquire(store, KEY, "holder", ttl_s=600)
    assert lease is not None and lease.owner is not None and lease.owner.pid == os.getpid()
    assert leases.state(leases.current(store, KEY)) == leases.LIVE  # this process: alive
    me = lease.owner
    forged = leases.Lease(KEY, "holder", lease.started, lease.heartbeat, lease.expires, owner=me)
    forged.owner = leases.Owner(me.host, me.pid, (me.pid_start or 0) + 1)  # started at another time
    store.put_bytes(forged.record(), layout.lock_entry(KEY))
    assert leases.gone_here(leases.current(store, KEY).owner) == (
        f"pid {me.pid} is gone on this host (the pid is another process's now)"
    )
    assert leases.try_acquire(store, KEY, "waiter") is not None


def test_a_holder_on_another_host_is_taken_over_after_its_ttl_of_a_few_heartbeats(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Another host's PIDs mean nothing here (a foreign boot id): its lease lapses after the TTL,
    3 heartbeats by default, and the waiter says for how long it was silent."""
    monkeypatch.setenv("NEURONFORGE_LEASE_HEARTBEAT_S", "0.4")  # TTL: 3 heartbeats = 1.2 s
    store = open_store(f"file://{tmp_path / 'store'}")
    lease = leases.try_acquire(store, KEY, "far-host:4242:0f0f0f0f")
    assert lease is not None and lease.heartbeat_s == 0.4 and lease.expires - lease.heartbeat == pytest.approx(1.2)
    far = leases.Host("far-host", "0b0b0b0b-other-boot", lease.owner.host.pid_ns)
    dead_pid = _a_dead_pid()
    lease.owner = leases.Owner(far, dead_pid, 1)  # a pid that is gone here: irrelevant, another host's
    store.put_bytes(lease.record(), layout.lock_entry(KEY))
    assert leases.state(leases.current(store, KEY)) == leases.LIVE
    started = time.monotonic()
    with caplog.at_level(logging.WARNING, "neuronforge.artifacts.leases"):
        while (taken := leases.try_acquire(store, KEY, "waiter")) is None:
            time.sleep(0.1)  # a quarter heartbeat, as the CLI's waiter polls
    waited = time.monotonic() - started
    assert taken is not None and 0.9 < waited < 1.2 + 0.4  # its TTL, within a poll: not 10 minutes
    assert "took over from far-host:4242:0f0f0f0f: silent for 1 s (it renews every 0.4 s)" in caplog.text


def test_an_old_lease_without_identity_waits_out_its_expiry(tmp_path: Path) -> None:
    """A lease of the previous release names no boot id: its PID is never checked (it may be another
    host's), so a waiter waits for its expiry, as that release's waiters do."""
    store = open_store(f"file://{tmp_path / 'store'}")
    now = time.time()
    old = {"key": KEY, "holder": f"{os.uname().nodename}:{_a_dead_pid()}:0f0f0f0f", "started": now}
    store.put_bytes(json.dumps({**old, "heartbeat": now, "expires": now + 600}).encode(), layout.lock_entry(KEY))
    lease = leases.current(store, KEY)
    assert lease is not None and lease.owner is None and leases.state(lease) == leases.LIVE
    assert leases.try_acquire(store, KEY, "waiter") is None


def test_a_dag_runs_lease_between_tasks_is_bound_to_no_process(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A DAG task's process ends after its stage; the run's next task renews the lease. Between the two
    no process holds it: its pid is not recorded (a waiter here must not take it for dead) and it lives
    NEURONFORGE_LEASE_HANDOFF_S, not the few heartbeats of a running holder."""
    monkeypatch.setenv("NEURONFORGE_LEASE_HANDOFF_S", "120")
    store = open_store(f"file://{tmp_path / 'store'}")
    claimed = leases.try_acquire(store, KEY, "airflow:run:claim_build[0]:h:1:ab", leases.handoff_s(), bound=False)
    assert claimed is not None and claimed.owner is not None and claimed.owner.pid is None
    with leases.keeping(store, claimed, hand_on=True) as keeper:
        assert leases.current(store, KEY).owner.pid == os.getpid()  # held by the task while it works
    handed = leases.current(store, KEY)
    assert handed.owner.pid is None and handed.version == keeper.lease.version
    assert handed.expires - handed.heartbeat == pytest.approx(120)
    assert leases.held(handed) and leases.try_acquire(store, KEY, "waiter") is None
    with pytest.raises(RuntimeError), leases.keeping(store, keeper.lease, hand_on=True):
        raise RuntimeError("the stage failed; its retry continues")
    assert leases.current(store, KEY).owner.pid is None  # handed on to the retry, not left to a dead pid


def _a_dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


# -- `neuronforge run` twice: the first killed ------------------------------------------------------
def _run(store_uri: str, model: Path, home: Path, sleep_s: str) -> subprocess.Popen:
    argv = [sys.executable, "-m", "neuronforge.interfaces.cli", "run", "--model", str(model)]
    argv += ["--profile", "vllm-neuron@2.26.1", "--instance", "inf2.xlarge", "--tp", "2", "--seq-len", "64"]
    argv += ["--dtype", "fp32", "--store", store_uri]
    env = {**os.environ, "PYTHONPATH": str(ROOT), "NEURONFORGE_HOME": str(home), "FAKE_NEURON_SLEEP": sleep_s}
    env["NEURONFORGE_HEARTBEAT_S"] = "0.5"  # the waiter's heartbeat, at the default verbosity
    return subprocess.Popen(
        argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True
    )


class Lines:
    """A process's stderr lines as they come, each with when it came."""

    def __init__(self, proc: subprocess.Popen) -> None:
        self.lines: list[tuple[float, str]] = []
        self._thread = threading.Thread(target=self._read, args=(proc,), daemon=True)
        self._thread.start()

    def _read(self, proc: subprocess.Popen) -> None:
        for line in proc.stderr:
            self.lines.append((time.monotonic(), line.rstrip("\n")))

    def wait_for(self, words: str, timeout_s: float) -> float:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            for at, line in self.lines:
                if words in line:
                    return at
            time.sleep(0.05)
        raise AssertionError(f"no line with {words!r} in {timeout_s} s: {[line for _, line in self.lines]}")


def test_a_rerun_says_who_builds_and_builds_within_5_s_of_the_first_runs_death(
    fake_neuron: Path, served_llama: Path, tmp_path: Path
) -> None:
    store_uri = f"file://{tmp_path / 'store'}"
    first = _run(store_uri, served_llama, tmp_path / "home1", "600")  # compiles for 10 minutes
    second = None
    try:
        deadline = time.monotonic() + 120
        while not list((tmp_path / "store" / "locks").glob("[0-9a-f]*")):  # the first run holds the build
            assert first.poll() is None and time.monotonic() < deadline, first.communicate()
            time.sleep(0.2)
        (lock,) = (tmp_path / "store" / "locks").glob("[0-9a-f]*")
        assert json.loads(lock.read_text())["pid"] == first.pid
        second = _run(store_uri, served_llama, tmp_path / "home2", "0")
        said = Lines(second)
        said.wait_for(f"is being built by {os.uname().nodename} pid {first.pid} since ", 120)
        time.sleep(1.0)  # a few polls: the waiter says it once, not at every look
        # ... and a heartbeat while it waits, like every long step: who builds it, until when it waits
        said.wait_for(f"waiting for {os.uname().nodename} pid {first.pid} since ", 30)
        assert "(gives up at " in next(line for _, line in said.lines if "waiting for " in line)
        killed = time.monotonic()
        os.killpg(first.pid, signal.SIGKILL)
        first.wait()
        took_over = said.wait_for(f"took over from {os.uname().nodename}:{first.pid}:", 30)
        assert took_over - killed < 5.0, took_over - killed
        out, _ = second.communicate(timeout=600)
        assert second.returncode == 0, said.lines
        assert json.loads(out)["status"] == "published"
        waiting = [line for _, line in said.lines if "is being built by" in line]
        assert len(waiting) == 1, waiting
        assert "waiting at most 6 h for its artifact, or until its process exits" in waiting[0]
        assert f"pid {first.pid} is gone on this host" in next(line for _, line in said.lines if "took over" in line)
    finally:
        for proc in (first, second):
            if proc is not None and proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
