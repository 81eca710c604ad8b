"""Release channels: a named pointer per (model, serving profile line, channel) to one published build,
moved by compare-and-swap (`neuronforge.records.channel`).

    promote   point the channel at a published build (given by key, or what another channel points to)
    rollback  point it back at a build of its own history
    read      the channel as stored (one GET)

What a move checks, every time, before it writes:
- the build is published and its manifest verifies (the index points at a complete manifest whose
  digest the move records), and it was not found damaged since (`damaged/<key>.json`: a build found
  damaged here is recorded so, and refused); a rollback returns to a build verified when it was first promoted (builds
  are immutable, gc keeps what a history names, and every host's resolve.sh checks the recorded digest);
- its smoke test passed;
- it was built for the channel's model and profile line;
- it is not rejected, and, where the channel requires approval (`Settings.approval_channels`, by
  default `stable`), it is approved.
Then it writes the one record with `If-Match` on the version it read (`If-None-Match: *` when the
channel is new): of concurrent movers exactly one writes; the others get `ChannelMoved`, naming who moved
it and to what. Nothing is copied: a move writes one small object (plus, for a new channel, its launch
files, `channel_launch`), and tells the farm index (advisory, like every note).
"""

from __future__ import annotations

import getpass
import re
import socket
import time
from dataclasses import dataclass, replace

from neuronforge.artifacts import layout, reviews
from neuronforge.artifacts.channel_launch import write_launch
from neuronforge.artifacts.farm_index.damage import read_damage
from neuronforge.artifacts.farm_index.notes import note_channel
from neuronforge.artifacts.opening import open_published
from neuronforge.artifacts.published import Damage, find_key
from neuronforge.common import settings
from neuronforge.common.errors import ExitCode, InvalidInput, NeuronforgeError, StoreError
from neuronforge.records.artifact_manifest import ArtifactManifest
from neuronforge.records.base import RecordError, RecordTooNew
from neuronforge.records.channel import ChannelBuild, ChannelMove, ChannelRecord
from neuronforge.records.damage import DamageRecord
from neuronforge.records.index_entry import IndexEntry
from neuronforge.spec.source import ModelSource, model_name
from neuronforge.stores import ArtifactStore, NotFound

CHANNEL_NAME = re.compile(r"[a-z0-9][a-z0-9._-]{0,62}")
PROFILE_LINE = re.compile(r"[a-z0-9][a-z0-9._-]{0,62}")
KEY_PREFIX = re.compile(r"[0-9a-f]{6,64}")


class PromotionRefused(NeuronforgeError):
    """The build may not go to the channel: unpublished, unverified, smoke failed, another model or
    profile line, rejected, or not approved where the channel requires it."""

    exit_code = ExitCode.REJECTED
    prefix = "refused: "


class ChannelMoved(NeuronforgeError):
    """Another mover wrote the channel between our read and our write: nothing of ours was written."""

    exit_code = ExitCode.FAILURE


@dataclass(frozen=True)
class ChannelRef:
    """Which channel: a model (any revision), a serving profile line, a channel name."""

    source: ModelSource
    line: str
    channel: str

    @classmethod
    def parse(cls, model: str, profile: str, channel: str) -> ChannelRef:
        source = ModelSource.parse(model)
        if source.revision:
            raise InvalidInput(
                f"model {model!r} names a revision: a channel spans revisions (it points to a build of one); "
                f"give the model without @{source.revision}"
            )
        line = profile.partition("@")[0].strip()
        if not PROFILE_LINE.fullmatch(line):
            raise InvalidInput(f"profile {profile!r}: give a serving profile name such as vllm-neuron")
        if not CHANNEL_NAME.fullmatch(channel):
            raise InvalidInput(
                f"channel {channel!r}: use lower-case letters, digits, '.', '_' and '-' (at most 63), e.g. stable"
            )
        return cls(source, line, channel)

    def sibling(self, channel: str) -> ChannelRef:
        return ChannelRef.parse(self.model, self.line, channel)

    @property
    def model(self) -> str:
        return self.source.name

    @property
    def prefix(self) -> str:
        return layout.channel_prefix(self.source, self.line, self.channel)

    @property
    def record_key(self) -> str:
        return layout.channel_record(self.source, self.line, self.channel)

    def __str__(self) -> str:
        return f"{self.model} · {self.line} · {self.channel}"


@dataclass(frozen=True)
class MoveResult:
    record: ChannelRecord
    changed: bool  # False: the channel already pointed there, nothing was written
    created: bool = False


def requires_approval(channel: str) -> bool:
    return channel in settings.current().approval_channels


def mover() -> str:
    """Who moves, when the caller does not say: the local user at this host."""
    try:
        user = getpass.getuser()
    except (KeyError, OSError):
        user = "unknown"
    return f"{user}@{socket.gethostname()}"


def now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


# -- reading ------------------------------------------------------------------------------------------
def read(store: ArtifactStore, ref: ChannelRef) -> tuple[ChannelRecord | None, str]:
    """The channel and its store version (one GET); (None, "") for a channel never moved."""
    try:
        raw, version = store.read_versioned(ref.record_key)
    except NotFound:
        return None, ""
    return ChannelRecord.from_bytes(raw, store.uri(ref.record_key)), version


def get(store: ArtifactStore, ref: ChannelRef) -> ChannelRecord:
    record, _ = read(store, ref)
    if record is None:
        raise InvalidInput(
            f"no channel {ref} in {store.root_uri}; `neuronforge channels {ref.model}` lists its channels"
        )
    return record


def channels_of(store: ArtifactStore, model: str | None = None) -> list[ChannelRecord]:
    """The channels of one model (one listing of its `channels/` folder), or of every model (a listing
    of `channels/`, which holds a few objects per channel and nothing else). An unreadable record is
    a `RecordError` naming it."""
    prefix = layout.model_channels(ModelSource.parse(model)) if model else layout.CHANNELS
    out = []
    for obj in store.list(prefix):
        if obj.key.endswith(f"/{layout.CHANNEL_RECORD}"):
            try:
                out.append(ChannelRecord.read(store, obj.key))
            except NotFound:  # deleted between the listing and the read
                continue
    return sorted(out, key=lambda r: (r.model, r.profile_line, r.channel))


# -- what a move checks ------------------------------------------------------------------------------
def candidate(store: ArtifactStore, key: str, ref: ChannelRef) -> ChannelBuild:
    """The build `key` as a channel may point to it, or `PromotionRefused` saying why not. It is opened
    as every reader opens it (`opening.open_published`): a build found damaged is recorded so, and one
    recorded damaged by a deeper check since (`verify`'s sha256) is refused the same way."""
    short = key[:12]
    try:
        opened = open_published(store, key, by="promote")
    except RecordTooNew as exc:  # a newer neuronforge's: not damaged, not for this one to check
        raise PromotionRefused(f"build {short}: its manifest does not verify ({exc})") from None
    if opened is None:
        raise PromotionRefused(f"build {short} is not published in {store.root_uri} (no index entry)")
    found = opened.found
    if isinstance(found, Damage):
        raise PromotionRefused(
            f"build {short} is damaged ({found.reason}); recorded in the farm index: no channel takes a damaged "
            "build, run its build again to publish it afresh"
        )
    if opened.record is not None:
        raise recorded_refusal(key, opened.record)
    manifest = found.manifest
    assert manifest is not None
    built_for = model_name(manifest.source.model_dump())
    if built_for != ref.model:
        raise PromotionRefused(f"build {short} is of {built_for}, not {ref.model}: a channel holds builds of one model")
    line = manifest.profile.name if manifest.profile is not None else ""
    if line != ref.line:
        raise PromotionRefused(
            f"build {short} was built for profile line {line or '(none)'}, channel {ref} serves {ref.line}: "
            "a deployment's stack cannot change under it"
        )
    if manifest.smoke.get("passed") is not True:
        why = str(manifest.smoke.get("reason") or "no smoke result recorded")
        raise PromotionRefused(f"build {short}: its smoke test did not pass ({why})")
    stages = manifest.hosts.get("stages")
    smoke_hosts = [s.get("hostname", "") for s in stages or [] if isinstance(s, dict) and s.get("stage") == "smoke"]
    toolchain = manifest.toolchain
    return ChannelBuild(
        key=key,
        artifact_prefix=found.prefix,
        artifact_uri=store.uri(found.prefix),
        manifest=found.manifest_key,
        manifest_sha256=found.manifest_sha256,
        target=manifest.target_slug,
        profile=manifest.profile.ref if manifest.profile is not None else "",
        smoke={
            "passed": True,
            "reason": str(manifest.smoke.get("reason") or ""),
            "host": str(smoke_hosts[-1]) if smoke_hosts else "",
            "time_to_first_token_s": manifest.smoke.get("time_to_first_token_s"),
        },
        toolchain={
            "backend": toolchain.backend,
            "backend_version": toolchain.backend_version,
            "compiler": toolchain.compiler,
            "compiler_version": toolchain.compiler_version,
        },
        published_at=manifest.published_at,
    )


def damage_refusal(store: ArtifactStore, key: str) -> PromotionRefused | None:
    """Why no channel may point at `key` because it was recorded damaged (one GET; None: it was not)."""
    marked = read_damage(store, key)
    return None if marked is None else recorded_refusal(key, marked)


def recorded_refusal(key: str, marked: DamageRecord) -> PromotionRefused:
    """The refusal of a build recorded damaged (by whoever found it, when)."""
    return PromotionRefused(
        f"build {key[:12]} is damaged ({marked.reason}; found by {marked.by} at {marked.at}): no channel takes a "
        f"damaged build; run its build again, or `neuronforge verify {key[:12]}` clears it if every file matches again"
    )


def review_refusal(store: ArtifactStore, ref: ChannelRef, key: str) -> tuple[str, PromotionRefused | None]:
    """The build's review state, and why `ref` may not take it because of it (None: it may)."""
    record = reviews.review_of(store, key)
    state = record.state if record is not None else reviews.PENDING
    if state == "rejected":
        why = record.current.reason if record is not None else ""
        return state, PromotionRefused(f"build {key[:12]} is rejected ({why}); no channel takes a rejected build")
    if requires_approval(ref.channel) and state != "approved":
        return state, PromotionRefused(
            f"channel {ref.channel} requires an approved build and {key[:12]} is {state}: "
            f"`neuronforge approve {key[:12]}` first (NEURONFORGE_APPROVAL_CHANNELS names the channels that require it)"
        )
    return state, None


def earlier_builds(record: ChannelRecord) -> list[ChannelBuild]:
    """The builds a rollback can go back to, newest first: distinct, other than the current one (what
    `--steps N` counts)."""
    current, out = record.current.build.key, []
    for move in record.history:
        if move.build.key != current and all(b.key != move.build.key for b in out):
            out.append(move.build)
    return out


# -- moving: a plan (everything read and checked), then its one write -----------------------------------
@dataclass(frozen=True)
class Plan:
    """A move as it would be made now: the channel as read (and its store version), the build it would
    point to, that build's review state, and why it may not be made (`refused`, None when it may).
    The catalog's confirmation shows a plan; `apply` makes it, compare-and-swap on `version`."""

    action: str  # promote | rollback
    ref: ChannelRef
    record: ChannelRecord | None
    version: str
    key: str  # the build the channel would point to
    build: ChannelBuild | None = None  # None: unchanged, or refused before it was read
    review: str = ""
    refused: PromotionRefused | None = None

    @property
    def before(self) -> str:
        return self.record.current.build.key if self.record is not None else ""

    @property
    def changes(self) -> bool:
        return self.key != self.before


def plan_promote(
    store: ArtifactStore, ref: ChannelRef, *, build: str | None = None, from_channel: str | None = None
) -> Plan:
    """Point `ref` at a published build: `build` (a key or its first 6+ digits) or what `from_channel`
    of the same model and line points to. A name that does not exist is `InvalidInput`; a build the
    channel may not take is the plan's `refused`."""
    if (build is None) == (from_channel is None):
        raise InvalidInput(
            "promote: give the build (--build KEY) or the channel it is in (--from CHANNEL), one of them"
        )
    if from_channel is not None:
        key = get(store, ref.sibling(from_channel)).current.build.key
    else:
        key = find_key(store, str(build))
    record, version = read(store, ref)
    plan = Plan("promote", ref, record, version, key)
    if not plan.changes:
        return plan
    try:
        built = candidate(store, key, ref)
    except PromotionRefused as exc:
        return replace(plan, refused=exc)
    state, refused = review_refusal(store, ref, key)
    return replace(plan, build=built, review=state, refused=refused or damage_refusal(store, key))


def plan_rollback(store: ArtifactStore, ref: ChannelRef, *, steps: int = 1, to: str | None = None) -> Plan:
    """Point `ref` back at a build of its own history: `to` (a key or its first 6+ digits), else the
    `steps`-th earlier build (`earlier_builds`).

    The build was verified when it was first promoted; published builds are immutable and gc keeps every
    build a channel's history names. Its manifest is not read again (a rollback is one GET of the channel,
    one of the review, one PUT): each host's resolve.sh checks the manifest against the digest the move
    recorded, at every start, and refuses to start on another one."""
    record, version = read(store, ref)
    if record is None:
        raise InvalidInput(f"no channel {ref} in {store.root_uri}: nothing to roll back")
    earlier = earlier_builds(record)
    given = (to or "").strip().lower()
    if to is not None and given and record.current.build.key.startswith(given):
        return Plan("rollback", ref, record, version, record.current.build.key)
    if to is not None:
        hits = [b for b in earlier if KEY_PREFIX.fullmatch(given) and b.key.startswith(given)]
        if len(hits) != 1:
            kept = ", ".join(b.key[:12] for b in earlier) or "none"
            raise InvalidInput(
                f"build {to!r} is {'ambiguous in' if hits else 'not in'} the history of {ref} "
                f"(builds it held: {kept}); promote a build that was never on it with `promote --build`"
            )
        target = hits[0]
    else:
        if steps < 1:
            raise InvalidInput(f"--steps {steps}: give 1 or more")
        if steps > len(earlier):
            raise InvalidInput(
                f"{ref} held {len(earlier)} other build(s) in its kept history; --steps {steps} goes further back"
            )
        target = earlier[steps - 1]
    state, refused = review_refusal(store, ref, target.key)
    refused = refused or damage_refusal(store, target.key)
    return Plan("rollback", ref, record, version, target.key, target, state, refused)


def apply(store: ArtifactStore, plan: Plan, *, by: str = "", reason: str = "") -> MoveResult:
    """Make `plan`: refused, nothing; unchanged, nothing written; else the one conditional write."""
    if plan.refused is not None:
        raise plan.refused
    if not plan.changes or plan.build is None:
        assert plan.record is not None
        return MoveResult(plan.record, changed=False)
    move = ChannelMove(
        action=plan.action,  # type: ignore[arg-type]
        build=plan.build,
        previous=plan.before,
        by=by or mover(),
        at=now(),
        reason=reason,
        review=plan.review,
    )
    return _write(store, plan.ref, plan.record, plan.version, move)


def promote(
    store: ArtifactStore,
    ref: ChannelRef,
    *,
    build: str | None = None,
    from_channel: str | None = None,
    by: str = "",
    reason: str = "",
) -> MoveResult:
    return apply(store, plan_promote(store, ref, build=build, from_channel=from_channel), by=by, reason=reason)


def rollback(
    store: ArtifactStore, ref: ChannelRef, *, steps: int = 1, to: str | None = None, by: str = "", reason: str = ""
) -> MoveResult:
    return apply(store, plan_rollback(store, ref, steps=steps, to=to), by=by, reason=reason)


def _write(
    store: ArtifactStore, ref: ChannelRef, record: ChannelRecord | None, version: str, move: ChannelMove
) -> MoveResult:
    needs = requires_approval(ref.channel)
    if record is None:
        new = ChannelRecord(
            model=ref.model, profile_line=ref.line, channel=ref.channel, requires_approval=needs, current=move
        )
        done = store.put_if_absent(new.to_bytes(), ref.record_key)
    else:
        new = record.moved(move, needs)
        done = store.replace_if_version(new.to_bytes(), ref.record_key, version)
    if not done:
        raise _moved_meanwhile(store, ref, move)
    if record is None:
        write_launch(store, ref.prefix, str(ref), move.build)
    note_channel(store, new)
    return MoveResult(new, changed=True, created=record is None)


def _moved_meanwhile(store: ArtifactStore, ref: ChannelRef, move: ChannelMove) -> NeuronforgeError:
    try:
        winner, _ = read(store, ref)
    except StoreError:
        winner = None
    if winner is None:
        return ChannelMoved(f"{ref} changed while this move ran; nothing was written: run it again")
    w = winner.current
    return ChannelMoved(
        f"{ref} was moved by {w.by or 'someone'} at {w.at} ({w.action} to {w.build.key[:12]}) while this move "
        f"to {move.build.key[:12]} ran; nothing was written: see `neuronforge history`, and move again if still wanted"
    )


def pointing_to(store: ArtifactStore, key: str, manifest: ArtifactManifest | None = None) -> list[str]:
    """The channels that point to the build `key` now (its model's channels only: one listing). The
    build's manifest names the model; a caller that holds it passes it (else it is read)."""
    if manifest is None:
        try:
            index = IndexEntry.read(store, layout.index_entry(key))
            manifest = ArtifactManifest.read(store, index.manifest)
        except (NotFound, RecordError):
            return []
    model = model_name(manifest.source.model_dump())
    try:
        records = channels_of(store, model)
    except (InvalidInput, RecordError):
        return []
    return [f"{r.model} · {r.profile_line} · {r.channel}" for r in records if r.current.build.key == key]
