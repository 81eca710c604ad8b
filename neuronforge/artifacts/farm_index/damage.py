"""Damage made visible: whoever opens a published artifact and finds it damaged — its manifest gone or
unreadable, a file it lists missing or of another size (`published.examine`), another sha256 (`verify`) —
records it, so every listing shows it as damaged, with the reason, from then on. Readers that open one
artifact (`show`, `verify`, `ls --check`, a channel move, the catalog, the pipeline's lookup) find and
record it through `artifacts.opening`, whatever name they were given.

Written as the index writes every note: `damaged/<key>.json` (a `DamageRecord`, which `rebuild` and
compaction read back), then a "damaged" record appended to the tail by compare-and-swap. Nothing inside
the artifact's folder is touched. A damage already recorded with the same reason is not written again
(one GET), so a reader that keeps finding it costs one request, not a tail write. The key's next
publish clears it (`notes.note_published`); so do the scrub and `verify` when the artifact checks
whole again by a check at least as deep as the one that found it.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from neuronforge.artifacts import layout
from neuronforge.artifacts.failures import names_of
from neuronforge.artifacts.farm_index.entry import damaged_record, manifest_names, published_record
from neuronforge.artifacts.farm_index.log import ROOT
from neuronforge.artifacts.farm_index.notes import append
from neuronforge.artifacts.farm_index.reader import read_window
from neuronforge.artifacts.published import Damage, Published
from neuronforge.common.errors import NeuronforgeError
from neuronforge.records.base import RecordError
from neuronforge.records.damage import DamageRecord
from neuronforge.records.index_entry import IndexEntry
from neuronforge.stores import ArtifactStore, NotFound

log = logging.getLogger(__name__)

SIZES, SHA256 = "sizes", "sha256"  # how deep the check that found it went (a listing, or a download)


def read_damage(store: ArtifactStore, key: str) -> DamageRecord | None:
    """The damage recorded for `key`, or None (none, or unreadable: a forged record is not damage)."""
    try:
        return DamageRecord.read(store, layout.damage_entry(key))
    except (NotFound, RecordError):
        return None


def note_damaged(
    store: ArtifactStore, damage: Damage, by: str, state: Any = None, checked: str = SIZES
) -> tuple[DamageRecord, bool]:
    """Record `damage` (found by `by`: show, lookup, verify, promote, scrub, ...) in the store and the
    farm index. Returns the record and whether this call wrote it: not when it was recorded already
    with the same reason, nor when the store refused (advisory like every note: a reader that cannot
    write still refuses the artifact, it only cannot tell the index). `state` (a BuildState) names
    the build when its manifest is gone."""
    try:
        old = read_damage(store, damage.key)
    except (NeuronforgeError, OSError):  # written afresh below, or not at all
        old = None
    if old is not None and old.reason == damage.reason:
        return old, False
    names = manifest_names(damage.found) if damage.found is not None else names_of(state)
    if not names and old is not None:
        names = {n: getattr(old, n) for n in ("model", "profile", "target", "instance")}
    if not names:
        names = _indexed_names(store, damage.key)
    at = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    record = DamageRecord(
        key=damage.key, reason=damage.reason, at=at, by=by, manifest=damage.manifest, checked=checked, **names
    )
    try:
        record.write(store, layout.damage_entry(damage.key))
        append(store, [damaged_record(record)])
    except (NeuronforgeError, OSError) as exc:
        log.warning("%s is damaged (%s), but the farm index was not told (%s)", damage.key[:12], damage.reason, exc)
        return record, False
    log.debug("%s is damaged: %s; recorded in the farm index", damage.key[:12], damage.reason)
    return record, True


def _indexed_names(store: ArtifactStore, key: str) -> dict[str, str]:
    """What the index calls `key` (its row's model, profile, target, instance), for a damage found
    where nothing else names the build (its manifest gone, found by `show`): the record then sorts
    where its row is, and a filtered listing finds it. Reads the index's pages until the row (a
    damage is recorded once, so this is paid once); {} when the index cannot say (a store without an
    index is not scanned to build one here)."""
    try:
        if not store.list_page(ROOT, limit=1):  # no index yet: not built from here (a scan of the store)
            return {}
        rows = read_window(store, match=lambda e: e.key == key, limit=1).entries
    except (NeuronforgeError, OSError):
        return {}
    if not rows:
        return {}
    return {n: getattr(rows[0], n) for n in ("model", "profile", "target", "instance") if getattr(rows[0], n)}


def clear_damage(store: ArtifactStore, published: Published, deepest: str = SIZES) -> bool:
    """The artifact checks whole again: drop its damage record and show it published (its published
    record appended again), unless the damage was found by a deeper check than `deepest` (a listing
    never clears what a sha256 found). True when it cleared one."""
    old = read_damage(store, published.key)
    if old is None or (old.checked == SHA256 and deepest != SHA256) or published.manifest is None:
        return False
    try:
        index = IndexEntry.read(store, layout.index_entry(published.key))
        store.delete_prefix(layout.damage_entry(published.key))
        append(store, [published_record(index, published.manifest)])
    except (NeuronforgeError, OSError) as exc:
        log.warning("%s checks whole again, but its damage record stays (%s)", published.key[:12], exc)
        return False
    log.warning("%s checks whole again: its damage record (%s) is cleared", published.key[:12], old.reason)
    return True
