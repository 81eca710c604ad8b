"""A build's review state (`reviews/<key>.json`, `neuronforge.records.review`): approve or reject a
published build without touching its manifest. Channels that require approval read it before moving;
every channel refuses a rejected build.

A decision is a compare-and-swap on the record's store version, retried when another reviewer wrote
in between (both decisions are kept: the later one is current, the earlier one is in its history).
"""

from __future__ import annotations

from neuronforge.artifacts import layout
from neuronforge.artifacts.farm_index.notes import note_review
from neuronforge.artifacts.sidecars import swap
from neuronforge.common.errors import InvalidInput
from neuronforge.records.review import ReviewDecision, ReviewRecord
from neuronforge.stores import ArtifactStore, NotFound

PENDING = "pending"


def review_of(store: ArtifactStore, key: str) -> ReviewRecord | None:
    """The build's review record; None while nobody decided (the build is pending)."""
    try:
        return ReviewRecord.read(store, layout.review_entry(key))
    except NotFound:
        return None


def state_of(store: ArtifactStore, key: str) -> str:
    record = review_of(store, key)
    return record.state if record is not None else PENDING


def require_reason(state: str, reason: str) -> None:
    """A rejection says why: whoever deployed the build reads it."""
    if state == "rejected" and not reason.strip():
        raise InvalidInput("reject: give the reason, so whoever deployed the build can act on it")


def decide(store: ArtifactStore, key: str, state: str, by: str, reason: str, at: str) -> ReviewRecord:
    """Record `state` (approved, rejected) for the build `key` as the current decision."""
    require_reason(state, reason)
    decision = ReviewDecision(state=state, by=by, at=at, reason=reason)  # type: ignore[arg-type]
    record = swap(
        store,
        layout.review_entry(key),
        ReviewRecord,
        lambda: ReviewRecord(key=key, current=decision),
        lambda stored: stored.decided(decision),
        "decisions in a row; decide again",
    )
    note_review(store, record)
    return record
