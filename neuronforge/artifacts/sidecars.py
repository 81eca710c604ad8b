"""The records kept beside a published build and rewritten whole — its review (`reviews`), its
attestations (`attestations`): one compare-and-swap on the record's store version, retried when
another writer came in between, so two writers at once both land (the later one sees the earlier)."""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from typing import TypeVar

from neuronforge.common.errors import StoreError
from neuronforge.records.base import StoredRecord
from neuronforge.stores import ArtifactStore, NotFound

TRIES = 8
R = TypeVar("R", bound=StoredRecord)


def swap(
    store: ArtifactStore, path: str, kind: type[R], fresh: Callable[[], R], changed: Callable[[R], R], again: str
) -> R:
    """The record at `path` written as `changed` makes the one stored (`fresh()` where there is none), by
    compare-and-swap; `again` ends the error after TRIES lost races in a row (what the caller runs again)."""
    for attempt in range(TRIES):
        try:
            raw, version = kind.read_raw(store, path)  # under the bounds of every record
        except NotFound:
            record = fresh()
            if store.put_if_absent(record.to_bytes(), path):
                return record
        else:
            record = changed(kind.from_bytes(raw, store.uri(path)))
            if store.replace_if_version(record.to_bytes(), path, version):
                return record
        time.sleep(random.uniform(0, 0.05 * (attempt + 1)))
    raise StoreError(f"{store.uri(path)}: {TRIES} conflicting {again}")
