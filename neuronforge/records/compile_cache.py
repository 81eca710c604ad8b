"""The Neuron compile cache's own records (`neuronforge.compilation.compile_cache`).

- `GraphSet`: `neuron-cache/<compiler>-<version>/graph-sets/<key>.json` in the store, the cache
  entries one compile of a graph set used, so a later compile of the same graphs pre-seeds exactly
  those entries instead of the compiler's whole folder. Written without a version until this
  release: such a record reads as version 1; the readers before this release read only `entries`,
  so writing the version breaks none of them.
- `StoredEntryNote`: a host's note (a local file, never in the store) that the store holds a cache entry
  with exactly the bytes of the local one, so publishing copies it inside the store instead of
  uploading it again.
"""

from __future__ import annotations

from typing import ClassVar

from neuronforge.records.base import StoredRecord
from neuronforge.records.tree import StoredFile


class GraphSet(StoredRecord):
    KIND: ClassVar[str] = "compile graph set"
    SCHEMA: ClassVar[int] = 1
    UNVERSIONED: ClassVar[int | None] = 1
    MAX_BYTES: ClassVar[int] = 16 * 1024 * 1024  # ~60 bytes per cache entry

    entries: list[str]  # MODULE_<hash>+<flags> folder names, sorted


class StoredEntryNote(StoredRecord):
    KIND: ClassVar[str] = "stored cache entry note"
    SCHEMA: ClassVar[int] = 1
    UNVERSIONED: ClassVar[int | None] = 1
    MAX_BYTES: ClassVar[int] = 16 * 1024 * 1024  # ~150 bytes per file of the entry

    store: str  # the entry's URI in the store
    files: list[StoredFile]
