"""A lease that cannot be trusted (issue 51): the advice never names a PID that is not the holder, a
damaged lease is one row in `lease ls` and `lease break` frees it, and a waiter neither waits forever
on it nor takes it over while something still rewrites it.

Run as users run them (`harness.cli`) over a file store, with leases written as a hostile store holds
them: a live lease of this host naming pid -1, 0, 1, 10**30, a process that is not the holder, a
holder whose start time was not recorded; a lease naming another key than its file; a folder."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from neuronforge.artifacts import layout, leases
from neuronforge.common.errors import StoreError
from neuronforge.records.lease import LeaseRecord
from neuronforge.stores import ArtifactStore, open_store
from tests.reliability.harness import cli, expect_error

ROOT = Path(__file__).resolve().parents[1]
KEY = "c" * 64
HOLD = """
import sys, time
from neuronforge.artifacts import leases
from neuronforge.stores import open_store
print("held" if leases.try_acquire(open_store(sys.argv[1]), sys.argv[2], "holder", ttl_s=600) else "no", flush=True)
time.sleep(600)
"""


@pytest.fixture
def store(tmp_path: Path) -> ArtifactStore:
    return open_store(f"file://{tmp_path / 'store'}")


def _live_here(**fields: Any) -> dict[str, Any]:
    """A live lease of this host (its identity as `leases.this_host` reads it), with `fields` over it."""
    here, now = leases.this_host(), time.time()
    lease = {"schema_version": 2, "key": KEY, "holder": f"{here.hostname}:x:00000000", "started": now - 60}
    lease |= {"heartbeat": now, "expires": now + 600, "heartbeat_s": 10.0, "hostname": here.hostname}
    lease |= {"boot_id": here.boot_id, "pid_ns": here.pid_ns, "pid": os.getpid(), "pid_start": None}
    return lease | fields


def _put(store: ArtifactStore, lease: dict[str, Any], key: str = KEY) -> None:
    store.put_bytes(json.dumps(lease).encode(), layout.lock_entry(key))


def _released(store: ArtifactStore, key: str = KEY) -> LeaseRecord:
    record = LeaseRecord.read(store, layout.lock_entry(key))
    assert record.key == key and record.expires == 0.0
    return record


def _break(store: ArtifactStore, key: str = KEY):
    return cli(["lease", "break", key[:12], "--yes", "--store", store.root_uri])


# -- the advice ----------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("pid", "words"),
    [
        (-1, "pid: Input should be greater than or equal to 1"),
        (0, "pid: Input should be greater than or equal to 1"),
        (10**30, "beyond the 64-bit range"),
        (4_194_305, "pid: Input should be less than or equal to 4194304"),
    ],
)
def test_a_pid_no_process_can_have_is_a_damaged_lease_that_break_frees(store, pid: int, words: str) -> None:
    _put(store, _live_here(pid=pid))
    listed = cli(["lease", "ls", store.root_uri])
    assert listed.code == 0 and f"{KEY[:12]}  unreadable" in listed.out and words in listed.out, listed.text
    out = _break(store)
    assert out.code == 0 and out.out.startswith(f"broken: the damaged lease of {KEY[:12]} ("), out.text
    assert "kill" not in out.text and words in out.out
    _released(store)


def test_pid_1_is_never_named_in_a_kill(store) -> None:
    """pid 1 is this host's (or container's) first process: `kill 1` would stop the host's init."""
    start = leases.process_start(1)
    if start is None:
        pytest.skip("/proc/1/stat is not readable here")
    _put(store, _live_here(pid=1, pid_start=start))
    out = _break(store)
    expect_error(out, 3, f"lease kept: the lease of {KEY[:12]} is held by the first process of this host or container")
    assert "kill" not in out.text and len(out.err.strip().splitlines()) == 1
    assert leases.state(leases.current(store, KEY)) == leases.LIVE


@pytest.mark.parametrize("recorded", ["another start time", "no start time"])
def test_a_running_process_that_is_not_the_identified_holder_is_never_named(store, recorded: str) -> None:
    """This test's own process, running, recorded with a start time that is not its own (a PID the
    kernel reused for another process) or with none (nothing tells it is the holder): breaking the
    lease is what the user asked, and no `kill` is suggested."""
    start = leases.process_start(os.getpid())
    assert start is not None
    _put(store, _live_here(pid_start=start + 1 if recorded == "another start time" else None))
    out = _break(store)
    assert out.code == 0 and out.out.startswith(f"broken: the lease of {KEY[:12]}"), out.text
    assert "kill" not in out.text
    _released(store)


def test_the_identified_holder_is_the_only_pid_a_kill_names(store) -> None:
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD, store.root_uri, KEY],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        record = LeaseRecord.read(store, layout.lock_entry(KEY))
        assert record.pid == holder.pid > 1 and record.pid_start == leases.process_start(holder.pid)
        out = _break(store)
        expect_error(out, 3, f"held by pid {holder.pid} on this host", f"stop that run (kill {holder.pid})")
    finally:
        holder.kill()
        holder.wait()


# -- a lease whose record cannot be trusted ------------------------------------------------------------
def test_break_frees_a_lease_whose_record_names_another_key(store) -> None:
    _put(store, _live_here(key="0" * 64))
    out = _break(store)
    assert out.code == 0, out.text
    assert f"it names key '{'0' * 64}', not its file's {KEY}" in out.out and "changed while deciding" not in out.text
    _released(store)
    assert not store.exists(layout.lock_entry("0" * 64))


@pytest.mark.parametrize(
    "raw",
    [b"[" * 20_000 + b"]" * 20_000, b'{"key": "' + KEY.encode() + b'", "started": NaN}', b"\xff\xfe not a lease"],
)
def test_a_damaged_lease_is_held_one_ttl_from_its_last_write_then_taken_over(
    store, raw: bytes, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("NEURONFORGE_LEASE_TTL_S", "600")
    monkeypatch.setenv("NEURONFORGE_LEASE_HEARTBEAT_S", "60")
    path = Path(store.root_uri.removeprefix("file://")) / layout.lock_entry(KEY)
    store.put_bytes(raw, layout.lock_entry(KEY))
    found = leases.current(store, KEY)
    assert found is not None and found.damaged and leases.state(found) == leases.LIVE
    said = leases.waiting_line(store, found)
    assert "is damaged" in said and f"neuronforge lease break {KEY}" in said
    assert leases.try_acquire(store, KEY, "waiter:1:00000000") is None  # rewritten just now: maybe renewed
    os.utime(path, (time.time() - 601, time.time() - 601))  # unchanged for one TTL: nobody renews it
    assert not leases.held(leases.current(store, KEY))
    assert leases.wait_for(store, KEY, lambda: None, poll_s=0.01, timeout_s=5) is None  # no wait at all
    taken = leases.try_acquire(store, KEY, "waiter:1:00000000")
    assert taken is not None and LeaseRecord.read(store, layout.lock_entry(KEY)).holder == "waiter:1:00000000"


def test_a_folder_where_a_lease_belongs_is_one_line_for_a_build_and_break_removes_it(store) -> None:
    store.put_bytes(b"{}", f"{layout.lock_entry(KEY)}/inside")
    with pytest.raises(StoreError) as exc:
        leases.try_acquire(store, KEY, "waiter:1:00000000")
    assert str(exc.value) == f"{store.uri(layout.lock_entry(KEY))} is a folder, not a file"
    listed = cli(["lease", "ls", store.root_uri])
    assert listed.code == 0 and listed.out.splitlines()[1].startswith(f"{KEY[:12]}  unreadable"), listed.text
    assert "it is a folder, not a file" in listed.out and listed.out.splitlines()[2].startswith("1 lease:")
    out = _break(store)
    assert out.code == 0 and "broken: the damaged lease" in out.out, out.text
    assert leases.try_acquire(store, KEY, "waiter:1:00000000") is not None


def test_on_s3_a_damaged_lease_just_written_is_held(s3_bucket: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """S3 says when it wrote the object (LastModified, from the listing or the HEAD): a damaged lease
    written just now keeps a waiter waiting, as on a file store."""
    monkeypatch.setenv("NEURONFORGE_LEASE_TTL_S", "600")
    monkeypatch.setenv("NEURONFORGE_LEASE_HEARTBEAT_S", "60")
    store = open_store(f"s3://{s3_bucket}/leases")
    store.put_bytes(b"[" * 20_000 + b"]" * 20_000, layout.lock_entry(KEY))
    found = leases.current(store, KEY)
    assert found is not None and found.damaged and leases.state(found) == leases.LIVE
    assert leases.try_acquire(store, KEY, "waiter:1:00000000") is None
    out = _break(store)
    assert out.code == 0 and out.out.startswith(f"broken: the damaged lease of {KEY[:12]}"), out.text
    assert leases.try_acquire(store, KEY, "waiter:1:00000000") is not None
