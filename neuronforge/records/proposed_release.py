"""A Neuron SDK release read from AWS's release manifest and not (yet) in the package's release table:
`sdk-releases/entries/<version>.json` in the store, written by `neuronforge releases sync`
(`neuronforge.farm.release_feed`), decided by `releases accept` / `releases reject`.

It is the table's own record (`entry`: an `SdkReleaseEntry`, the same model a data file holds) plus its
review: its state (proposed, accepted, rejected), what the manifest does not carry and so needs review
(never guessed: a DLC image tag, a line's status per family, a plugin's vLLM version), the package changes
against the release it follows, and the manifest it came from with the sha256 of its bytes. Because it
lives in the store, every worker and the recompile DAG see an accepted release without a neuronforge
upgrade (`release_feed.known_table`).

Written by compare-and-swap on its store version like a review (`neuronforge.artifacts.release_entries`):
two syncs, or a sync and an accept, racing cannot erase each other. Each decision keeps the earlier ones.
"""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictStr, model_validator

from neuronforge.records.base import StoredRecord
from neuronforge.records.parts import Text
from neuronforge.records.sdk_release import ReleaseVersion, SdkReleaseEntry

FeedState = Literal["proposed", "accepted", "rejected"]
PROPOSED, ACCEPTED, REJECTED = "proposed", "accepted", "rejected"
HISTORY = 50  # earlier decisions kept


class _Part(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class NeedsReview(_Part):
    """A part of the entry the manifest does not carry: left empty, with why."""

    what: Text  # the entry's field: `images`, `lines.vllm-neuron-native`, `packages.vllm`, `date`
    why: Text


class PackageChange(_Part):
    """One package against the release the proposal follows: added (`before` empty), removed (`after`
    empty) or changed."""

    name: StrictStr
    before: StrictStr = ""
    after: StrictStr = ""

    @property
    def line(self) -> str:
        if not self.before:
            return f"+ {self.name} {self.after}"
        if not self.after:
            return f"- {self.name} {self.before}"
        return f"~ {self.name} {self.before} -> {self.after}"


class Reviewed(_Part):
    """A field the manifest did not carry, settled by a person: taken as it is in an earlier release
    (`releases accept V --same-as R`), with who decided and when."""

    what: Text  # the `NeedsReview.what` it settles: `packages.vllm`, `lines.vllm-neuron-native`
    same_as: ReleaseVersion
    by: Text = ""
    at: Text = ""  # UTC, ISO 8601


class ManifestOrigin(_Part):
    """The manifest the entry was read from."""

    uri: Text  # https://…, s3://…, file://…
    sha256: StrictStr = Field(pattern=r"^[0-9a-f]{64}$")
    manifest_version: Text = ""
    manifest_date: Text = ""


class FeedDecision(_Part):
    state: FeedState
    by: Text = ""
    at: Text = ""  # UTC, ISO 8601
    reason: Text = ""


class ProposedRelease(StoredRecord):
    KIND: ClassVar[str] = "proposed SDK release"
    SCHEMA: ClassVar[int] = 1
    model_config = ConfigDict(frozen=True, extra="forbid")

    version: ReleaseVersion
    entry: SdkReleaseEntry
    base: StrictStr = ""  # the known release `changes` are against ("": none was older)
    changes: tuple[PackageChange, ...] = ()
    needs_review: tuple[NeedsReview, ...] = ()
    reviewed: tuple[Reviewed, ...] = ()  # needs-review fields settled since (no longer in `needs_review`)
    manifest: ManifestOrigin
    current: FeedDecision
    history: tuple[FeedDecision, ...] = ()  # earlier decisions, newest first

    @model_validator(mode="after")
    def _same_release(self) -> ProposedRelease:
        if self.entry.version != self.version:
            raise ValueError(f"entry.version {self.entry.version!r} is not the record's version {self.version!r}")
        return self

    @property
    def state(self) -> str:
        return self.current.state

    def decided(self, decision: FeedDecision, **changed: object) -> ProposedRelease:
        """The record with `decision` current (the earlier one into its history) and `changed` fields."""
        history = (self.current, *self.history)[:HISTORY]
        return self.model_copy(update={"current": decision, "history": history, **changed})

    def same_proposal(self, other: ProposedRelease) -> bool:
        """Whether `other` proposes what this one does (the manifest's bytes and the review aside)."""
        return (self.entry, self.base, self.changes, self.needs_review) == (
            other.entry,
            other.base,
            other.changes,
            other.needs_review,
        )
