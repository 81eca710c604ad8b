"""One release action — promote, rollback, approve, reject — as the Airflow release DAG, the catalog's
buttons and the CLI's commands all take it: the fields are declared once here (`ReleaseRequest`), the
DAG's Params and the catalog's confirmation derive from them, and `run` is the one dispatch.

What each action does is `neuronforge.artifacts.channels` (moves) and `neuronforge.artifacts.reviews`
(decisions); this module only says which, and describes the outcome in one line and as JSON.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields, replace
from typing import Any, Literal

from neuronforge.artifacts import channels, reviews
from neuronforge.artifacts.published import find_key, key_prefix
from neuronforge.common.errors import InvalidInput
from neuronforge.records.channel import ChannelRecord
from neuronforge.stores import ArtifactStore

Action = Literal["promote", "rollback", "approve", "reject"]
ACTIONS: tuple[str, ...] = ("promote", "rollback", "approve", "reject")
MOVES = ("promote", "rollback")


@dataclass(frozen=True)
class ReleaseRequest:
    """What to do. A move names the channel (model, profile line, channel); a review names the build."""

    action: str
    model: str = ""
    profile: str = ""
    channel: str = ""
    build: str = ""  # promote --build, approve, reject: a cache key or its first 12+ hex digits
    from_channel: str = ""  # promote --from
    steps: int = 1  # rollback --steps
    to: str = ""  # rollback --to
    reason: str = ""

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ReleaseRequest:
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise InvalidInput(
                f"release request: unknown field(s) {', '.join(unknown)}; known: {', '.join(sorted(known))}"
            )
        values = {k: v for k, v in data.items() if v is not None}
        if data.get("action") == "rollback" and "to" in values:
            key_prefix(str(values["to"]), "--to")  # given, it is a key: an empty one is no "go back by steps"
        try:
            values["steps"] = int(values.get("steps", 1))
        except (TypeError, ValueError):
            raise InvalidInput(f"release request: steps {data.get('steps')!r} is not a whole number") from None
        request = cls(**{k: (str(v).strip() if k != "steps" else v) for k, v in values.items()})
        request.check()
        return request

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    def check(self) -> None:
        if self.action not in ACTIONS:
            raise InvalidInput(f"release action {self.action!r}: one of {', '.join(ACTIONS)}")
        if self.action in MOVES:
            self.channel_ref()
            if self.action == "rollback" and self.to:
                key_prefix(self.to, "--to")
        else:
            if not self.build:
                raise InvalidInput(f"{self.action}: give the build (its cache key or first 12 hex digits)")
            reviews.require_reason(self.review_state, self.reason)
        one_line("reason", self.reason)

    @property
    def review_state(self) -> str:
        """The review state an approve or reject records."""
        return "approved" if self.action == "approve" else "rejected"

    def channel_ref(self) -> channels.ChannelRef:
        if not (self.model and self.profile and self.channel):
            raise InvalidInput(f"{self.action}: give the model, the serving profile and the channel")
        return channels.ChannelRef.parse(self.model, self.profile, self.channel)

    def describe(self) -> str:
        """What the request will change, in one sentence (the catalog's confirmation, the DAG run's note)."""
        if self.action == "promote":
            what = f"build {self.build[:12]}" if self.build else f"what {self.from_channel} points to"
            return f"point {self.channel_ref()} at {what}"
        if self.action == "rollback":
            what = f"build {self.to[:12]}" if self.to else f"the build {self.steps} step(s) back in its history"
            return f"point {self.channel_ref()} back at {what}"
        state = self.review_state
        return f"mark build {self.build[:12]} {state}" + (f" ({self.reason})" if self.reason else "")


REASON_MAX = 500


def one_line(what: str, text: str) -> None:
    """Reasons and names are shown on one line of a history, a page, a log: no control characters."""
    if len(text) > REASON_MAX:
        raise InvalidInput(f"{what} is {len(text)} characters long; keep it under {REASON_MAX}")
    if any(ord(c) < 32 or ord(c) == 127 for c in text):
        raise InvalidInput(f"{what} {text[:60]!r} holds a line break or control character; give one line of text")


@dataclass(frozen=True)
class ReleaseOutcome:
    action: str
    line: str  # what happened, one sentence
    changed: bool
    channel: ChannelRecord | None = None  # the channel as written (moves)
    key: str = ""  # the build the channel now points to, or that was reviewed
    previous: str = ""  # the build the channel pointed to before

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        out["channel"] = self.channel.to_json() if self.channel is not None else None
        return out


def plan(store: ArtifactStore, request: ReleaseRequest) -> tuple[channels.Plan, ReleaseRequest]:
    """A move's plan (`channels.plan_promote` / `plan_rollback`: everything read and checked, nothing
    written) and the request pinned to the build it names (a promote `--from`, a rollback by steps:
    the key the plan found), which the catalog's confirmation hands to the release DAG."""
    ref = request.channel_ref()
    if request.action == "promote":
        found = channels.plan_promote(
            store, ref, build=request.build or None, from_channel=request.from_channel or None
        )
        return found, replace(request, build=found.key, from_channel="")
    found = channels.plan_rollback(store, ref, steps=request.steps, to=request.to or None)
    return found, replace(request, to=found.key, steps=1)


def run(store: ArtifactStore, request: ReleaseRequest, by: str = "") -> ReleaseOutcome:
    """Do `request` against `store`; refusals are `PromotionRefused`, a lost race `ChannelMoved`."""
    request.check()
    by = by or channels.mover()
    one_line("who (--by)", by)
    if request.action in MOVES:
        ref = request.channel_ref()
        result = channels.apply(store, plan(store, request)[0], by=by, reason=request.reason)
        move = result.record.current
        if result.changed:
            was = f" (was {move.previous[:12]})" if move.previous else " (new channel)"
            if move.previous == move.build.key:  # `Plan.repin`
                was = (
                    " again (its manifest was published again since the channel moved to it: pinned to it as it is now)"
                )
            line = f"{ref}: {move.action} to {move.build.key[:12]}{was}"
        else:
            line = f"{ref} already points to {move.build.key[:12]}; nothing changed"
        return ReleaseOutcome(request.action, line, result.changed, result.record, move.build.key, move.previous)
    key = find_key(store, request.build)
    state = request.review_state
    record = reviews.decide(store, key, state, by, request.reason, channels.now())
    line = f"build {key[:12]} {state} by {by}" + (f": {request.reason}" if request.reason else "")
    held = channels.pointing_to(store, key) if state == "rejected" else []
    if held:
        line += f"; WARNING: {', '.join(held)} still point(s) to it: roll back or promote another build"
    return ReleaseOutcome(request.action, line, True, None, record.key)
