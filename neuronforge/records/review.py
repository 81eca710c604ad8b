"""A build's review state: `reviews/<key>.json`, beside the build's manifest and never inside it (the
manifest is immutable; approval changes). No record means `pending`. Each decision keeps the earlier
ones, so the build page shows who approved a build that was later rejected, and why.

Written by compare-and-swap like a channel (`neuronforge.artifacts.reviews`): two reviewers deciding at
once cannot erase each other's decision.
"""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictStr

from neuronforge.records.base import StoredRecord
from neuronforge.records.parts import Text

ReviewState = Literal["pending", "approved", "rejected"]
REVIEW_STATES: tuple[str, ...] = ("pending", "approved", "rejected")


class ReviewDecision(BaseModel):
    model_config = ConfigDict(frozen=True, extra="allow")

    state: ReviewState
    by: Text = ""
    at: Text = ""  # UTC, ISO 8601
    reason: Text = ""


class ReviewRecord(StoredRecord):
    KIND: ClassVar[str] = "review state"
    SCHEMA: ClassVar[int] = 1

    key: StrictStr  # the build's full cache key
    current: ReviewDecision
    history: list[ReviewDecision] = Field(default_factory=list)  # earlier decisions, newest first

    @property
    def state(self) -> str:
        return self.current.state

    def decided(self, decision: ReviewDecision) -> ReviewRecord:
        return self.model_copy(update={"current": decision, "history": [self.current, *self.history][:50]})
