"""What an SDK upgrade means for each catalog target: rebuild on the newest release of its line
that still serves its instance family, stay where it is (the line is frozen for the family), or
migrate to the line that takes over (proposed, with what in the target must change and the
planner's verdict on the changed target; built only when asked).

The facts come from the release table (`neuronforge.profiles.release_table`): the lines' lifecycles
and the SDK releases neuronforge knows (`neuronforge.profiles.sdk_releases`) are derived from it; the
versions a target is already published for come from the farm index (`recompile.find_stale`). An
SDK release the data does not know yet is reported as unknown with what is known of it, never
guessed at. `neuronforge recompile` and the recompile-on-upgrade DAG both call `decide`.

A target already built on its line's newest registered release, aimed at a newer release its line
still serves but no profile version is registered for (a patch such as 2.33.1), is decided by what
changed between the two releases and what the line reads of it (`upgrade_decisions`): `nothing`,
`re-smoke` or `re-verify` keep the build (its cache key does not change), a change to what the build
reads is `unknown` until a profile version is registered for the release.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from neuronforge.common.errors import InvalidInput
from neuronforge.farm import upgrade_decisions
from neuronforge.profiles import registry, release_table
from neuronforge.profiles.lifecycle import Lifecycle, Status, release_key, series
from neuronforge.profiles.sdk_releases import known_release, latest_release

if TYPE_CHECKING:
    from neuronforge.spec.modelconfig import ModelArch
    from neuronforge.spec.target import TargetSpec

# What the upgrade does with a target.
REBUILD, CURRENT, STAY, PINNED, UNSERVED, UNKNOWN = "rebuild", "current", "stay", "pinned", "unserved", "unknown"
# A build kept at a release its line has no profile version for: by what changed (`upgrade_decisions`).
NOTHING, RESMOKE, REVERIFY = upgrade_decisions.NOTHING, upgrade_decisions.RESMOKE, upgrade_decisions.REVERIFY
KEPT = (NOTHING, RESMOKE, REVERIFY)
# The decision as the report names it (`decision`): the action, in the words.
DECISION = {CURRENT: NOTHING, STAY: "frozen"}


@dataclass
class Migration:
    """The target as the line it should move to would build it, proposed, never built silently."""

    profile: str  # `name@version` of the line taken over to
    target: dict[str, Any]  # the trigger form's spelling of the changed target
    slug: str
    changes: list[str]  # one sentence per field that changes, and why
    verdict: str  # the planner on the changed target: "fits: …", "rejected: …" or why it was not planned
    ok: bool | None  # the planner's answer; None: not planned (the model's config.json unavailable here)


@dataclass
class Upgrade:
    """One catalog target's decision for SDK `release`."""

    release: str
    action: str  # rebuild | current | nothing | re-smoke | re-verify | stay | pinned | unserved | unknown
    line: str
    family: str
    current: str = ""  # the newest version of its line it is published for ("" none)
    rebuild_on: str = ""  # `name@version` it is (to be) built on
    status: str = ""  # the line's status for the family at `release` (`lifecycle.Status`)
    then: str = ""  # what follows that build: "frozen" (no newer release serves the family), re-smoke, re-verify
    migration: Migration | None = None
    sources: list[str] = field(default_factory=list)
    sentence: str = ""
    # nothing | re-smoke | re-verify | rebuild | migrate | frozen | pinned | unserved | unknown
    decision: str = ""
    base: str = ""  # the release the package changes were read from (the build's), "" none compared
    packages: list[str] = field(default_factory=list)  # the changes that decided it ("name old -> new")
    changed: dict[str, list[str]] = field(default_factory=dict)  # every change, by the line's role
    unverified: list[str] = field(default_factory=list)  # the readings the decision rests on that are not facts
    # re-verify, once the consumer's re-trace ran at `release` (`reverified`): the published keys it found
    # and the ones it missed (then the decision is `rebuild`), and the build whose keys they are
    keys_found: list[str] = field(default_factory=list)
    keys_missing: list[str] = field(default_factory=list)
    reverified_key: str = ""

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Upgrade:
        data = dict(data)
        m = data.pop("migration", None)
        return cls(**data, migration=Migration(**m) if m else None)


def reverified(up: Upgrade, key: str, found: list[str], missing: list[str]) -> None:
    """A `re-verify` decision once the consumer's re-trace ran at `up.release` on build `key` (its
    attestation: `farm.attest`): the keys found and missing kept. A key missing means R's consumer would
    compile the build's graphs: the decision is `rebuild` — which, as for a compiler change at a release
    without a profile version of the line (`_by_packages`), needs one registered for R: its image and pins,
    so that the rebuilt build's launch files name the image whose consumer computes its keys. Until then
    the build is kept, not attested at R (a channel requiring R refuses it). A consumer whose trace stops
    at its first miss names one key; the attestation's detail says more may follow."""
    up.keys_found, up.keys_missing, up.reverified_key = list(found), list(missing), key
    if not missing:
        return
    up.action, up.decision = UNKNOWN, REBUILD
    up.sentence = (
        f"the re-verify of {key[:12]} at SDK {up.release} missed {len(missing)} key(s) ({', '.join(missing)}) "
        f"and found {len(found)}: SDK {up.release}'s consumer would compile its graphs, so it is rebuilt on a "
        f"profile version of {up.line} for {up.release}; {_register(up.line, up.release)}"
    )


def _register(line: str, release: str) -> str:
    """What a rebuild at a release without a profile version of `line` waits for."""
    return (
        f"none is registered: register one (lines.{line}.profile and its image in "
        f"neuronforge/profiles/releases/{release}.toml) to rebuild; the build is kept until then"
    )


def target_release(release: str | None) -> str:
    """The SDK release an upgrade aims at: `release` as given (`2.33` or `2.33.0`), or the newest
    one neuronforge's data knows. A malformed one is `InvalidInput`."""
    if release is None or not str(release).strip():
        return latest_release().version
    from neuronforge.records.sdk_release import VERSION

    text = str(release).strip()
    if not VERSION.fullmatch(text):
        raise InvalidInput(f"SDK release {text!r}: give it as 2.33 or 2.33.0")
    return text


def decide(
    spec: TargetSpec,
    release: str,
    published_for: list[str],
    arch: ModelArch | None = None,
    no_arch: str = "",
) -> Upgrade:
    """The decision for one target (`spec` with its profile as the catalog writes it) at SDK
    `release`, given the versions of its line the target is published for (`name@version`s).
    `arch` (or why there is none, `no_arch`) is for the planner's verdict on a migration."""
    up = _decide(spec, release, published_for, arch, no_arch)
    up.decision = up.decision or DECISION.get(up.action, up.action)  # set where it differs from the action
    if up.migration is not None and up.action in (STAY, UNSERVED):
        up.decision = "migrate"
    return up


def _decide(spec: TargetSpec, release: str, published_for: list[str], arch: ModelArch | None, no_arch: str) -> Upgrade:
    line, _, pinned_version = spec.profile.partition("@")
    family = spec.instance.family
    lifecycle = registry.lifecycle_of(line)
    versions = registry.versions_of(line)
    mine = sorted(
        (r for r in published_for if r.partition("@")[0] == line), key=lambda r: release_key(r.partition("@")[2])
    )
    up = Upgrade(release=release, action=UNKNOWN, line=line, family=family, current=mine[-1] if mine else "")
    if not known_release(release):
        up.sentence = _unknown(release)
        return up
    fam = lifecycle.of(family) if lifecycle else None
    phase = fam.phase(release) if fam else None
    up.status = phase.status.value if phase else ""
    up.sources = [phase.source.cite()] if phase else []
    if pinned_version:
        # Kept where the catalog pins it; what the upgrade would do unpinned is proposed beside it
        # (the pinned build counts as what the target is published on).
        up.action, up.rebuild_on = PINNED, registry.get_profile(spec.profile).ref
        unpinned = decide(spec.model_copy(update={"profile": line}), release, [*mine, up.rebuild_on], arch, no_arch)
        up.then, up.migration = unpinned.then, unpinned.migration
        up.sentence = f"kept on {up.rebuild_on}: the catalog pins it (unpinned: {unpinned.sentence})"
        return up
    newest = registry.newest(versions, family, release)
    if newest is None:
        up.action = UNSERVED
        up.sentence = f"no registered release of {line} up to SDK {release} serves {family}"
    else:
        up.rebuild_on = newest.ref
        frozen = (fam is not None and fam.past_last(release)) or (
            phase is not None and phase.status in (Status.FROZEN, Status.END_OF_SUPPORT)
        )
        up.then = "frozen" if frozen else ""
        if up.current == newest.ref and not frozen and _newer_unregistered(newest.version, release, phase):
            _by_packages(up, line, newest.version, release)
        elif up.current == newest.ref:
            up.action = STAY if frozen else CURRENT
            up.sentence = (
                f"stays on {newest.version}: {line} is frozen for {family} (no release after "
                f"{fam.last_release if fam and fam.last_release else newest.version} serves it)"
                if frozen
                else f"up to date on {newest.ref}" + _no_release_yet(lifecycle, release)
            )
        else:
            up.action = REBUILD
            up.sentence = f"rebuild on {newest.version}" + (", then frozen" if frozen else "")
            if not frozen and _newer_unregistered(newest.version, release, phase):
                _then_by_packages(up, line, newest.version, release)
            if frozen and fam is not None and fam.last_release:
                up.sentence += f" (the last release of {line} that serves {family})"
        unregistered_last = (
            fam is not None
            and fam.last_release is not None
            and release_key(series(newest.version)) < release_key(fam.last_release) <= release_key(series(release))
        )
        if unregistered_last:
            up.sentence += (
                f"; SDK {fam.last_release}, the last release of {line} that serves {family}, is not registered "
                "in neuronforge"
            )
    if (
        fam is not None
        and fam.moves_to
        and phase is not None
        and phase.status in (Status.FROZEN, Status.END_OF_SUPPORT)
    ):
        up.migration = _migration(spec, fam.moves_to, family, release, arch, no_arch)
        if up.migration is not None:
            m = up.migration
            changes = "; ".join(m.changes) or "none beyond the profile"
            head = up.sentence if up.action != REBUILD else f"rebuild on {up.rebuild_on.partition('@')[2]}"
            if up.action == UNSERVED:
                head = "not servable on this line"
            up.sentence = f"{head} or migrate to {m.profile} (changes: {changes}; planner: {m.verdict})"
    return up


def _newer_unregistered(built_on: str, release: str, phase: Any) -> bool:
    """`release` is newer than the release the build was made on, and the line serves the family there."""
    serving = phase is not None and phase.status in (Status.ACTIVE, Status.MAINTENANCE)
    return serving and release_key(built_on) < release_key(release)


def _by_packages(up: Upgrade, line: str, built_on: str, release: str) -> None:
    """A build on `built_on` kept or not at `release`, by the package changes between the two and what
    the line reads of each (`upgrade_decisions`); a change to what the build reads needs a profile
    version registered for `release`, which is what is said."""
    d = upgrade_decisions.between(release_table.current(), line, built_on, release)
    if d is None:  # a registered version or a known release always has its entry
        up.action, up.sentence = UNKNOWN, f"SDK {built_on} or {release} is not in the release table"
        return
    up.base, up.packages, up.unverified = d.base, list(d.deciding), list(d.unverified)
    up.changed = {role: list(c) for role, c in d.changed.items()}
    if d.decision == upgrade_decisions.REBUILD:
        up.action, up.decision = UNKNOWN, REBUILD  # what the release asks; not done without a profile version
        up.sentence = (
            f"SDK {release}{d.sentence().removeprefix('what the build reads changed')} changes what {line}'s "
            f"builds read, so they are rebuilt on a profile version of {line} for it; "
            f"{_register(line, release)}"
        )
        return
    up.action = d.decision
    up.sentence = f"keeps its build on {up.rebuild_on}: {d.sentence()}"


def _then_by_packages(up: Upgrade, line: str, built_on: str, release: str) -> None:
    """After a rebuild on `built_on`, what `release` still asks of that build (`then`)."""
    after = Upgrade(release=release, action=UNKNOWN, line=line, family=up.family, rebuild_on=up.rebuild_on)
    _by_packages(after, line, built_on, release)
    up.base, up.packages, up.changed, up.unverified = after.base, after.packages, after.changed, after.unverified
    if after.action in (RESMOKE, REVERIFY):
        up.then = after.action
        up.sentence += f", then {after.action} at {release} ({'; '.join(after.packages)})"
    elif after.action == UNKNOWN:
        up.sentence += f"; {after.sentence}"


def _no_release_yet(lifecycle: Lifecycle | None, release: str) -> str:
    """` (no <line> release for SDK <series> yet)` when the line has shipped nothing for `release`."""
    if lifecycle is None or lifecycle.newest is None:
        return ""
    behind = release_key(series(lifecycle.newest)) < release_key(series(release))
    return f" (no {lifecycle.line} release for SDK {series(release)} yet)" if behind else ""


def _migration(
    spec: TargetSpec, to_line: str, family: str, release: str, arch: ModelArch | None, no_arch: str
) -> Migration | None:
    from neuronforge.farm.form_targets import form_target

    to = registry.newest(registry.versions_of(to_line), family, release)
    if to is None:
        return None
    moved, changes = to.adopt(registry.pin(spec, release))
    if arch is None:
        verdict, ok = f"not planned: {no_arch or 'the model config is unavailable here'}", None
    else:
        from neuronforge.pipeline.planner import plan

        result = plan(arch, moved)
        ok = result.ok
        verdict = _fits_line(result) if ok else "rejected: " + "; ".join(result.problems)
    return Migration(to.ref, form_target(moved), moved.slug, changes, verdict, ok)


def _fits_line(result: Any) -> str:
    memory = next((c for c in result.checks if c.name == "memory"), None)
    return memory.message if memory is not None else "fits"


def _unknown(release: str) -> str:
    from neuronforge.profiles.sdk_releases import announced

    latest = latest_release().version
    known = announced(release)
    facts = "; ".join(known.notes) if known else "nothing"
    return (
        f"SDK {release} is not in neuronforge's profile data (the newest known release is {latest}); "
        f"known of it: {facts}. Nothing is rebuilt for it: register its profiles first"
    )
