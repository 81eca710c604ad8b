"""Every stored record kind is read under bounds (issue 51): whatever a hostile or damaged store holds
where a record belongs — lists nested 100 000 deep, NaN, 1e400, a 5000-digit number, UTF-16, more
bytes than the kind may hold, a folder — is a `RecordError` naming where and why, from the one reader
(`StoredRecord.read`), for every kind: never RecursionError, ValueError, OverflowError or
IsADirectoryError. And the fields a reader computes with are bounded per field (`records.parts`)."""

from __future__ import annotations

import importlib
import json
import pkgutil
from pathlib import Path

import pytest

import neuronforge.records as package
from neuronforge.records.base import RecordError, StoredRecord
from neuronforge.records.lease import LeaseRecord
from neuronforge.records.parts import FileEntry
from neuronforge.records.transfers import TransferRecord
from neuronforge.stores import ArtifactStore, open_store
from tests.records.stored_fixtures import data


def _kinds() -> list[type[StoredRecord]]:
    for info in pkgutil.iter_modules(package.__path__):
        importlib.import_module(f"neuronforge.records.{info.name}")
    found, todo = [], list(StoredRecord.__subclasses__())
    while todo:
        cls = todo.pop()
        todo.extend(cls.__subclasses__())
        if cls.__module__.startswith("neuronforge.records."):
            found.append(cls)
    return sorted(found, key=lambda c: c.KIND)


KINDS = _kinds()
HOSTILE = {
    "nested 100 000 deep": (b"[" * 100_000 + b"]" * 100_000, "is damaged: it "),  # a lease: larger than 64 KiB
    "nested 20 000 deep": (b"[" * 20_000 + b"]" * 20_000, "nests lists or objects more than 32 deep (at offset 32)"),
    "nested objects": (b'{"a":' * 40 + b"1" + b"}" * 40, "more than 32 deep"),
    "NaN": (b'{"schema_version": 1, "schema": 1, "x": NaN}', "holds NaN"),
    "1e400": (b'{"schema_version": 1, "schema": 1, "x": 1e400}', "1e400, which is not finite"),
    "a 5000-digit number": (b'{"schema_version": 1, "x": ' + b"9" * 5000 + b"}", "(5000 digits), beyond the 64-bit"),
    "UTF-16": ('{"schema_version": 1}'.encode("utf-16"), "not valid JSON: it is not UTF-8 (byte \\xff at offset 0)"),
    "a byte-order mark": (b'\xef\xbb\xbf{"schema_version": 1}', "byte-order mark"),
}


@pytest.fixture
def store(tmp_path: Path) -> ArtifactStore:
    return open_store(f"file://{tmp_path / 'store'}")


def test_every_kind_is_found() -> None:
    assert len(KINDS) >= 20 and {c.KIND for c in KINDS} >= {"compile lease", "release channel", "scrub state"}


@pytest.mark.parametrize("cls", KINDS, ids=[c.KIND for c in KINDS])
@pytest.mark.parametrize("hostile", sorted(HOSTILE))
def test_every_kind_refuses_what_is_outside_the_bounds(cls: type[StoredRecord], hostile: str, store) -> None:
    raw, words = HOSTILE[hostile]
    store.put_bytes(raw, "records/hostile.json")
    with pytest.raises(RecordError) as exc:
        cls.read(store, "records/hostile.json")
    text = str(exc.value)
    assert "\n" not in text and store.uri("records/hostile.json") in text and cls.KIND in text, text
    assert words in text, text


@pytest.mark.parametrize("cls", KINDS, ids=[c.KIND for c in KINDS])
def test_a_folder_where_the_record_belongs_is_damaged(cls: type[StoredRecord], store, tmp_path: Path) -> None:
    store.put_bytes(b"{}", "records/folder.json/inside")
    with pytest.raises(RecordError, match=r"folder\.json: .* is damaged: it is a folder, not a file"):
        cls.read(store, "records/folder.json")
    with pytest.raises(RecordError, match="is damaged: it is a folder, not a file"):
        from neuronforge.records.local import read_local

        read_local(cls, tmp_path / "store" / "records" / "folder.json")


@pytest.mark.parametrize("cls", KINDS, ids=[c.KIND for c in KINDS])
def test_a_record_larger_than_its_kind_holds_is_refused_without_reading_it_whole(
    cls: type[StoredRecord], store, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(cls, "MAX_BYTES", 1000)
    store.put_bytes(b'{"padding": "' + b"x" * 1_000_000 + b'"}', "records/large.json")
    asked: list[int] = []
    capped = type(store).read_capped
    monkeypatch.setattr(type(store), "read_capped", lambda s, k, cap: asked.append(cap) or capped(s, k, cap))
    with pytest.raises(RecordError, match="is damaged: it is larger than the 1000 bytes it may hold"):
        cls.read(store, "records/large.json")
    assert asked == [1000]


def test_each_kind_holds_what_its_writers_write() -> None:
    """The caps leave headroom over what the largest record of each kind is, as measured."""
    assert 100 * len(json.dumps(data("lease-ce27dfa.json"))) <= LeaseRecord.MAX_BYTES
    large = [c for c in KINDS if c.MAX_BYTES >= 16 * 1024 * 1024]
    assert {c.KIND for c in large} >= {"artifact manifest", "payload manifest", "farm-index head"}


def test_the_store_reads_no_more_than_asked(store) -> None:
    store.put_bytes(b"0123456789", "k")
    assert store.read_capped("k", 4) == (b"01234", store.read_versioned("k")[1])  # the version of the whole
    assert store.read_capped("k", 100) == store.read_versioned("k")


def test_an_s3_store_reads_no_more_than_asked(s3_bucket: str) -> None:
    store = open_store(f"s3://{s3_bucket}/capped")
    store.put_bytes(b"x" * 100_000, "k")
    data_, version = store.read_capped("k", 10)
    assert data_ == b"x" * 11 and version == store.read_versioned("k")[1]
    assert store.read_capped("k", 100_000) == store.read_versioned("k")


# -- bounds per field --------------------------------------------------------------------------------
LEASE = {"key": "a" * 64, "holder": "h:1:0", "started": 1.7e9, "heartbeat": 1.7e9, "expires": 1.7e9 + 60}


@pytest.mark.parametrize(
    ("field", "value", "words"),
    [
        ("started", 1e300, "started: Input should be less than or equal to 4102444800"),
        ("heartbeat", 5, "heartbeat: Input should be greater than or equal to 946684800"),
        ("expires", 12.5, "expires: Value error, 12.5 is not 0 nor a time between 2000 and 2100"),
        ("started", True, "started: Value error, not a number (bool)"),
        ("started", "1.7e9", "started: Value error, not a number (str)"),
        ("pid", -1, "pid: Input should be greater than or equal to 1"),
        ("pid", 0, "pid: Input should be greater than or equal to 1"),
        ("pid", 4_194_305, "pid: Input should be less than or equal to 4194304"),
        ("pid", 7.0, "pid: Input should be a valid integer"),
        ("pid_start", -3, "pid_start: Input should be greater than or equal to 0"),
        ("heartbeat_s", -1, "heartbeat_s: Input should be greater than or equal to 0"),
        ("heartbeat_s", 1e300, "heartbeat_s: Input should be less than or equal to 1000000000"),
    ],
)
def test_a_lease_number_out_of_range_is_a_damaged_lease(field: str, value: object, words: str) -> None:
    with pytest.raises(RecordError) as exc:
        LeaseRecord.from_bytes(json.dumps({**LEASE, field: value}).encode(), "locks/x")
    assert f"locks/x: not a valid compile lease: {words}" in str(exc.value)


def test_a_lease_in_range_reads() -> None:
    lease = LeaseRecord.from_bytes(json.dumps({**LEASE, "pid": 1, "expires": 0}).encode())
    assert (lease.pid, lease.expires, lease.started) == (1, 0.0, 1.7e9)


def test_a_lease_of_another_key_than_its_file_is_damaged() -> None:
    lease = LeaseRecord.from_bytes(json.dumps(LEASE).encode())
    assert lease.for_key("a" * 64, "locks/aaa") is lease
    with pytest.raises(RecordError, match=f"locks/bbb: compile lease is damaged: it names key '{'a' * 64}', not its"):
        lease.for_key("b" * 64, "locks/bbb")


def test_a_file_size_out_of_range_makes_the_list_unreadable_and_a_transfer_is_dropped() -> None:
    for size in (-1, 2**63 - 1 + 1, 1.0, True):
        with pytest.raises(ValueError):
            FileEntry.model_validate({"path": "a", "size": size, "sha256": "0"})
    with pytest.raises(ValueError):
        TransferRecord.model_validate({"bytes": 1, "seconds": 1e300})
