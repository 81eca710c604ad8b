"""The releases a store holds beside the package's release table: `sdk-releases/entries/<version>.json`
(`neuronforge.records.proposed_release`), written by the release feed (`neuronforge.farm.release_feed`).

Every write is a compare-and-swap on the record's store version (created with put-if-absent, replaced
only at the version read), as reviews are (`neuronforge.artifacts.reviews`): of two syncs racing, or a
sync and an accept, one writes and the other reads again and decides on what is there now.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from typing import Any

from neuronforge.artifacts import layout
from neuronforge.common import advice
from neuronforge.common.errors import InvalidInput, StoreError
from neuronforge.records.base import RecordError
from neuronforge.records.proposed_release import REJECTED, FeedDecision, ProposedRelease
from neuronforge.stores import ArtifactStore, NotFound

TRIES = 8
PAGE = 1000


def get(store: ArtifactStore, version: str) -> tuple[ProposedRelease, str] | None:
    """The record of `version` and its store version; None when the store holds none."""
    try:
        return ProposedRelease.read_versioned(store, layout.sdk_release_entry(version))
    except NotFound:
        return None


def put(store: ArtifactStore, record: ProposedRelease, version: str | None) -> bool:
    """Write `record` where its release's belongs if the store still holds what was read (`version`
    None: nothing); False when another writer came first."""
    key = layout.sdk_release_entry(record.version)
    if version is None:
        return store.put_if_absent(record.to_bytes(), key)
    return store.replace_if_version(record.to_bytes(), key, version)


def listing(store: ArtifactStore) -> tuple[list[ProposedRelease], list[RecordError]]:
    """Every record under `sdk-releases/entries/`, one listing page at a time (a store holds a few),
    and the ones that do not read as records (damaged: shown, never skipped silently)."""
    found: list[ProposedRelease] = []
    damaged: list[RecordError] = []
    after = ""
    while True:
        page = store.list_page(layout.SDK_RELEASE_ENTRIES, after, PAGE)
        for info in page:
            if not info.key.endswith(".json"):
                continue
            try:
                found.append(ProposedRelease.read(store, info.key))
            except NotFound:  # deleted since the listing
                continue
            except RecordError as exc:
                damaged.append(exc)
        if len(page) < PAGE:
            return found, damaged
        after = page[-1].key


def decide(
    store: ArtifactStore,
    version: str,
    state: str,
    by: str,
    reason: str,
    at: str,
    review: Callable[[ProposedRelease], dict[str, Any]] | None = None,
) -> ProposedRelease:
    """Record `state` (accepted, rejected) as the release's current decision, keeping the earlier ones;
    `review`: the fields it settles with the decision, from the record as read (again on a conflict)."""
    if state == REJECTED and not reason.strip():
        raise InvalidInput("releases reject: give the reason (--reason), so whoever syncs next knows why")
    decision = FeedDecision(state=state, by=by, at=at, reason=reason)  # type: ignore[arg-type]
    for attempt in range(TRIES):
        held = get(store, version)
        if held is None:
            raise InvalidInput(
                f"SDK {version}: {store.uri(layout.sdk_release_entry(version))} holds no proposed release; "
                f"{advice.command('releases sync', store=store.root_uri)} proposes what a manifest adds"
            )
        record, stored = held
        if record.current.state == state and record.current.reason == reason and review is None:
            return record  # decided so already: nothing to write
        changed = record.decided(decision, **(review(record) if review else {}))
        if put(store, changed, stored):
            return changed
        time.sleep(random.uniform(0, 0.05 * (attempt + 1)))
    raise StoreError(f"{store.uri(layout.sdk_release_entry(version))}: {TRIES} conflicting writes in a row; again")
