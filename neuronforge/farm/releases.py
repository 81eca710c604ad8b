"""One release action — promote, rollback, approve, reject — as the Airflow release DAG, the catalog's
buttons and the CLI's commands all take it: the fields are declared once here (`ReleaseRequest`), the
DAG's Params and the catalog's confirmation derive from them, and `run` is the one dispatch.

What each action does is `neuronforge.artifacts.channels` (moves) and `neuronforge.artifacts.reviews`
(decisions); this module only says which, and describes the outcome in one line and as JSON.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, fields, replace
from typing import Any, Literal

from neuronforge.artifacts import channels, reviews
from neuronforge.artifacts.comparison import Comparison
from neuronforge.artifacts.published import find_key, key_prefix
from neuronforge.common import advice
from neuronforge.common.errors import InvalidInput, NeuronforgeError
from neuronforge.common.one_line import one_line
from neuronforge.records.channel import ChannelMove, ChannelRecord
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
    build: str = ""  # promote/rollback --build, approve, reject: a cache key or its first 12+ hex digits
    from_channel: str = ""  # promote --from
    steps: int = 1  # rollback --steps (without --build)
    reason: str = ""
    accept_regression: str = ""  # promote: why to promote past a regression the channel's gate refuses

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ReleaseRequest:
        known = {f.name for f in fields(cls)}
        data = _renamed(data)
        unknown = sorted(set(data) - known)
        if unknown:
            raise InvalidInput(
                f"release request: unknown field(s) {', '.join(unknown)}; known: {', '.join(sorted(known))}"
            )
        values = {k: v for k, v in data.items() if v is not None}
        if data.get("action") == "rollback" and "build" in values:
            key_prefix(str(values["build"]), "--build")  # given, it is a key: an empty one is no "go back by steps"
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
            if self.action == "rollback" and self.build:
                key_prefix(self.build, "--build")
        else:
            if not self.build:
                raise InvalidInput(f"{self.action}: give the build (its cache key or first 12 hex digits)")
            reviews.require_reason(self.review_state, self.reason)
        one_line("reason", self.reason)
        one_line("the reason to accept a regression", self.accept_regression)
        if self.accept_regression and self.action != "promote":
            raise InvalidInput(f"{self.action}: only a promote is compared, so only a promote accepts a regression")

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
            what = f"build {self.build[:12]}" if self.build else f"the build {self.steps} step(s) back in its history"
            return f"point {self.channel_ref()} back at {what}"
        state = self.review_state
        return f"mark build {self.build[:12]} {state}" + (f" ({self.reason})" if self.reason else "")


def _renamed(data: dict[str, Any]) -> dict[str, Any]:
    """`data` with the old name of a rollback's build, `to` (a conf written before the moves spoke one
    vocabulary: the CLI's `rollback --to KEY`), read as `build`; both given is refused."""
    if "to" not in data:
        return data
    out = {k: v for k, v in data.items() if k != "to"}
    if data.get("build") not in (None, "") and data["to"] not in (None, ""):
        raise InvalidInput("release request: `build` and its old name, `to`, both given: give `build` only")
    if data["to"] is not None and out.get("build") in (None, ""):
        out["build"] = data["to"]
    return out


def gate_said(move: ChannelMove) -> str:
    """What a move's history entry says of the regression gate, as the end of its line: the comparison
    made and the reason given to promote past it ("" when nothing was compared)."""
    said = f"; compared: {move.comparison}" if move.comparison else ""
    return said + (f"; regression accepted: {move.accepted_regression}" if move.accepted_regression else "")


@dataclass(frozen=True)
class ReleaseOutcome:
    action: str
    line: str  # what happened, one sentence
    changed: bool
    channel: ChannelRecord | None = None  # the channel as written (moves)
    key: str = ""  # the build the channel now points to, or that was reviewed
    previous: str = ""  # the build the channel pointed to before
    comparison: Comparison | None = None  # a promote to a gated channel: the build against the one it served

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        out["channel"] = self.channel.to_json() if self.channel is not None else None
        out["comparison"] = self.comparison.to_json() if self.comparison is not None else None
        return out


def plan(store: ArtifactStore, request: ReleaseRequest) -> tuple[channels.Plan, ReleaseRequest]:
    """A move's plan (`channels.plan_promote` / `plan_rollback`: everything read and checked, nothing
    written) and the request pinned to the build it names (a promote `--from`, a rollback by steps:
    the key the plan found), which the catalog's confirmation hands to the release DAG."""
    ref = request.channel_ref()
    if request.action == "promote":
        found = channels.plan_promote(
            store,
            ref,
            build=request.build or None,
            from_channel=request.from_channel or None,
            accept_regression=request.accept_regression,
        )
        return found, replace(request, build=found.key, from_channel="")
    found = channels.plan_rollback(store, ref, steps=request.steps, to=request.build or None)
    return found, replace(request, build=found.key, steps=1)


def run(
    store: ArtifactStore, request: ReleaseRequest, by: str = "", show: Callable[[str], None] | None = None
) -> ReleaseOutcome:
    """Do `request` against `store`; refusals are `PromotionRefused` (a regression the channel's gate
    refuses `channels.RegressionRefused`), a lost race `ChannelMoved`. `show` is given each line of the
    comparison a gated promote makes (`Comparison.lines()`) before anything moves or is refused: the
    CLI prints them, the release DAG logs them (builds that do not compare: the outcome's line says why)."""
    request.check()
    by = by or channels.mover()
    one_line("who (--by)", by)
    if request.action in MOVES:
        ref = request.channel_ref()
        made = plan(store, request)[0]
        if made.comparison is not None and made.comparison.comparable and show is not None:
            for said in made.comparison.lines():  # not comparable: the outcome's line says why
                show(said)
        result = channels.apply(store, made, by=by, reason=request.reason)
        move = result.record.current
        if result.changed:
            was = f" (was {move.previous[:12]})" if move.previous else " (new channel)"
            if move.previous == move.build.key:  # `Plan.repin`
                was = (
                    " again (its manifest was published again since the channel moved to it: pinned to it as it is now)"
                )
            line = f"{ref}: {move.action} to {move.build.key[:12]}{was}" + gate_said(move)
        else:
            line = f"{ref} already points to {move.build.key[:12]}; nothing changed"
        return ReleaseOutcome(
            request.action, line, result.changed, result.record, move.build.key, move.previous, made.comparison
        )
    key = find_key(store, request.build)
    state = request.review_state
    record = reviews.decide(store, key, state, by, request.reason, channels.now())
    line = f"build {key[:12]} {state} by {by}" + (f": {request.reason}" if request.reason else "")
    held = channels.records_pointing_to(store, key) if state == "rejected" else []
    for r in held:
        line += f"; WARNING: {r.model} · {r.profile_line} · {r.channel} still points to it: {move_away(store, r)}"
    return ReleaseOutcome(request.action, line, True, None, record.key)


def move_away(store: ArtifactStore, record: ChannelRecord) -> str:
    """The command that moves a channel off its build (rejected, damaged, unreadable), one that works
    now: a rollback when the build it would go back to passes a move's checks (`plan_rollback`: read
    only for a flagged channel), else a promote of another build, saying why a rollback would not do."""
    ref = channels.ChannelRef.parse(record.model, record.profile_line, record.channel)

    def promote(why: str) -> str:
        return f"promote another build ({why}): {channels.promote_advice(store, ref)}"

    if not channels.earlier_builds(record):
        return promote("it held no other build to roll back to")
    try:
        found = channels.plan_rollback(store, ref)
    except NeuronforgeError as exc:
        return promote(f"a rollback would not do: {exc}")
    if found.refused is not None:
        return promote(f"a rollback to {found.key[:12]} would be refused: {found.refused}")
    rollback = advice.command("rollback", ref.model, profile=ref.line, channel=ref.channel, store=store.root_uri)
    return f"{rollback} (back to {found.key[:12]})"
