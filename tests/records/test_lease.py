"""The compile lease as a typed record: schema 2 records its holder as a process (host identity, pid);
a lease the previous release wrote (no version, no identity) still reads, and the previous release
reads a new one (its reader, `PreviousLeaseRecord` below, as it was before schema 2)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import ClassVar

from neuronforge.artifacts import layout
from neuronforge.artifacts.leases import current, try_acquire
from neuronforge.records.base import StoredRecord
from neuronforge.records.lease import LeaseRecord
from neuronforge.stores import open_store
from tests.records.stored_fixtures import check_wrong_type_refused, data, raw

OLD = "lease-ce27dfa.json"


class PreviousLeaseRecord(StoredRecord):
    """The lease record of the release before schema 2, verbatim: what its workers read a lease with."""

    KIND: ClassVar[str] = "compile lease"
    SCHEMA: ClassVar[int] = 1
    VERSION_FIELD: ClassVar[str | None] = None

    key: str
    holder: str
    started: float
    heartbeat: float
    expires: float


def test_a_lease_the_previous_release_wrote_reads_without_an_identity() -> None:
    lease = LeaseRecord.from_bytes(raw(OLD), OLD)
    assert lease.holder == "host-1:4242:0f0f0f0f" and lease.expires > lease.started
    assert (lease.hostname, lease.boot_id, lease.pid, lease.pid_start, lease.heartbeat_s) == (None,) * 5
    again = json.loads(lease.to_bytes())  # written back as schema 2: the old keys and values unchanged
    assert again["schema_version"] == 2 and {k: again[k] for k in data(OLD)} == data(OLD)


def test_the_previous_release_reads_a_new_lease_as_the_lease_it_knew(tmp_path: Path) -> None:
    store = open_store(f"file://{tmp_path / 'store'}")
    lease = try_acquire(store, "c" * 64, "host-3:7:12345678", ttl_s=60)
    assert lease is not None
    stored = store.get_bytes(layout.lock_entry("c" * 64))
    assert data(OLD).keys() <= json.loads(stored).keys()
    previous = PreviousLeaseRecord.from_bytes(stored, "locks/c")
    assert (previous.key, previous.holder, previous.started, previous.expires) == (
        "c" * 64,
        "host-3:7:12345678",
        lease.started,
        lease.expires,
    )
    new = LeaseRecord.from_bytes(stored)
    assert new.pid is not None and new.hostname and new.heartbeat_s == 10  # NEURONFORGE_LEASE_HEARTBEAT_S


def test_a_live_lease_of_the_previous_release_is_honoured(tmp_path: Path) -> None:
    store = open_store(f"file://{tmp_path / 'store'}")
    key = data(OLD)["key"]
    forever = {**data(OLD), "expires": 4102444800.0}  # 2100: live while this test runs
    store.put_bytes(json.dumps(forever, sort_keys=True).encode(), layout.lock_entry(key))
    held = current(store, key)
    assert held is not None and held.live and held.holder == "host-1:4242:0f0f0f0f"
    assert try_acquire(store, key, "host-2:1:00000000") is None


def test_a_lease_with_a_wrong_type_names_the_field_and_the_uri(tmp_path: Path) -> None:
    check_wrong_type_refused(LeaseRecord, OLD, tmp_path, ("expires",), "soon")
