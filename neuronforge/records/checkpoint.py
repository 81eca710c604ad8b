"""The checkpoint manifest: `checkpoints/<org>/<name>/<revision>/MANIFEST.json`, written last by the
fetch stage, so a checkpoint is in the store exactly when this record is. Its sha256 pins the folder
(`localcache.TreeRef`), so a stored manifest is never rewritten, only read."""

from __future__ import annotations

from typing import ClassVar

from pydantic import BaseModel, ConfigDict, Field

from neuronforge.records.base import StoredRecord
from neuronforge.records.tree import StoredFile


class CheckpointOrigin(BaseModel):
    """Where the checkpoint came from, pinned (`ModelSource` as the fetch resolved it)."""

    model_config = ConfigDict(frozen=True)

    kind: str  # hf | s3 | local | builtin
    location: str
    requested_revision: str | None = None  # what the user asked for (Hub only)
    revision: str | None = None  # the immutable revision fetched (Hub sha or files digest)


class CheckpointManifest(StoredRecord):
    KIND: ClassVar[str] = "checkpoint manifest"
    SCHEMA: ClassVar[int] = 1
    MAX_BYTES: ClassVar[int] = 16 * 1024 * 1024  # ~150 bytes per file: 100 000 shards

    source: CheckpointOrigin
    architecture: str
    model_type: str
    files: list[StoredFile]  # sorted by path
    warnings: list[str] = Field(default_factory=list)
    fetched_at: str  # UTC, ISO 8601
