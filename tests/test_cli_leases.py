"""`neuronforge lease ls` and `lease break` as users run them: every state a lease can be in (a running
holder of this host, a killed one, another host's lapsed one, a released one, an object that is no
lease), a page at a time; a break refused for a running holder, asked for on a terminal, refused
without one unless `--yes`, and lost to a renewal that came first."""

from __future__ import annotations

import json
import os
import pty
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from neuronforge.artifacts import layout, leases
from neuronforge.stores import ArtifactStore, open_store
from tests.reliability.harness import cli, expect_error

ROOT = Path(__file__).resolve().parents[1]
LIVE, DEAD, STALE, RELEASED, BROKEN = "1" * 64, "2" * 64, "3" * 64, "4" * 64, "5" * 64
HOLD = """
import sys, time
from neuronforge.artifacts import leases
from neuronforge.stores import open_store
print("held" if leases.try_acquire(open_store(sys.argv[1]), sys.argv[2], "holder", ttl_s=600) else "no", flush=True)
time.sleep(600)
"""


def _hold(store: ArtifactStore, key: str) -> subprocess.Popen:
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLD, store.root_uri, key],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert proc.stdout is not None and proc.stdout.readline().strip() == "held"
    return proc


@pytest.fixture
def store(tmp_path: Path):
    """A store with a lease in every state; yields (store, the running holder)."""
    store = open_store(f"file://{tmp_path / 'store'}")
    running = _hold(store, LIVE)
    dead = _hold(store, DEAD)
    dead.send_signal(signal.SIGKILL)
    dead.wait()
    stale = leases.try_acquire(store, STALE, "far:7:00000000", ttl_s=0.01)
    stale.owner = leases.Owner(leases.Host("far", "other-boot", None), 7)
    store.put_bytes(stale.record(), layout.lock_entry(STALE))
    leases.release(store, leases.try_acquire(store, RELEASED, "done:1:00000000"))
    store.put_bytes(b"\xff not a lease", layout.lock_entry(BROKEN))
    try:
        yield store, running
    finally:
        running.send_signal(signal.SIGKILL)
        running.wait()


def test_ls_shows_each_lease_and_its_state(store) -> None:
    store, running = store
    out = cli(["lease", "ls", store.root_uri])
    assert out.code == 0 and out.err == "", out.text
    rows = {line[:12]: line for line in out.out.splitlines()[1:-1]}
    host = os.uname().nodename
    assert rows[LIVE[:12]].split()[1:3] == ["live", f"{host}:{running.pid}"]
    assert rows[DEAD[:12]].split()[1] == "dead-on-this-host"
    assert rows[STALE[:12]].split()[1:3] == ["stale", "far:7"]
    assert rows[RELEASED[:12]].split()[1] == "released"
    assert rows[BROKEN[:12]].split()[1] == "unreadable" and "not valid JSON" in rows[BROKEN[:12]]
    assert out.out.splitlines()[-1] == (
        f"5 leases: 1 live, 1 stale, 1 dead-on-this-host, 1 released, 1 unreadable under {store.uri('locks/')}"
    )
    listed = json.loads(cli(["lease", "ls", "--store", store.root_uri, "--json"]).out)
    assert [(r["key"], r["state"]) for r in listed] == [
        (LIVE, "live"),
        (DEAD, "dead-on-this-host"),
        (STALE, "stale"),
        (RELEASED, "released"),
        (BROKEN, "unreadable"),
    ]
    assert listed[0]["pid"] == running.pid and listed[0]["host"] == host and listed[0]["heartbeat_s"] == 10


def test_ls_pages_through_the_leases(store) -> None:
    store, _ = store
    first = cli(["lease", "ls", store.root_uri, "--limit", "2"])
    assert first.out.splitlines()[-1] == f"next page: --start-after {DEAD}"
    second = cli(["lease", "ls", store.root_uri, "--limit", "2", "--start-after", DEAD])
    assert [line[:12] for line in second.out.splitlines()[1:3]] == [STALE[:12], RELEASED[:12]]
    expect_error(cli(["lease", "ls", store.root_uri, "--limit", "0"]), 2, "--limit: '0' is not a whole number from 1")


def test_ls_reads_one_page_of_locks_and_nothing_else(store, monkeypatch: pytest.MonkeyPatch) -> None:
    """O(page): one page of the store's listing of `locks/` (one request on S3) and one read per lease shown."""
    store, _ = store
    from neuronforge.stores.file import FileStore

    listed, read = [], []
    page, capped = FileStore.list_page, FileStore.read_capped
    monkeypatch.setattr(FileStore, "list_page", lambda s, p, *a, **k: listed.append((p, k)) or page(s, p, *a, **k))
    monkeypatch.setattr(FileStore, "read_capped", lambda s, key, cap: read.append(key) or capped(s, key, cap))
    assert cli(["lease", "ls", store.root_uri, "--limit", "2"]).code == 0
    assert listed == [("locks", {"start_after": "", "limit": 2})]
    assert read == [layout.lock_entry(LIVE), layout.lock_entry(DEAD)]


def test_break_refuses_a_bad_key_and_a_missing_lease_in_one_line(store) -> None:
    store, _ = store
    expect_error(cli(["lease", "break", "zz/../x", "--store", store.root_uri]), 2, "lease key 'zz/../x' is not")
    expect_error(cli(["lease", "break", "abc", "--store", store.root_uri, "--yes"]), 2, "no lease for key 'abc'")
    expect_error(cli(["lease", "break", "", "--store", store.root_uri, "--yes"]), 2, "argument KEY: '' is empty")


def test_break_leaves_a_released_lease_as_it_is(store) -> None:
    store, _ = store
    before = store.read_versioned(layout.lock_entry(RELEASED))
    out = cli(["lease", "break", RELEASED, "--store", store.root_uri])
    assert out.code == 0 and out.out == (
        f"the lease of {RELEASED[:12]} is released already (by done:1:00000000): nothing to break\n"
    )
    assert store.read_versioned(layout.lock_entry(RELEASED)) == before


def test_break_never_frees_a_running_holder_of_this_host(store) -> None:
    store, running = store
    out = cli(["lease", "break", LIVE[:8], "--store", store.root_uri, "--yes"])
    expect_error(out, 3, f"lease kept: the lease of {LIVE[:12]} is held by pid {running.pid} on this host")
    assert len(out.err.strip().splitlines()) == 1 and f"kill {running.pid}" in out.err
    assert leases.state(leases.current(store, LIVE)) == leases.LIVE


def _break(store: ArtifactStore, key: str, *extra: str, stdin=subprocess.DEVNULL) -> subprocess.CompletedProcess:
    argv = [sys.executable, "-m", "neuronforge.interfaces.cli", "lease", "break", key, "--store", store.root_uri]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([*argv, *extra], stdin=stdin, capture_output=True, text=True, env=env, timeout=60)


def test_break_without_a_terminal_asks_for_yes(store) -> None:
    store, _ = store
    done = _break(store, DEAD)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.count("\n") == 1 and done.stderr.startswith(f"error: not breaking the lease of {DEAD[:12]}")
    assert done.stderr.rstrip().endswith("stdin is not a terminal to confirm on; pass --yes to break it")
    assert leases.state(leases.current(store, DEAD)) == leases.DEAD_HERE
    done = _break(store, DEAD, "--yes")
    assert done.returncode == 0 and done.stdout.startswith(f"broken: the lease of {DEAD[:12]} (dead-on-this-host")
    assert leases.state(leases.current(store, DEAD)) == leases.RELEASED
    assert leases.try_acquire(store, DEAD, "next") is not None  # the next run builds at once


def _on_a_terminal(store: ArtifactStore, key: str, answer: str) -> tuple[int, str]:
    """`lease break KEY` with a terminal as its stdin, answering `answer` to its question."""
    main, child = pty.openpty()
    argv = [sys.executable, "-m", "neuronforge.interfaces.cli", "lease", "break", key, "--store", store.root_uri]
    proc = subprocess.Popen(
        argv, stdin=child, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env={**os.environ, "PYTHONPATH": str(ROOT)}
    )
    os.close(child)
    err = b""
    deadline = time.monotonic() + 60
    while b"[y/N]" not in err and time.monotonic() < deadline:
        ready, _, _ = select.select([proc.stderr], [], [], 0.5)
        if ready:
            err += os.read(proc.stderr.fileno(), 4096)
    os.write(main, answer.encode() + b"\n")
    out, rest = proc.communicate(timeout=60)
    os.close(main)
    return proc.returncode, (err + rest).decode() + out.decode()


def test_break_on_a_terminal_asks_first(store) -> None:
    store, _ = store
    code, text = _on_a_terminal(store, STALE, "n")
    assert code == 1 and f"break the lease of {STALE[:12]} (stale, held by far pid 7 since" in text
    assert "not broken" in text and leases.state(leases.current(store, STALE)) == leases.STALE
    code, text = _on_a_terminal(store, STALE, "y")
    assert code == 0 and "broken: the lease of" in text
    assert leases.state(leases.current(store, STALE)) == leases.RELEASED


def test_a_renewal_that_comes_first_wins_over_a_break(tmp_path: Path) -> None:
    store = open_store(f"file://{tmp_path / 'store'}")
    seen = leases.try_acquire(store, STALE, "slow:1:00000000", ttl_s=0.01)
    seen.owner = leases.Owner(leases.Host("slow", "other-boot", None), 1)
    store.put_bytes(seen.record(), layout.lock_entry(STALE))
    seen = leases.current(store, STALE)  # what `lease break` read, before asking
    leases.renew(store, seen, ttl_s=600)  # meanwhile its holder wakes up and renews it
    with pytest.raises(leases.LeaseChanged, match="changed while deciding"):
        leases.break_lease(store, seen)
    assert leases.state(leases.current(store, STALE)) == leases.LIVE


def test_ls_columns_hold_an_airflow_holder_and_json_has_it_whole(tmp_path) -> None:
    """An Airflow run's holder (dag id, run id, task: ~90 characters) is cut to its column around `…`,
    so the STARTED column stays where the header says; `--json` keeps it whole (issue 54)."""
    store = open_store(f"file://{tmp_path / 'leases'}")
    holder = "airflow:neuronforge_compile_publish:manual__2026-11-29T12:00:00.123456+00:00:compile_graphs:3"
    key = "c" * 64
    lease = leases.try_acquire(store, key, holder, ttl_s=600)
    leases.renew(store, lease, 600, bound=False)  # handed on between two tasks: no process holds it
    out = cli(["lease", "ls", store.root_uri])
    header, row = out.out.splitlines()[:2]
    assert row.index("20") == header.index("STARTED") and "…" in row and len(row) < 110, (header, row)
    (listed,) = json.loads(cli(["lease", "ls", store.root_uri, "--json"]).out)
    assert listed["holder"] == holder
