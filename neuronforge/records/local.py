"""Records kept in a local file rather than a store: the copy of a tree manifest beside its files,
the vLLM cache manifest in a build folder, a sweep's record file."""

from __future__ import annotations

from pathlib import Path
from typing import TypeVar

from neuronforge.records.base import RecordError, StoredRecord

R = TypeVar("R", bound=StoredRecord)


def read_local(cls: type[R], path: Path) -> R:
    """The `cls` record in the file at `path`, read no further than its kind's `MAX_BYTES` (a missing
    file raises its OSError; anything else that is not such a record — a folder there included — a
    `RecordError` naming the file)."""
    try:
        with open(path, "rb") as f:
            raw = f.read(cls.MAX_BYTES + 1)
    except IsADirectoryError:
        raise RecordError(f"{path}: {cls.KIND} is damaged: it is a folder, not a file") from None
    return cls.from_bytes(raw, str(path))


def write_local(record: StoredRecord, path: Path) -> None:
    """The record's stored bytes (the same as a store holds) into `path`."""
    path.write_bytes(record.to_bytes())
