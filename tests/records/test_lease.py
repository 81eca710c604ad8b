"""The compile lease as a typed record: stored without a version, as it always was."""

from __future__ import annotations

import json
from pathlib import Path

from neuronforge.artifacts import layout
from neuronforge.artifacts.leases import current, try_acquire
from neuronforge.records.lease import LeaseRecord
from neuronforge.stores import open_store
from tests.records.stored_fixtures import check_wrong_type_refused, data, raw

OLD = "lease-ce27dfa.json"


def test_a_lease_the_previous_release_wrote_reads_and_writes_back_byte_for_byte() -> None:
    lease = LeaseRecord.from_bytes(raw(OLD), OLD)
    assert lease.holder == "host-1:4242:0f0f0f0f" and lease.expires > lease.started
    assert lease.to_bytes() == raw(OLD)  # compact, no version: a worker of the previous release reads it


def test_a_live_lease_of_the_previous_release_is_honoured(tmp_path: Path) -> None:
    store = open_store(f"file://{tmp_path / 'store'}")
    key = data(OLD)["key"]
    forever = {**data(OLD), "expires": 4102444800.0}  # 2100: live while this test runs
    store.put_bytes(json.dumps(forever, sort_keys=True).encode(), layout.lock_entry(key))
    held = current(store, key)
    assert held is not None and held.live and held.holder == "host-1:4242:0f0f0f0f"
    assert try_acquire(store, key, "host-2:1:00000000") is None


def test_a_lease_is_written_with_the_keys_it_always_had(tmp_path: Path) -> None:
    store = open_store(f"file://{tmp_path / 'store'}")
    lease = try_acquire(store, "c" * 64, "host-3:7:12345678", ttl_s=60)
    assert lease is not None
    stored = json.loads(store.get_bytes(layout.lock_entry("c" * 64)))
    assert stored.keys() == data(OLD).keys()


def test_a_lease_with_a_wrong_type_names_the_field_and_the_uri(tmp_path: Path) -> None:
    check_wrong_type_refused(LeaseRecord, OLD, tmp_path, ("expires",), "soon")
