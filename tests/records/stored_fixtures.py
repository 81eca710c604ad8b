"""Shared checks for the typed records of part 2 (checkpoint, quantized, lease, failure, toolchain,
vLLM cache, sweep, recompile report), run on records earlier releases wrote (tests/data/records)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from neuronforge.records.base import RecordError, RecordTooNew, StoredRecord
from neuronforge.stores import open_store

DATA = Path(__file__).resolve().parent.parent / "data" / "records"


def raw(name: str) -> bytes:
    return (DATA / name).read_bytes()


def data(name: str) -> dict[str, Any]:
    return json.loads(raw(name))


def check_reads_back_as_written(cls: type[StoredRecord], name: str) -> StoredRecord:
    """The record an earlier release wrote reads, and writing it again gives the same keys and values."""
    record = cls.from_bytes(raw(name), name)
    assert record.to_json() == data(name)
    assert cls.from_bytes(record.to_bytes()) == record
    return record


def check_newer_refused(cls: type[StoredRecord], name: str, tmp_path: Path) -> None:
    """A record from a newer neuronforge: one line naming the file, its schema and the upgrade to make."""
    store = open_store(f"file://{tmp_path / 'store'}")
    newer = {**data(name), "schema_version": cls.SCHEMA + 1}
    store.put_bytes(json.dumps(newer).encode(), "records/newer.json")
    with pytest.raises(RecordTooNew) as exc:
        cls.read(store, "records/newer.json")
    text = str(exc.value)
    assert "\n" not in text and store.uri("records/newer.json") in text
    assert f"schema {cls.SCHEMA + 1}" in text and "upgrade neuronforge" in text


def check_wrong_type_refused(
    cls: type[StoredRecord], name: str | dict[str, Any], tmp_path: Path, path: tuple, bad: Any
) -> str:
    """A record (a fixture file's name, or the record itself) whose field at `path` holds `bad`: a
    RecordError naming the field and where it was read. Returns its message."""
    store = open_store(f"file://{tmp_path / 'store'}")
    forged = json.loads(json.dumps(name)) if isinstance(name, dict) else data(name)
    node = forged
    for step in path[:-1]:
        node = node[step]
    node[path[-1]] = bad
    store.put_bytes(json.dumps(forged).encode(), "records/forged.json")
    with pytest.raises(RecordError) as exc:
        cls.read(store, "records/forged.json")
    text = str(exc.value)
    assert not isinstance(exc.value, RecordTooNew)
    assert store.uri("records/forged.json") in text and ".".join(map(str, path)) in text and "\n" not in text
    return text
