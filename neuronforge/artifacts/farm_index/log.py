"""The farm index's tail: the records written since the last compaction, one small object that
writers append to with the store's compare-and-swap (S3 `If-Match` / `If-None-Match`, the file
store's locked rename), so publishers on many hosts racing each other never lose a record.

    {"schema": 1, "next_seq": 42, "records": [{"seq": 41, "kind": "published", "key": ..., ...}]}

Every record gets the next sequence number; the snapshot's head says which sequence number it
folded in last, so a reader merges exactly the records after it (a stale head is never wrong, only
older). A publish costs two requests here (read with its version, conditional write); a conflict
costs two more. When the tail holds `COMPACT_AT` records the writer folds it into the snapshot.
"""

from __future__ import annotations

import logging
import random
import time

from neuronforge.artifacts import layout
from neuronforge.common.errors import StoreError
from neuronforge.records.base import RecordError
from neuronforge.records.farm_index import FarmIndexTail
from neuronforge.stores import ArtifactStore, NotAFile, NotFound

log = logging.getLogger(__name__)

ROOT = layout.FARM_INDEX
TAIL = f"{ROOT}/tail.json"
COMPACT_AT = 64  # records in the tail that make its writer compact
MAX_TRIES = 200  # conflicting appends before giving up (each loser retries at once, jittered)


class IndexCorrupt(StoreError):
    """An index object is not what its writer wrote (not JSON, wrong schema, wrong checksum):
    never trusted, rebuilt from the manifests."""


def parse_tail(data: bytes) -> FarmIndexTail:
    try:
        return FarmIndexTail.from_bytes(data, TAIL)
    except RecordError as exc:  # not JSON, another schema, wrong types: rebuilt from the manifests
        raise IndexCorrupt(str(exc)) from None


def read_tail(store: ArtifactStore) -> tuple[FarmIndexTail | None, str]:
    """(tail, version), or (None, "") when there is none yet."""
    try:
        data, version = FarmIndexTail.read_raw(store, TAIL)
    except NotFound:
        return None, ""
    except RecordError as exc:  # a folder where the tail belongs
        raise IndexCorrupt(str(exc)) from None
    return parse_tail(data), version


def trim(store: ArtifactStore, through: int) -> None:
    """Drop the records a snapshot folded in (sequence number <= `through`), keeping later ones."""
    for _ in range(MAX_TRIES):
        tail, version = read_tail(store)
        if tail is None:
            return
        kept = [r for r in tail.records if r.seq is not None and r.seq > through]
        if len(kept) == len(tail.records):
            return
        trimmed = FarmIndexTail(next_seq=max(tail.next_seq, through + 1), records=kept)
        if store.replace_if_version(trimmed.to_bytes(), TAIL, version):
            return
        time.sleep(random.uniform(0, 0.05))


def reset(store: ArtifactStore, next_seq: int) -> None:
    """Replace a tail that could not be read by an empty one (after a rebuild holds what it lost); a
    folder where it belongs is removed first."""
    try:
        store.put_bytes(FarmIndexTail(next_seq=next_seq).to_bytes(), TAIL)
    except NotAFile:
        store.delete_prefix(TAIL)
        store.put_bytes(FarmIndexTail(next_seq=next_seq).to_bytes(), TAIL)
