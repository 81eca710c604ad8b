"""Release channels: a named pointer per (model, serving profile line, channel) to one published build,
moved by compare-and-swap (`neuronforge.records.channel`).

    promote   point the channel at a published build (given by key, or what another channel points to)
    rollback  point it back at a build of its own history
    read      the channel as stored (one GET); a record that is not a channel's is `ChannelDamaged`
    pointer   whether the build a channel points to is still sound (what `channels` flags)

What a move checks, every time, before it writes — a promote and a rollback alike (`candidate`, then the
review and damage records; a rollback's history entry only names the build, nothing else in it is
trusted):
- the key is a key: a key given by hand is hex digits (`published.key_prefix`, refused before anything
  is read), a key a record names is a full cache key;
- the build is published and its manifest verifies (the index points at a manifest of that key whose
  files are all there at their sizes; the move records the digest of the manifest it read), and it was
  not found damaged since (`damaged/<key>.json`: a build found damaged here is recorded so, and
  refused); a rollback also refuses a manifest whose digest differs from the one the history recorded
  for that build (a published build changes only when it is published again: a promote of it pins the
  channel to it as it is now);
- its smoke test passed;
- it was built for the channel's model and profile line;
- it is not rejected, and, where the channel requires approval (`Settings.approval_channels`, by
  default `stable`), it is approved;
- where the channel requires a Neuron SDK release (`requires_release`, set by `require_release`: the
  release its fleet runs), it was built on that release or has a passing attestation for it;
- a promote to a gated channel (`gate`: `Settings.regression_gates`, by default `stable` at 5 %) that
  points to a build already: the candidate's smoke measurement and numerics against that build's
  (`artifacts.comparison`); a regression or a numerics difference refuses (`RegressionRefused`) unless the
  move accepts it with a reason (`accept_regression`), and the move keeps the comparison's sentence and
  the reason in the history. A comparison that is not possible (other hosts, no measurement) refuses
  nothing: its sentence is kept. A rollback is not compared: it goes back to what the channel served.
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
from http import HTTPStatus

from neuronforge.artifacts import attestations, layout, reviews
from neuronforge.artifacts.channel_launch import write_launch
from neuronforge.artifacts.comparison import DEFAULT_SLOWER_PCT, Comparison, RegressionPolicy, compare
from neuronforge.artifacts.farm_index.damage import read_damage
from neuronforge.artifacts.farm_index.notes import note_channel
from neuronforge.artifacts.opening import open_published
from neuronforge.artifacts.published import CACHE_KEY, Damage, find_key, key_prefix
from neuronforge.common import advice, settings
from neuronforge.common.errors import ExitCode, InvalidInput, NeuronforgeError, StoreError
from neuronforge.records.artifact_manifest import ArtifactManifest
from neuronforge.records.base import RecordError, RecordTooNew
from neuronforge.records.channel import ChannelBuild, ChannelMove, ChannelRecord, ChannelSmoke
from neuronforge.records.damage import DamageRecord
from neuronforge.records.index_entry import IndexEntry
from neuronforge.records.smoke import SmokeRecord
from neuronforge.spec.source import ModelSource, model_name
from neuronforge.stores import ArtifactStore, NotAFile, NotFound

CHANNEL_NAME = re.compile(r"[a-z0-9][a-z0-9._-]{0,62}")
PROFILE_LINE = re.compile(r"[a-z0-9][a-z0-9._-]{0,62}")


class PromotionRefused(NeuronforgeError):
    """The build may not go to the channel: unpublished, unverified, smoke failed, another model or
    profile line, rejected, or not approved where the channel requires it."""

    exit_code = ExitCode.REJECTED
    prefix = "refused: "


class RegressionRefused(PromotionRefused):
    """The build is slower than the one the gated channel serves beyond its threshold and the noise, or
    its numerics differ (`artifacts.comparison`), and the move did not accept it."""


class ChannelDamaged(RecordError):
    """A channel's record is not a release channel record (a folder, another kind of file, the record of
    another channel, not JSON): nothing is moved onto or from it until it is moved away or restored."""

    exit_code = ExitCode.REJECTED
    prefix = "damaged: "
    http_status = HTTPStatus.SERVICE_UNAVAILABLE  # a record the store holds is damaged: the store's problem


class ChannelMoved(NeuronforgeError):
    """Another mover wrote the channel between our read and our write: nothing of ours was written."""

    exit_code = ExitCode.FAILURE
    http_status = HTTPStatus.CONFLICT  # a lost compare-and-swap


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


def gate(channel: str) -> RegressionPolicy | None:
    """What `channel` refuses a promotion past (None: it is not gated): its threshold from
    `Settings.regression_gates`, the numerics tolerance from `Settings.numerics_tolerance`."""
    found = settings.current()
    slower = found.regression_gate(channel)
    return None if slower is None else RegressionPolicy(slower_pct=slower, logit_tolerance=found.numerics_tolerance)


def judging(channel: str | None = None) -> RegressionPolicy:
    """The policy a comparison judges by: `channel`'s gate, else the default threshold with the
    configured numerics tolerance (`neuronforge compare` of two builds, an ungated channel)."""
    policy = gate(channel) if channel else None
    tolerance = settings.current().numerics_tolerance
    return policy or RegressionPolicy(slower_pct=DEFAULT_SLOWER_PCT, logit_tolerance=tolerance)


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
    """The channel and its store version (one GET); (None, "") for a channel never moved. A record
    that is not this channel's (`ChannelDamaged`) is one line naming it: a folder where the record
    belongs (one listing, paid only when the GET found nothing: a new channel's first move), a file
    that does not read as a channel record, the record of another channel."""
    key = ref.record_key
    try:
        raw, version = store.read_capped(key, ChannelRecord.MAX_BYTES)  # the bounds of every record
        record = ChannelRecord.from_bytes(raw, store.uri(key))
    except NotAFile:  # a file store's folder where the record belongs
        raise _not_a_channel(store, key, "it is a folder") from None
    except NotFound:
        if store.list_page(key, limit=1):  # `channel.json/...`: a folder (on S3, keys under the key)
            raise _not_a_channel(store, key, "it is a folder") from None
        return None, ""
    except RecordTooNew:  # a newer neuronforge's: upgrade this host, the record is not damaged
        raise
    except RecordError as exc:
        raise _not_a_channel(store, key, _why(store, key, exc)) from None
    return _named(store, key, record, ref), version


def _named(store: ArtifactStore, key: str, record: ChannelRecord, ref: ChannelRef | None = None) -> ChannelRecord:
    """`record`, read at `key`, if it names the channel whose place `key` is (and `ref`, when given): a
    record copied from another channel would move that one's deployments' history onto this one."""
    try:
        belongs = layout.channel_record(ModelSource.parse(record.model), record.profile_line, record.channel)
    except InvalidInput:
        belongs = ""
    if ref is not None and (record.model, record.profile_line, record.channel) != (ref.model, ref.line, ref.channel):
        belongs = ""
    if belongs != key:
        named = f"{record.model} · {record.profile_line} · {record.channel}"
        raise _not_a_channel(store, key, f"it is the record of {named[:200]!r}")
    return record


def _why(store: ArtifactStore, key: str, exc: RecordError) -> str:
    return str(exc).removeprefix(f"{store.uri(key)}: ")


def _not_a_channel(store: ArtifactStore, key: str, why: str) -> ChannelDamaged:
    return ChannelDamaged(
        f"{store.uri(key)} is not a release channel record ({why}): move it away, or restore the channel's "
        "record from a copy; a promote then starts the channel afresh"
    )


def get(store: ArtifactStore, ref: ChannelRef) -> ChannelRecord:
    record, _ = read(store, ref)
    if record is None:
        listed = advice.command("channels", ref.model, store=store.root_uri)
        raise InvalidInput(f"no channel {ref} in {store.root_uri}; {listed} lists its channels")
    return record


@dataclass(frozen=True)
class ChannelListing:
    """The channels one listing found: each record that reads as its channel's, and, for each place
    that holds something else (a folder, a file that is not a channel record, another channel's
    record), its `ChannelDamaged` — so one damaged record costs its own row, never the others'."""

    records: list[ChannelRecord]
    damaged: list[ChannelDamaged]


def listing(store: ArtifactStore, model: str | None = None) -> ChannelListing:
    """The channels of one model (one listing of its `channels/` folder), or of every model (a listing
    of `channels/`, which holds a few objects per channel and nothing else), and the records among them
    that are not a channel's (`ChannelListing.damaged`). A newer neuronforge's record is `RecordTooNew`."""
    prefix = layout.model_channels(ModelSource.parse(model)) if model else layout.CHANNELS
    out: list[ChannelRecord] = []
    damaged: dict[str, ChannelDamaged] = {}
    record_name = f"/{layout.CHANNEL_RECORD}"
    for obj in store.list(prefix):
        if f"{record_name}/" in obj.key:  # `.../channel.json/x`: a folder where a record belongs
            folder = obj.key[: obj.key.index(f"{record_name}/") + len(record_name)]
            damaged.setdefault(folder, _not_a_channel(store, folder, "it is a folder"))
            continue
        if not obj.key.endswith(record_name):
            continue  # the channel's launch files
        try:
            out.append(_named(store, obj.key, ChannelRecord.read(store, obj.key)))
        except NotFound:  # deleted between the listing and the read
            continue
        except RecordTooNew:
            raise
        except ChannelDamaged as exc:
            damaged[obj.key] = exc
        except RecordError as exc:
            damaged[obj.key] = _not_a_channel(store, obj.key, _why(store, obj.key, exc))
    ordered = sorted(out, key=lambda r: (r.model, r.profile_line, r.channel))
    return ChannelListing(ordered, [damaged[k] for k in sorted(damaged)])


def channels_of(store: ArtifactStore, model: str | None = None) -> list[ChannelRecord]:
    """`listing`'s records, for a caller that needs every channel: a record that is not a channel's is
    `ChannelDamaged` naming it (the first, in key order)."""
    found = listing(store, model)
    if found.damaged:
        raise found.damaged[0]
    return found.records


# -- what a move checks ------------------------------------------------------------------------------
def candidate(store: ArtifactStore, key: str, ref: ChannelRef, *, by: str = "promote") -> ChannelBuild:
    """The build `key` as a channel may point to it, or `PromotionRefused` saying why not
    (`candidate_and_smoke`, which every move calls)."""
    return candidate_and_smoke(store, key, ref, by=by)[0]


def candidate_and_smoke(
    store: ArtifactStore, key: str, ref: ChannelRef, *, by: str
) -> tuple[ChannelBuild, SmokeRecord]:
    """The build `key` as a channel may point to it, and its smoke result (what the gate compares), or
    `PromotionRefused` saying why not. It is opened
    as every reader opens it (`opening.open_published`): a build found damaged is recorded so, and one
    recorded damaged by a deeper check since (`verify`'s sha256) is refused the same way. `key` may come
    from a record anyone who can write the store could have edited (a channel's history): it is checked
    as a key before it names any path. Damage found here is recorded as found by `by`."""
    if not CACHE_KEY.fullmatch(key):
        raise PromotionRefused(
            f"{key[:80]!r} is not a cache key (64 hex digits): the channel record that names it was edited; "
            "promote a published build with `promote --build`"
        )
    short = key[:12]
    try:
        opened = open_published(store, key, by=by)
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
        raise recorded_refusal(store, key, opened.record)
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
    if manifest.smoke.passed is not True:
        why = manifest.smoke.reason or "no smoke result recorded"
        raise PromotionRefused(f"build {short}: its smoke test did not pass ({why})")
    smoke_hosts = manifest.hosts.hostnames("smoke")
    toolchain = manifest.toolchain
    built = ChannelBuild(
        key=key,
        artifact_prefix=found.prefix,
        artifact_uri=store.uri(found.prefix),
        manifest=found.manifest_key,
        manifest_sha256=found.manifest_sha256,
        target=manifest.target_slug,
        profile=manifest.profile.ref if manifest.profile is not None else "",
        smoke=ChannelSmoke(
            passed=True,
            reason=manifest.smoke.reason,
            host=str(smoke_hosts[-1]) if smoke_hosts else "",
            time_to_first_token_s=manifest.smoke.time_to_first_token_s,
        ),
        toolchain={
            "backend": toolchain.backend,
            "backend_version": toolchain.backend_version,
            "compiler": toolchain.compiler,
            "compiler_version": toolchain.compiler_version,
        },
        published_at=manifest.published_at,
        sdk_release=manifest.profile.sdk_release if manifest.profile is not None else "",
    )
    return built, manifest.smoke


def damage_refusal(store: ArtifactStore, key: str) -> PromotionRefused | None:
    """Why no channel may point at `key` because it was recorded damaged (one GET; None: it was not)."""
    marked = read_damage(store, key)
    return None if marked is None else recorded_refusal(store, key, marked)


def recorded_refusal(store: ArtifactStore, key: str, marked: DamageRecord) -> PromotionRefused:
    """The refusal of a build recorded damaged (by whoever found it, when)."""
    verify = advice.command("verify", key[:12], store=store.root_uri)
    return PromotionRefused(
        f"build {key[:12]} is damaged ({marked.reason}; found by {marked.by} at {marked.at}): no channel takes a "
        f"damaged build; run its build again, or {verify} clears it if every file matches again"
    )


def review_refusal(store: ArtifactStore, ref: ChannelRef, key: str) -> tuple[str, PromotionRefused | None]:
    """The build's review state, and why `ref` may not take it because of it (None: it may)."""
    record = reviews.review_of(store, key)
    state = record.state if record is not None else reviews.PENDING
    if state == "rejected":
        why = record.current.reason if record is not None else ""
        return state, PromotionRefused(f"build {key[:12]} is rejected ({why}); no channel takes a rejected build")
    if requires_approval(ref.channel) and state != "approved":
        approve = advice.command("approve", key[:12], store=store.root_uri)
        return state, PromotionRefused(
            f"channel {ref.channel} requires an approved build and {key[:12]} is {state}: "
            f"{approve} first (NEURONFORGE_APPROVAL_CHANNELS names the channels that require it)"
        )
    return state, None


def release_refusal(
    store: ArtifactStore, ref: ChannelRef, record: ChannelRecord | None, build: ChannelBuild
) -> PromotionRefused | None:
    """Why `ref` may not take `build` because its fleet runs another Neuron SDK release than the build was
    built on and the build has no passing attestation for it (one GET; None: it may, or none is required)."""
    release = record.requires_release if record is not None else ""
    if not release or attestations.attested_for(store, build.key, release, build.sdk_release):
        return None
    short = build.key[:12]
    attest = advice.command("attest", short, sdk=release, store=store.root_uri)
    return PromotionRefused(
        f"channel {ref.channel} requires a build attested for Neuron SDK {release} and {short} (built on "
        f"{build.sdk_release or 'an unrecorded release'}) is not: {attest} "
        "proves it there without compiling (a smoke test, or its consumer's re-trace)"
    )


def earlier_builds(record: ChannelRecord) -> list[ChannelBuild]:
    """The builds a rollback can go back to, newest first: distinct, other than the current one (what
    `--steps N` counts)."""
    current, out = record.current.build.key, []
    for move in record.history:
        if move.build.key != current and all(b.key != move.build.key for b in out):
            out.append(move.build)
    return out


# -- what a channel points to now ---------------------------------------------------------------------
@dataclass(frozen=True)
class Pointer:
    """The build a channel points to, as it is now: `ok`; `damaged` (its damage record: what a reader
    found, when, by whom); or `unreadable` (a move onto it would be refused now: not published any more,
    its manifest gone, unreadable or changed since the move, ...). `reason` says which, in one line."""

    state: str  # ok | damaged | unreadable
    reason: str = ""
    damage: DamageRecord | None = None
    advice: str = ""  # what to run besides moving the channel away ("" when that is all there is)

    def to_json(self) -> dict[str, object]:
        """As `channels --json` shows it beside each channel: `pointer` (its state and why) and `damage`
        (the damage record's reason, time and finder, or null)."""
        found = self.damage
        damage = None if found is None else {"reason": found.reason, "at": found.at, "by": found.by}
        return {"pointer": {"state": self.state, "reason": self.reason}, "damage": damage}


def pointer(store: ArtifactStore, record: ChannelRecord, by: str = "channels") -> Pointer:
    """Whether `record`'s build is still one the channel may point to, checked as a move checks it: its
    damage record (one GET); then, none recorded, `candidate` (its index entry, manifest and one listing
    of its folder: damage found there is recorded, as found by `by`) and the manifest's digest against
    the one the move recorded (what every host's resolve.sh compares at its start). The review state is
    the caller's to show. Never a scan: these reads per channel shown."""
    key = record.current.build.key
    marked = read_damage(store, key)
    if marked is not None:
        return Pointer("damaged", marked.reason, marked)
    try:
        ref = ChannelRef.parse(record.model, record.profile_line, record.channel)
        built = candidate(store, key, ref, by=by)
    except (InvalidInput, PromotionRefused) as exc:
        marked = read_damage(store, key)  # what `candidate` found damaged, it recorded
        if marked is not None:
            return Pointer("damaged", marked.reason, marked)
        return Pointer("unreadable", str(exc))
    recorded = record.current.build.manifest_sha256
    if built.manifest_sha256 != recorded:
        return Pointer(
            "unreadable",
            f"its manifest changed since the channel moved to it (sha256 {recorded[:12]!r} recorded, now "
            f"{built.manifest_sha256[:12]}): hosts refuse to start from it",
            advice=repin_advice(store, ref, key),
        )
    return Pointer("ok")


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
    # a promote of the build the channel points to whose manifest is not the one the channel recorded (the
    # build was published again since, e.g. rebuilt after damage): the move pins the channel to it as it is
    repin: bool = False
    # a promote to a gated channel that points to another build: the candidate against that build (`gate`)
    comparison: Comparison | None = None
    accept_regression: str = ""  # the reason given to promote past a regression ("" none given)

    @property
    def accepted(self) -> str:
        """The reason the move records for promoting past a refusing comparison ("" when none refused)."""
        refusing = self.comparison is not None and self.comparison.refuses
        return self.accept_regression if refusing else ""

    @property
    def before(self) -> str:
        return self.record.current.build.key if self.record is not None else ""

    @property
    def changes(self) -> bool:
        return self.key != self.before or self.repin


def plan_promote(
    store: ArtifactStore,
    ref: ChannelRef,
    *,
    build: str | None = None,
    from_channel: str | None = None,
    accept_regression: str = "",
) -> Plan:
    """Point `ref` at a published build: `build` (a key or its first 6+ digits) or what `from_channel`
    of the same model and line points to. A name that does not exist is `InvalidInput`; a build the
    channel may not take is the plan's `refused` — a regression against the build a gated channel
    serves too, unless `accept_regression` gives the reason to take it."""
    if (build is None) == (from_channel is None):
        raise InvalidInput(
            "promote: give the build (--build KEY) or the channel it is in (--from CHANNEL), one of them"
        )
    if from_channel is not None:
        key = get(store, ref.sibling(from_channel)).current.build.key
    else:
        key = find_key(store, str(build))
    record, version = read(store, ref)
    return _checked(store, Plan("promote", ref, record, version, key, accept_regression=accept_regression.strip()))


def plan_rollback(store: ArtifactStore, ref: ChannelRef, *, steps: int = 1, to: str | None = None) -> Plan:
    """Point `ref` back at a build of its own history: `to` (a key or its first 6+ digits; an empty or
    malformed one is `InvalidInput` before anything is read), else the `steps`-th earlier build
    (`earlier_builds`).

    The history only names the build. Anyone who can write the store can edit a history entry, so
    nothing else in it is trusted: the build is checked now exactly as a promote checks it (`_checked`),
    and the move records what was read now. What the history recorded serves only to refuse: a
    manifest whose digest differs from the one recorded when the channel held the build (builds are
    immutable) is refused, never taken."""
    given = key_prefix(to, "--build") if to is not None else ""
    if to is None and steps < 1:
        raise InvalidInput(f"--steps {steps}: give 1 or more")
    record, version = read(store, ref)
    if record is None:
        raise InvalidInput(f"no channel {ref} in {store.root_uri}: nothing to roll back")
    earlier = earlier_builds(record)
    if given and record.current.build.key.startswith(given):
        return Plan("rollback", ref, record, version, record.current.build.key)
    if given:
        hits = [b for b in earlier if b.key.startswith(given)]
        if len(hits) != 1:
            kept = ", ".join(b.key[:12] for b in earlier) or "none"
            raise InvalidInput(
                f"build {to!r} is {'ambiguous in' if hits else 'not in'} the history of {ref} "
                f"(builds it held: {kept}); promote a build that was never on it with `promote --build`"
            )
        target = hits[0]
    else:
        if not earlier:
            raise InvalidInput(
                f"{ref} has pointed at no other build ({record.current.build.key[:12]} only): there is nothing to "
                f"roll back to; promote another build: {promote_advice(store, ref)}"
            )
        if steps > len(earlier):
            history = advice.command("history", ref.model, profile=ref.line, channel=ref.channel, store=store.root_uri)
            raise InvalidInput(
                f"{ref} held {len(earlier)} other build(s) in its kept history; --steps {steps} goes further back "
                f"than that: give --steps {len(earlier)} at most, or --build KEY of a build {history} lists"
            )
        target = earlier[steps - 1]
    return _checked(store, Plan("rollback", ref, record, version, target.key), recorded=target)


def _checked(store: ArtifactStore, plan: Plan, recorded: ChannelBuild | None = None) -> Plan:
    """`plan` with the build it would point to read and checked, the same for every move: `candidate`
    (published, its manifest of that key with every file at its size, smoke passed, this model and
    line), the digest the history `recorded` for it (a rollback), its review state, its damage record.
    A rollback to where the channel is reads nothing; a promote of it is checked too, and is a move
    (`repin`) only when the build's manifest is no longer the one the channel recorded."""
    if not plan.changes and plan.action != "promote":
        return plan
    try:
        built, smoke = candidate_and_smoke(store, plan.key, plan.ref, by=plan.action)
    except PromotionRefused as exc:
        return replace(plan, refused=exc)
    if not plan.changes:
        assert plan.record is not None
        if plan.record.current.build.manifest_sha256 == built.manifest_sha256:
            return plan
        plan = replace(plan, repin=True)
    if recorded is not None and recorded.manifest_sha256 != built.manifest_sha256:
        return replace(
            plan,
            refused=PromotionRefused(
                f"build {plan.key[:12]}'s manifest is not the one {plan.ref}'s history recorded for it (sha256 "
                f"{recorded.manifest_sha256[:12]!r}, now {built.manifest_sha256[:12]}): a published build never "
                f"changes unless it is published again, so it was, or the history was edited; not rolled back: "
                f"{repin_advice(store, plan.ref, plan.key, 'moves the channel to it')}"
            ),
        )
    state, refused = review_refusal(store, plan.ref, plan.key)
    refused = refused or damage_refusal(store, plan.key) or release_refusal(store, plan.ref, plan.record, built)
    plan = replace(plan, build=built, review=state, comparison=_gated(store, plan, smoke))
    return replace(plan, refused=refused or regression_refusal(store, plan))


def _gated(store: ArtifactStore, plan: Plan, smoke: SmokeRecord) -> Comparison | None:
    """A promote to a gated channel of another build than the one it serves: the candidate (`smoke`)
    against that build, under the channel's gate (None: not gated, a first move, a rollback, a repin).
    The served build is opened as every reader opens it; one that does not open is not compared."""
    policy = gate(plan.ref.channel)
    if plan.action != "promote" or policy is None or plan.record is None or plan.key == plan.before:
        return None
    base, served = plan.before, None
    if CACHE_KEY.fullmatch(base):
        try:
            opened = open_published(store, base, by=plan.action)
        except RecordTooNew:
            opened = None
        if opened is not None and not opened.damaged and opened.manifest is not None:
            served = opened.manifest.smoke
    if served is None:
        show = advice.command("show", base[:12], store=store.root_uri)
        why = f"the build the channel serves, {base[:12]}, does not open ({show} says why)"
        return Comparison(base, plan.key, False, why, policy=policy)
    return compare(served, smoke, base_key=base, candidate_key=plan.key, policy=policy)


def regression_refusal(store: ArtifactStore, plan: Plan) -> RegressionRefused | None:
    """Why the plan's comparison refuses the move: a regression or a numerics difference under the
    channel's gate, with its numbers, in one line (None: it does not, or the move accepts it). It names
    the comparison under the channel's own gate (`compare --channel`: what refused, figure by figure)."""
    found = plan.comparison
    if found is None or not found.refuses or plan.accept_regression:
        return None
    ref, short = plan.ref, found.candidate_key[:12]
    where = {"profile": ref.line, "channel": ref.channel, "build": short}
    compare_it = advice.command("compare", ref.model, **where, store=store.root_uri)
    accept = advice.command("promote", ref.model, **where, accept_regression="REASON", store=store.root_uri)
    return RegressionRefused(
        f"channel {ref.channel} is gated ({found.policy.describe()}): {found.summary()}; {compare_it} shows every "
        f"figure; {accept} promotes it anyway, REASON (why) kept in the channel's history"
    )


def promote_advice(store: ArtifactStore, ref: ChannelRef, key: str = "") -> str:
    """The promote of `key` to `ref`, as a message suggests it; without a key, the placeholder KEY and
    the listing of the builds it may be (which build to go to is the user's choice, never a guess)."""
    uri = store.root_uri
    promote = advice.command("promote", ref.model, profile=ref.line, channel=ref.channel, build=key or "KEY", store=uri)
    if key:
        return promote
    return f"{promote} (KEY: a build {advice.command('ls', model=ref.model, profile=ref.line, store=uri)} lists)"


def repin_advice(store: ArtifactStore, ref: ChannelRef, key: str, does: str = "pins the channel to it") -> str:
    """What to run for a build whose manifest is not the one a channel recorded: check the build, then
    promote it, which records its manifest as it is now."""
    short = key[:12]
    verify = advice.command("verify", short, store=store.root_uri)
    return f"{verify} checks the build, then {promote_advice(store, ref, short)} {does} as it is now"


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
        accepted_regression=plan.accepted,
        comparison=plan.comparison.summary() if plan.comparison is not None else "",
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
    accept_regression: str = "",
) -> MoveResult:
    found = plan_promote(store, ref, build=build, from_channel=from_channel, accept_regression=accept_regression)
    return apply(store, found, by=by, reason=reason)


def rollback(
    store: ArtifactStore, ref: ChannelRef, *, steps: int = 1, to: str | None = None, by: str = "", reason: str = ""
) -> MoveResult:
    return apply(store, plan_rollback(store, ref, steps=steps, to=to), by=by, reason=reason)


def require_release(store: ArtifactStore, ref: ChannelRef, release: str) -> tuple[ChannelRecord, bool]:
    """Record that `ref`'s fleet runs Neuron SDK `release` ("": none required), by compare-and-swap on the
    channel as read (a channel that was never moved has nothing to require it of); and whether the build
    it points to now is built on it or attested for it (a caller warns when not: the channel is not
    moved, the next move is checked)."""
    if release and not re.fullmatch(r"[0-9]+(\.[0-9]+){1,3}", release):
        raise InvalidInput(f"release {release!r}: give a Neuron SDK release such as 2.33.1 (or none)")
    record, version = read(store, ref)
    if record is None:
        raise InvalidInput(f"no channel {ref} in {store.root_uri}: promote a build to it first")
    new = record.model_copy(update={"requires_release": release})
    changed = new.requires_release != record.requires_release
    if changed and not store.replace_if_version(new.to_bytes(), ref.record_key, version):
        raise ChannelMoved(f"{ref} changed while its release was set; nothing was written: run it again")
    build = new.current.build
    return new, attestations.attested_for(store, build.key, release, build.sdk_release) if release else True


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
        raise _moved_meanwhile(store, ref, move, created=record is None)
    if record is None:
        write_launch(store, ref.prefix, str(ref), move.build)
    note_channel(store, new)
    return MoveResult(new, changed=True, created=record is None)


def _moved_meanwhile(store: ArtifactStore, ref: ChannelRef, move: ChannelMove, created: bool) -> NeuronforgeError:
    """Why the conditional write failed: another mover's write (named); or, when a create was refused
    and yet no record reads there (no channel is ever deleted: the place holds something that is not a
    record, an empty folder on a file store), `ChannelDamaged` — running the move again cannot change it."""
    try:
        winner, _ = read(store, ref)
    except ChannelDamaged as exc:
        return exc
    except StoreError:
        return ChannelMoved(f"{ref} changed while this move ran; nothing was written: run it again")
    if winner is None and created:
        return _not_a_channel(store, ref.record_key, "it is not a file: a folder?")
    if winner is None:
        return ChannelMoved(f"{ref} changed while this move ran; nothing was written: run it again")
    w = winner.current
    history = advice.command("history", ref.model, profile=ref.line, channel=ref.channel, store=store.root_uri)
    return ChannelMoved(
        f"{ref} was moved by {w.by or 'someone'} at {w.at} ({w.action} to {w.build.key[:12]}) while this move "
        f"to {move.build.key[:12]} ran; nothing was written: see {history}, and move again if still wanted"
    )


def pointing_to(store: ArtifactStore, key: str, manifest: ArtifactManifest | None = None) -> list[str]:
    """The channels that point to the build `key` now, named (`records_pointing_to`)."""
    return [f"{r.model} · {r.profile_line} · {r.channel}" for r in records_pointing_to(store, key, manifest)]


def records_pointing_to(
    store: ArtifactStore, key: str, manifest: ArtifactManifest | None = None
) -> list[ChannelRecord]:
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
        records = listing(store, model).records  # a damaged record points nowhere: the others still count
    except (InvalidInput, RecordError):
        return []
    return [r for r in records if r.current.build.key == key]
