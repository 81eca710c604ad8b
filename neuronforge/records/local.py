"""Records kept in a local file rather than a store: the copy of a tree manifest beside its files,
the vLLM cache manifest in a build folder, a sweep's record file."""

from __future__ import annotations

from pathlib import Path
from typing import TypeVar

from neuronforge.records.base import StoredRecord

R = TypeVar("R", bound=StoredRecord)


def read_local(cls: type[R], path: Path) -> R:
    """The `cls` record in the file at `path` (a missing file raises its OSError; anything else
    that is not such a record, a `RecordError` naming the file)."""
    return cls.from_bytes(path.read_bytes(), str(path))


def write_local(record: StoredRecord, path: Path) -> None:
    """The record's stored bytes (the same as a store holds) into `path`."""
    path.write_bytes(record.to_bytes())
