"""What the store's writers tell the farm index: an artifact published, a build failed, a build
claimed (and, in `damage`, an artifact found damaged). Each note follows the write it describes and
is advisory — a failing note is logged, never fails what it follows; the next compaction reconciles
the index with the store's own markers (`index/` pointers, `failures/`, `damaged/`, live leases),
which is why those markers' modules sit below the index and these notes above it."""

from __future__ import annotations

import logging
import random
import time
from typing import Any

from neuronforge.artifacts import layout
from neuronforge.artifacts.failures import write_failure
from neuronforge.artifacts.farm_index import snapshot
from neuronforge.artifacts.farm_index.entry import (
    attestation_record,
    building_record,
    channel_records,
    failure_record,
    published_record,
    review_record,
)
from neuronforge.artifacts.farm_index.log import COMPACT_AT, MAX_TRIES, TAIL, IndexCorrupt, read_tail
from neuronforge.artifacts.leases import Lease
from neuronforge.common.errors import NeuronforgeError, StoreError
from neuronforge.records.artifact_manifest import ArtifactManifest
from neuronforge.records.failure import FailureRecord
from neuronforge.records.farm_index import FarmIndexTail, LogRecord
from neuronforge.records.index_entry import IndexEntry
from neuronforge.stores import ArtifactStore

log = logging.getLogger(__name__)


def append(store: ArtifactStore, records: list[LogRecord], *, compact: bool = True) -> int:
    """Append `records` to the tail by compare-and-swap and return the last sequence number given;
    compact when the tail is due. A corrupt tail is replaced by a rebuild from the manifests (which
    holds what it lost)."""
    for attempt in range(MAX_TRIES):
        try:
            tail, version = read_tail(store)
        except IndexCorrupt as exc:
            log.warning("farm index: %s; rebuilding it from the manifests", exc)
            snapshot.rebuild(store)
            continue
        if tail is None:
            tail = FarmIndexTail(next_seq=snapshot.head_seq(store) + 1)
        seq = tail.next_seq
        new = [r.numbered(seq + i) for i, r in enumerate(records)]
        updated = FarmIndexTail(next_seq=seq + len(new), records=[*tail.records, *new])
        data = updated.to_bytes()
        done = store.replace_if_version(data, TAIL, version) if version else store.put_if_absent(data, TAIL)
        if done:
            if compact and len(updated.records) >= COMPACT_AT:
                try:
                    snapshot.compact(store)
                except (StoreError, OSError) as exc:  # the records are in; whoever comes next compacts
                    log.warning("farm index: compaction deferred: %s", exc)
            return seq + len(new) - 1
        time.sleep(random.uniform(0, min(0.05 * (attempt + 1), 0.5)))
    raise StoreError(f"{store.uri(TAIL)}: {MAX_TRIES} conflicting writes in a row; the index was not updated")


def note_published(store: ArtifactStore, index: IndexEntry, manifest: ArtifactManifest, fresh: bool = True) -> None:
    """After `index/<key>.json` (two requests). Its failure does not unpublish anything: the index
    is a cache of the manifests, and the next compaction finds the pointer without a record. A
    publish over a pointer that was there already (`fresh` False: a rebuild of a damaged artifact)
    first drops the key's damage record (`damaged/<key>.json`): the published record clears the row."""
    try:
        if not fresh:
            store.delete_prefix(layout.damage_entry(manifest.cache_key))
        append(store, [published_record(index, manifest)])
    except (StoreError, OSError) as exc:
        log.warning(
            "published %s, but the farm index was not updated (%s); its next compaction recovers it",
            manifest.cache_key[:12],
            exc,
        )


def record_failure(
    store: ArtifactStore, key: str, stage: str, exc: BaseException, run_id: str = "", state: Any = None
) -> FailureRecord:
    """Write the failure record (`failures.write_failure`) and show it in the farm index."""
    failure = write_failure(store, key, stage, exc, run_id, state)
    try:
        append(store, [failure_record(failure)])
    except (StoreError, OSError) as exc_note:  # advisory twice over; the next compaction finds the record
        log.warning("failure of %s recorded, but the farm index was not told (%s)", key[:12], exc_note)
    return failure


def announce(store: ArtifactStore, lease: Lease, state: Any = None) -> None:
    """Show a claimed build in the farm index (the catalog's "building" row; readers confirm it
    against the lease itself). `state` (a BuildState) names the model and target."""
    at = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(lease.started))
    try:
        append(store, [building_record(lease.key, lease.holder, at, state)])
    except (NeuronforgeError, OSError) as exc:
        log.warning("lease %s: the farm index was not told (%s)", lease.key[:12], exc)


def note_channel(store: ArtifactStore, record: Any) -> None:
    """After a channel move (a `ChannelRecord` as written): the rows of the build it now points to and
    of the one it left. Two requests; advisory like every note (`rebuild` reads the channels back)."""
    try:
        append(store, channel_records(record))
    except (NeuronforgeError, OSError) as exc:
        log.warning("channel %s moved, but the farm index was not told (%s)", record.channel, exc)


def note_review(store: ArtifactStore, record: Any) -> None:
    """After a review decision (a `ReviewRecord`)."""
    try:
        append(store, [review_record(record)])
    except (NeuronforgeError, OSError) as exc:
        log.warning("review of %s recorded, but the farm index was not told (%s)", record.key[:12], exc)


def note_attestation(store: ArtifactStore, record: Any) -> None:
    """After an attestation (an `AttestationRecord` as written): the releases its row shows."""
    try:
        append(store, [attestation_record(record)])
    except (NeuronforgeError, OSError) as exc:
        log.warning("attestation of %s recorded, but the farm index was not told (%s)", record.key[:12], exc)
