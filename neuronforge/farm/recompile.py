"""Keeping the catalog compiled across Neuron SDK upgrades, in serving profiles: the stale set, the
runs that rebuild it, and the report of what happened.

A new Neuron SDK release is a new version of a serving profile (`vllm-neuron@2.27.0`): its pins
name the release's toolchain and its toolchain stages go to that release's queues
(`neuron-compile-2.27.0`, where its toolchain is detected and compiles; `neuron-2.27.0` for the
smoke test). A catalog target names a profile; a bare name resolves to the newest registered
version, so registering a version makes the target's cache key change (the profile and its pins are
in the key) and nothing is published under the new key: the target is *stale* for that version
until it is rebuilt. `name@version` keeps a target on one version.

`find_stale` computes, for every catalog entry × target, its key for the profile version it
resolves to, with the toolchain the workers of that version's queue reported, and whether a
complete manifest exists for it. The key needs a worker's report: it hashes every package version
the backend records (torch, transformers, ...), which the pins do not list, so a key made from the
pins alone would match no artifact and mark everything stale. Without a report, or when the report
differs from the pins (the consumer checks those versions at load; the compile run's planner would
refuse the rebuild), the target is `unavailable` and the reason names the queue. Whatever the
workers say, the store says which profile versions each entry × target is published for
(`published_for`, from the manifests' `profile`).

`run_requests` turns the stale targets into one `neuronforge_compile_publish` run per model, each
target pinned to the profile version it is stale for (catalog order = the order the runs are
created in, which is the order the scheduler starts them in). `settle` looks in the store for how
each rebuild ended (published, failed and why, still running, not started), and `Report` renders
all of it as JSON and Markdown.

Airflow-free: the `neuronforge_recompile_on_upgrade` DAG and `neuronforge catalog stale` both call
these functions.
"""

from __future__ import annotations

import datetime
import time
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from packaging.version import InvalidVersion, Version

from neuronforge.artifacts import layout
from neuronforge.common.errors import InvalidInput, NeuronforgeError
from neuronforge.farm.catalog import CatalogEntry, CatalogReport, CatalogTarget
from neuronforge.farm.form_targets import form_target
from neuronforge.profiles import ServingProfile, get_profile, pin, registry
from neuronforge.profiles.base import neuron_host_queue
from neuronforge.profiles.release_manifest import MAX_BYTES, ManifestError, parse
from neuronforge.profiles.request import CompileRequest, cache_key
from neuronforge.records.recompile_report import RecompileReport, ReportedTarget
from neuronforge.spec.source import ModelSource
from neuronforge.spec.target import TargetSpec
from neuronforge.spec.toolchain import Toolchain
from neuronforge.stores.base import ArtifactStore, NotFound, StoreError

if TYPE_CHECKING:
    from neuronforge.farm.upgrades import Upgrade
    from neuronforge.records.attestation import Attestation

DEFAULT_QUEUE = "default"  # where the cpu profile's tasks (and its toolchain detection) run

# Status of a catalog target under the current toolchain.
FRESH, STALE, UNAVAILABLE, UNRESOLVED = "fresh", "stale", "unavailable", "unresolved"
# How a stale target's rebuild ended, as far as the store tells; WAITING: no run was triggered for it
# this time (past the run's limit, `run_requests`), the next recompile run takes it.
REBUILT, FAILED, RUNNING, QUEUED, WAITING = "rebuilt", "failed", "running", "queued", "waiting"


@dataclass
class TargetState:
    order: int  # position in the catalog (entry, then target): the rebuild priority
    source: str  # as written in the catalog
    line: int
    slug: str
    target: dict[str, Any]  # the trigger form's spelling (see `form_target`), profile as `name@version`
    status: str  # fresh | stale | unavailable | unresolved, for the profile version in `profile`
    key: str = ""
    pinned: str = ""  # the source pinned to the revision the key was computed for
    profile: str = ""  # the profile version the target resolves to now (`name@version`)
    published_for: list[str] = field(default_factory=list)  # versions of its profile with a complete artifact
    stale_for: list[str] = field(default_factory=list)  # versions it must be rebuilt for
    detail: str = ""  # fresh: the manifest URI; unavailable / unresolved: why
    run_id: str = ""  # the compile run triggered for it
    outcome: str = ""  # stale ones, after `settle`: rebuilt | failed | running | queued
    outcome_detail: str = ""  # rebuilt: manifest URI; failed: stage and error; running: lease holder
    upgrade: dict[str, Any] | None = None  # `upgrades.Upgrade` for the release aimed at (JSON)
    migrated_from: str = ""  # a migration's row: the slug and profile of the target it moves off
    speed: dict[str, Any] | None = None  # rebuilt or re-smoked: against `stable` (`speed.against_stable`)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> TargetState:
        return cls(**data)


def profiles_of(catalog: CatalogReport, release: str | None = None, migrate: bool = False) -> list[ServingProfile]:
    """The profile versions the catalog's targets are kept built for at SDK `release` (a bare name:
    the newest registered version that serves the target's family, up to `release`), plus, with
    `migrate`, the versions their migrations would be built on; in registry order."""
    refs = {pin(t.spec, release).profile for e in catalog.entries for t in e.targets}
    if migrate:
        refs |= {m.profile for _, m in migrations(catalog, release)}
    return [p for p in registry.all_profiles() if p.ref in refs]  # read at call time: the registry may grow


def migrations(catalog: CatalogReport, release: str | None) -> list[tuple[CatalogTarget, Any]]:
    """The catalog targets an upgrade to `release` proposes to migrate (their line is frozen or ends
    for their family), each with its `upgrades.Migration` (planner verdict not computed here)."""
    from neuronforge.farm import upgrades

    aim = upgrades.target_release(release)
    out = []
    for entry in catalog.entries:
        for t in entry.targets:
            decision = upgrades.decide(t.spec, aim, [])
            if decision.migration is not None:
                out.append((t, decision.migration))
    return out


def queues_of(catalog: CatalogReport, release: str | None = None, migrate: bool = False) -> list[str]:
    """The Neuron queues whose workers the catalog's profiles need (one per SDK release)."""
    return sorted({p.queue for p in profiles_of(catalog, release, migrate) if p.queue})


def queue_name(profile: ServingProfile) -> str:
    return profile.queue or DEFAULT_QUEUE


def no_worker(profile: ServingProfile, why: str = "") -> str:
    """Why a profile version has no toolchain: the sentence names the queue to start a worker on."""
    text = f"no worker of queue {queue_name(profile)!r} reported the toolchain of {profile.ref}"
    return f"{text}: {why}" if why else text


def detect_toolchains(profiles: Iterable[ServingProfile], where: str = "here") -> dict[str, Toolchain | str]:
    """Profile ref -> the toolchain its backend finds in this environment, or why it cannot be used
    (not installed, or not the profile's pins). Run where the profile's tasks run: on a worker of
    its queue (the DAG's toolchain watch), or locally (`neuronforge catalog stale`)."""
    from neuronforge.compilation.backends.child import ChildFailed

    out: dict[str, Toolchain | str] = {}
    for profile in profiles:
        try:
            toolchain = profile.detect_toolchain()
        except (InvalidInput, ChildFailed) as exc:
            out[profile.ref] = f"{profile.backend.name} is not installed {where}: {exc}"
            continue
        problems = profile.toolchain_problems(toolchain)
        out[profile.ref] = (
            f"the toolchain {where} is not the pinned one: {'; '.join(problems)}" if problems else toolchain
        )
    return out


def usable_toolchain(profile: ServingProfile, reported: Toolchain | str | None) -> Toolchain | str:
    """The toolchain the profile's keys are computed with, or why there is none. Only a worker's
    report will do (see the module's docstring: the pins do not describe every keyed version), and
    only one equal to the pins (else the rebuild would be refused by the planner)."""
    if reported is None:
        return no_worker(profile)
    if isinstance(reported, str):
        return reported
    problems = profile.toolchain_problems(reported)
    if problems:
        return f"the workers of queue {queue_name(profile)!r} do not have the pinned toolchain: {'; '.join(problems)}"
    return reported


def _resolve(entry: CatalogEntry, work_dir: Path):
    from neuronforge.pipeline.stages.resolve import resolve_source

    return resolve_source(entry.source, work_dir=work_dir)


@dataclass(frozen=True)
class PublishedBuild:
    """What one published artifact was built for, as far as the report needs it (from the farm index)."""

    revision: str
    variant: str  # `farm_index.entry.target_variant`: the target apart from its profile's version
    profile: str  # `name@version`
    key: str


def published_builds(store: ArtifactStore, models: set[str] | None = None) -> list[PublishedBuild]:
    """The published artifacts the farm index knows with a target — of `models` (their
    `ModelSource.name`s) only, reading only the index pages whose model range holds one of them
    (`PageRef.may_hold`): `catalog stale` costs the catalog's size, not the farm's."""
    from neuronforge.artifacts.farm_index import FarmIndex

    index = FarmIndex.open(store)
    if models is None:
        entries = index.all_entries()
    else:
        entries = index.window(
            match=lambda e: e.model in models,
            page_may_match=lambda ref: ref.may_hold(models),
        ).entries
    out = []
    for e in entries:
        p = e.published
        if p is not None and p.get("variant") and e.profile:
            out.append(PublishedBuild(str(p.get("revision", "")), str(p["variant"]), e.profile, e.key))
    return out


def published_for(builds: list[PublishedBuild], pinned: ModelSource, spec: TargetSpec) -> list[str]:
    """The versions of `spec`'s profile an artifact of this revision × target is published for,
    oldest first, as the farm index says (what the report shows; whether the current version is
    published is decided by `lookup`, which checks the manifest)."""
    from neuronforge.artifacts.farm_index.entry import target_variant

    name = spec.profile_name
    want = target_variant(spec)
    refs = {
        b.profile
        for b in builds
        if b.revision == pinned.resolved_revision and b.profile.partition("@")[0] == name and b.variant == want
    }
    return sorted(refs, key=_ref_order)


def _ref_order(ref: str) -> tuple[int, ...]:
    return tuple(int(x) if x.isdigit() else -1 for x in ref.partition("@")[2].split("."))


def find_stale(
    catalog: CatalogReport,
    toolchains: dict[str, Toolchain | str],
    store: ArtifactStore,
    work_dir: Path,
    release: str | None = None,
    migrate: bool = False,
) -> list[TargetState]:
    """Every catalog entry × target with the profile version it resolves to at SDK `release` (the
    newest the data knows when None), its key under `toolchains` (profile ref → the toolchain the
    workers of its queue reported, or why there is none; a missing ref is "no worker of its
    queue"), whether a complete manifest is published for it, which versions of its profile the
    store has it for, and the upgrade's decision for it (`upgrades.decide`). With `migrate`, each
    proposed migration the planner accepts is a row of its own, built like any stale target."""
    from neuronforge.farm import upgrades

    aim = upgrades.target_release(release)
    resolved: list[tuple[CatalogEntry, ModelSource | None, str]] = []
    for entry in catalog.entries:
        try:
            resolved.append((entry, _resolve(entry, work_dir), ""))
        except (NeuronforgeError, OSError) as exc:
            resolved.append((entry, None, f"cannot resolve the source: {exc}"))
    builds = published_builds(store, {p.name for _, p, _ in resolved if p is not None})
    states: list[TargetState] = []
    for entry, pinned, unresolved in resolved:
        arch: list[Any] = []  # the entry's ModelArch (or why none), read once, only for a migration's verdict
        for t in entry.targets:
            state = _state(len(states), entry, t.line, pin(t.spec, aim), pinned, unresolved, toolchains, store, builds)
            states.append(state)
            decision = upgrades.decide(t.spec, aim, state.published_for)
            if decision.migration is not None:
                if not arch:
                    arch.append(_arch_of(entry))
                model, why = arch[0]
                decision = upgrades.decide(t.spec, aim, state.published_for, model, why)
            if decision.action == upgrades.REVERIFY and state.status == FRESH:
                _missed_keys(store, state, decision)
            state.upgrade = decision.to_json()
            m = decision.migration
            if migrate and m is not None and m.ok is not False:
                moved = _state(
                    len(states), entry, t.line, registry.parse_target(m.target), pinned, unresolved, toolchains,
                    store, builds,
                )  # fmt: skip
                moved.migrated_from = f"{state.slug} {state.profile}"
                states.append(moved)
    return states


def _state(
    order: int,
    entry: CatalogEntry,
    line: int,
    spec: TargetSpec,
    pinned: ModelSource | None,
    unresolved: str,
    toolchains: dict[str, Toolchain | str],
    store: ArtifactStore,
    builds: list[PublishedBuild],
) -> TargetState:
    """One row: `spec` (pinned to a version) of `entry`, its key and whether it is published."""
    from neuronforge.artifacts.opening import lookup

    profile = get_profile(spec.profile)
    state = TargetState(order, entry.source, line, spec.slug, form_target(spec), UNRESOLVED, detail=unresolved)
    state.profile = profile.ref
    if pinned is None:
        return state
    state.pinned = str(pinned)
    state.published_for = published_for(builds, pinned, spec)
    toolchain = usable_toolchain(profile, toolchains.get(profile.ref))
    if isinstance(toolchain, str):
        state.status, state.detail = UNAVAILABLE, toolchain
        return state
    state.key = cache_key(CompileRequest(pinned, spec, profile), toolchain)
    hit = lookup(store, state.key)
    if hit is None:
        state.status, state.stale_for = STALE, [profile.ref]
    else:
        state.status, state.detail = FRESH, hit.manifest_uri
        if profile.ref not in state.published_for:  # e.g. indexed after the scan
            state.published_for = sorted({*state.published_for, profile.ref}, key=_ref_order)
    return state


def _missed_keys(store: ArtifactStore, state: TargetState, decision: Upgrade) -> None:
    """A kept build whose newest attestation at the release aimed at is a failed re-verify with keys
    missing (an earlier run's, `attest_kept`): the decision is `rebuild` with those keys named
    (`upgrades.reverified`), not re-traced again."""
    from neuronforge.farm import upgrades

    failed = failed_reverify(store, state.key, decision.release)
    if failed is None or not failed.keys_missing:
        return
    upgrades.reverified(decision, state.key, failed.keys_found, failed.keys_missing)


def failed_reverify(store: ArtifactStore, key: str, release: str) -> Attestation | None:
    """Build `key`'s newest attestation at `release`, when it is a failed re-verify."""
    from neuronforge.artifacts.attestations import attestations_of

    record = attestations_of(store, key)
    newest = next((a for a in record.attestations if a.release == release), None) if record else None
    return newest if newest is not None and newest.run == "re-verify" and not newest.passed else None


def _arch_of(entry: CatalogEntry) -> tuple[Any, str]:
    """The entry's model architecture for the planner, or None and why it is not available here."""
    from neuronforge.farm.catalog import config_for
    from neuronforge.spec.modelconfig import ModelArch

    try:
        config = config_for(entry)
        if isinstance(config, str):
            return None, f"config.json unavailable ({config})"
        return ModelArch.from_config(config, where=entry.source), ""
    except (NeuronforgeError, OSError, ValueError) as exc:
        return None, f"config.json unreadable ({exc})"


def run_requests(
    states: list[TargetState], store_uri: str, run_prefix: str, limit: int | None = None
) -> list[dict[str, Any]]:
    """One compile run per model with its stale targets, in catalog order: the arguments of a
    trigger task (`trigger_run_id`, `conf`) each. Marks the states with their run id.
    The model is given pinned to the revision the key was computed for, so the run rebuilds
    exactly what was found stale.

    At most `limit` runs (the DAG passes Airflow's `[core] max_map_length`: a mapped task of more
    items fails the run): the targets of the models past it get no run, are marked WAITING and are
    still stale for the next recompile run, which takes them first among what is left (catalog order)."""
    models: dict[str, list[TargetState]] = {}
    for s in sorted((s for s in states if rebuildable(s)), key=lambda s: s.order):
        if s.pinned in models or limit is None or len(models) < limit:
            models.setdefault(s.pinned, []).append(s)
            continue
        s.run_id, s.outcome = "", WAITING
        s.outcome_detail = (
            f"waiting for the next recompile run: this one triggered its first {limit} compile run(s), "
            "Airflow's [core] max_map_length"
        )
    width = max(2, len(str(len(models) - 1)))  # run ids sort as the catalog does: __0000 … __1023
    runs = []
    for n, (pinned, rows) in enumerate(models.items()):
        run_id = f"{run_prefix}__{n:0{width}d}"
        runs.append({"trigger_run_id": run_id, "conf": {"model": pinned, "store": store_uri, "targets": []}})
        for s in rows:
            runs[-1]["conf"]["targets"].append(s.target)
            s.run_id = run_id
    return runs


def rebuildable(s: TargetState) -> bool:
    """A stale row is rebuilt unless the upgrade could not decide it (an SDK release the profile data
    does not know: reported, never guessed at)."""
    from neuronforge.farm.upgrades import UNKNOWN

    return s.status == STALE and (s.upgrade or {}).get("action") != UNKNOWN


# A kept build's attestation at the aimed release (decision `re-smoke` or `re-verify`): passed; failed or
# could not be run; or left to a Neuron host of the release (no queue of this deployment is one, or none
# is served).
ATTESTED, NOT_ATTESTED, TO_ATTEST = "attested", "attest-failed", "to-attest"


def to_attest(s: TargetState) -> bool:
    """A kept build (published: fresh) whose upgrade decision is `re-smoke` or `re-verify`: smoked, or its
    consumer's re-trace run, at the release against the published artifact (`farm.attest`), not compiled."""
    from neuronforge.farm.upgrades import RESMOKE, REVERIFY

    return (s.upgrade or {}).get("action") in (RESMOKE, REVERIFY) and s.status == FRESH and bool(s.key)


def attest_queue(s: TargetState, release: str) -> str:
    """Where `s`'s build is smoked at `release`: the default queue for a profile that reads no Neuron SDK
    (cpu); for a Neuron profile the queue of the Neuron hosts of `release`'s image (`neuron-<release>`),
    whatever `release` is — registered with a profile, known only to the release table, or accepted from
    the feed: a worker of that image is what proves the build there, and the DAG's attest task goes to it
    (the cluster policy routes it, `neuronforge_airflow.policies.routing`)."""
    return neuron_host_queue(release) if get_profile(s.profile).neuron else DEFAULT_QUEUE


def attest_command(s: TargetState, release: str, store_uri: str) -> str:
    """The command that attests `s`'s build on a Neuron host of `release` (the recompile CLI does the
    same for every kept build of the catalog: `neuronforge recompile CATALOG --sdk R`)."""
    return f"on a Neuron host of SDK {release}: neuronforge attest {s.key[:12]} --sdk {release} --store {store_uri}"


def leave_to_attest(s: TargetState, release: str, store_uri: str, why: str) -> None:
    """Mark a kept build to attest as not attested by this run, `why`, with the command that does it."""
    s.outcome, s.outcome_detail = TO_ATTEST, f"{why}; {attest_command(s, release, store_uri)}"


def attest_plan(states: list[TargetState], release: str) -> dict[str, list[int]]:
    """Queue -> the rows (`order`) of the kept builds to attest there at `release` (`attest_queue`), in
    catalog order. Whether a worker consumes the queue is the DAG's question (`route_attests`): a build
    no worker can smoke is then marked TO_ATTEST with the command (`leave_to_attest`)."""
    out: dict[str, list[int]] = {}
    for s in sorted((s for s in states if to_attest(s)), key=lambda s: s.order):
        out.setdefault(attest_queue(s, release), []).append(s.order)
    return out


def attest_kept(store: ArtifactStore, states: list[TargetState], release: str, work_dir: Path) -> None:
    """Each kept build to attest (`to_attest`) proven at `release` here, in catalog order, without
    compiling (`farm.attest.attest_build`: its smoke test against the published artifact, the
    attestation recorded): ATTESTED or NOT_ATTESTED with the attestation's line; one that cannot be run
    is NOT_ATTESTED with why, and the next one still runs. The CLI runs it on every kept build, the
    DAG's attest task of a queue on the builds whose `attest_queue` it is. A `re-verify` whose re-trace
    missed keys turns the row's decision into `rebuild` naming them (`upgrades.reverified`)."""
    from neuronforge.farm.attest import attest_build

    for s in sorted((s for s in states if to_attest(s)), key=lambda s: s.order):
        try:
            done = attest_build(store, s.key, release, work_dir)
        except NeuronforgeError as exc:
            s.outcome, s.outcome_detail = NOT_ATTESTED, str(exc)
            continue
        a = done.attestation
        s.outcome = ATTESTED if a is None or a.passed else NOT_ATTESTED
        s.outcome_detail = done.line
        if a is not None and a.run == "re-verify":
            took_reverify(s, a.keys_found, a.keys_missing)


def took_reverify(s: TargetState, found: list[str], missing: list[str]) -> None:
    """Row `s` after its build's re-verify: the keys kept on its decision; keys missing make its decision
    `rebuild`, saying what that waits for."""
    up = _reverified_row(s, found, missing)
    if missing:
        s.outcome_detail += f"; {up.sentence}"


def _reverified_row(s: TargetState, found: list[str], missing: list[str]) -> Upgrade:
    """Row `s`'s decision with its build's re-verify result on it (`upgrades.reverified`), stored back."""
    from neuronforge.farm import upgrades

    up = upgrades.Upgrade.from_json(s.upgrade or {})
    upgrades.reverified(up, s.key, found, missing)
    s.upgrade = up.to_json()
    return up


def reverify_outcomes(store: ArtifactStore, states: list[TargetState], release: str) -> None:
    """The recompile DAG's report: each `re-verify` row its attest task did not attest gets the keys its
    attestation found and missed (the task returns only the outcome), its decision `rebuild` when keys were
    missing (waiting for a profile version of the line for the release). Its status is left as the run
    planned it (nothing was rebuilt)."""
    from neuronforge.farm import upgrades

    for s in states:
        if (s.upgrade or {}).get("action") != upgrades.REVERIFY or s.outcome != NOT_ATTESTED or not s.key:
            continue
        failed = failed_reverify(store, s.key, release)
        if failed is not None:
            _reverified_row(s, failed.keys_found, failed.keys_missing)


def settle(store: ArtifactStore, states: list[TargetState]) -> bool:
    """Fill in how each stale target's rebuild ended, from the store; True when none is still
    queued or running. A failure counts only if the run triggered for it recorded it."""
    pending = False
    for s in states:
        if s.status != STALE:
            continue
        s.outcome, s.outcome_detail = _outcome(store, s)
        pending = pending or s.outcome in (RUNNING, QUEUED)
    return not pending


def _outcome(store: ArtifactStore, s: TargetState) -> tuple[str, str]:
    """The first store fact that decides: published, its run's failure, a live lease; each read
    only when the ones before it decided nothing (the deferred wait runs this every poll)."""
    from neuronforge.artifacts import leases
    from neuronforge.artifacts.failures import read_failure
    from neuronforge.artifacts.published import lookup

    hit = lookup(store, s.key)
    if hit is not None:
        return REBUILT, hit.manifest_uri
    if s.outcome == WAITING and not s.run_id:  # not triggered this time: an older failure is not its end
        return WAITING, s.outcome_detail
    failure = read_failure(store, s.key)
    if failure is not None and (not s.run_id or failure.run_id == s.run_id):
        return FAILED, f"{failure.stage}: {failure.error}"
    lease = leases.current(store, s.key)
    if leases.held(lease):
        return RUNNING, f"lease held by {lease.holder}"
    return QUEUED, "not started yet" if s.run_id else "no run was triggered"


def _version(text: str | None) -> Version | None:
    try:
        return Version(text)
    except (InvalidVersion, TypeError):
        return None


def _public(text: str | None) -> str | None:
    """A compiler version without its local label (`2.21.33363.0+82129205` -> `2.21.33363.0`): the
    workers and the pins carry the label, the SDK's release manifest does not."""
    v = _version(text)
    return v.public if v is not None else text


def newest_compiler(toolchains: dict[str, Any]) -> str | None:
    """The newest neuronx-cc among the reported Neuron toolchains (JSON), for `sdk_release_status`."""
    found = [
        tc["compiler_version"]
        for tc in toolchains.values()
        if isinstance(tc, dict) and tc.get("compiler") == "neuronxcc" and _version(tc.get("compiler_version"))
    ]
    return max(found, key=Version) if found else None


def sdk_release_status(store: ArtifactStore, installed_compiler: str | None) -> dict[str, Any] | None:
    """Compare the workers' neuronx-cc with the newest release in a mirrored copy of the SDK's
    release manifest (aws-neuron-sdk `src/helperscripts/n2-manifest.json`, put at
    `sdk-releases/n2-manifest.json` in the store; parsed by `profiles.release_manifest`). None when no
    manifest is mirrored; a manifest that does not parse is the report's one-line problem."""
    try:
        raw, _ = store.read_capped(layout.SDK_RELEASE_MANIFEST, MAX_BYTES)
        manifest = parse(raw, store.uri(layout.SDK_RELEASE_MANIFEST))
    except (NotFound, StoreError):
        return None
    except ManifestError as exc:
        return {"problem": str(exc)}
    releases = sorted(
        (v, r.version, r.compiler) for r in manifest.releases if (v := _version(r.version)) and r.compiler
    )
    if not releases:
        return {"problem": f"{layout.SDK_RELEASE_MANIFEST} lists no release with a neuronx-cc version"}
    _, latest, latest_cc = releases[-1]
    installed = _public(installed_compiler)
    installed_release = next((name for _, name, cc in reversed(releases) if _public(cc) == installed), None)
    newer = (
        installed is not None
        and _version(latest_cc) is not None
        and _version(installed) is not None
        and _version(_public(latest_cc)) > _version(installed)
    )
    return {
        "manifest_date": manifest.date or None,
        "latest_release": latest,
        "latest_neuronx_cc": latest_cc,
        "installed_neuronx_cc": installed_compiler,
        "installed_release": installed_release,
        "newer_release_available": bool(newer),
    }


@dataclass
class Report:
    stamp: str  # YYYY-MM-DDTHH-MM-SSZ
    catalog: str
    store: str
    toolchains: dict[str, Any]  # profile ref -> the toolchain its queue's workers reported (JSON), or why none
    states: list[TargetState]
    sdk: dict[str, Any] | None = None
    runs: list[str] = field(default_factory=list)
    release: str = ""  # the SDK release the upgrade aimed at

    def counts(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for s in self.states:
            out[s.status] = out.get(s.status, 0) + 1
            if s.outcome:
                out[s.outcome] = out.get(s.outcome, 0) + 1
        return out

    def profiles(self) -> dict[str, dict[str, Any]]:
        """Every profile version the report names (targets resolve to, or are published for):
        `describe()` of the registered ones; a version no longer registered says so."""
        refs = {s.profile for s in self.states if s.profile} | {r for s in self.states for r in s.published_for}
        out: dict[str, dict[str, Any]] = {}
        for ref in sorted(refs):
            try:
                out[ref] = {**get_profile(ref).describe(), "registered": True}
            except InvalidInput:
                out[ref] = {"ref": ref, "registered": False}
        return out

    def record(self) -> RecompileReport:
        """The report as stored (`recompile/<stamp>.json`)."""
        return RecompileReport(
            stamp=self.stamp,
            release=self.release,
            generated_at=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            catalog=self.catalog,
            store=self.store,
            profiles=self.profiles(),
            toolchains=self.toolchains,
            sdk_release=self.sdk,
            runs=self.runs,
            counts=self.counts(),
            targets=[ReportedTarget(**s.to_json()) for s in self.states],
        )

    def to_json(self) -> dict[str, Any]:
        return self.record().to_json()

    def to_markdown(self) -> str:
        c = self.counts()
        lines = [
            f"# neuronforge recompile {self.stamp}",
            "",
            f"Catalog `{self.catalog}`, store `{self.store}`.",
            "",
            f"**{c.get(STALE, 0)} stale** (rebuilt {c.get(REBUILT, 0)}, failed {c.get(FAILED, 0)}, "
            f"running {c.get(RUNNING, 0)}, not started {c.get(QUEUED, 0)}, waiting for the next run "
            f"{c.get(WAITING, 0)}), {c.get(FRESH, 0)} fresh, "
            f"{c.get(UNAVAILABLE, 0)} without a toolchain, {c.get(UNRESOLVED, 0)} unresolvable; "
            f"{len(self.runs)} compile run(s) triggered.",
            "",
            *([summary_line(self.release, self.states), ""] if self.release else []),
            "## Profile versions and their workers' toolchains",
            "",
        ]
        profiles = self.profiles()
        for ref, tc in sorted(self.toolchains.items()):
            queue = profiles.get(ref, {}).get("queue") or DEFAULT_QUEUE
            if isinstance(tc, dict):
                lines.append(
                    f"- {ref} (queue {queue}): {tc['backend']} {tc['backend_version']}, "
                    f"{tc['compiler']} {tc['compiler_version']}"
                )
            else:
                lines.append(f"- {ref} (queue {queue}): unavailable ({tc})")
        if self.sdk:
            lines += ["", "## Neuron SDK releases", ""]
            if "problem" in self.sdk:
                lines.append(f"- {self.sdk['problem']}")
            else:
                behind = "**a newer release exists**" if self.sdk["newer_release_available"] else "up to date"
                lines.append(
                    f"- latest release {self.sdk['latest_release']} (neuronx-cc {self.sdk['latest_neuronx_cc']}); "
                    f"workers run neuronx-cc {self.sdk['installed_neuronx_cc']} "
                    f"(release {self.sdk['installed_release'] or 'unknown'}): {behind}"
                )
        lines += feed_markdown((self.sdk or {}).get("feed"))
        lines += upgrade_markdown(self.release, self.states)
        lines += speed_markdown(self.states)
        header = "| # | model | target | profile | status | outcome | published for | stale for | detail |"
        lines += ["", "## Targets", "", header, "|---" * 9 + "|"]
        for s in sorted(self.states, key=lambda s: s.order):
            detail = (s.outcome_detail or s.detail).replace("|", "\\|").replace("\n", " ")
            lines.append(
                f"| {s.order} | {s.source} | {s.slug} | {s.profile or '-'} | {s.status} | {s.outcome or '-'} | "
                f"{', '.join(s.published_for) or '-'} | {', '.join(s.stale_for) or '-'} | "
                f"{(s.key[:12] + ' ') if s.key else ''}{detail} |"
            )
        return "\n".join(lines) + "\n"


def feed_markdown(feed: dict[str, Any] | None) -> list[str]:
    """The release feed's section: each release proposed and waiting for review (what needs review, the
    command that accepts it), or why the sync failed (it never fails the run). Stored in the report's
    `sdk_release` (`feed`), beside what the same mirrored manifest says of the workers' compiler."""
    if not feed:
        return []
    said = [*feed.get("proposed", []), *([f"release feed: {feed['problem']}"] if feed.get("problem") else [])]
    head = f"Synced from `{feed['manifest']}`." if feed.get("manifest") else ""
    return [
        "",
        "## Release feed",
        "",
        *([head, ""] if head else []),
        *[f"- {line}" for line in said or ["nothing proposed"]],
    ]


def decision_summary(states: list[TargetState]) -> dict[str, dict[str, Any]]:
    """What a report leads with: how many catalog targets took each decision (`upgrades.Upgrade.decision`),
    overall and per line (migration rows are counted by their own status, not here)."""
    from neuronforge.farm import upgrades

    decisions: dict[str, int] = {}
    lines: dict[str, dict[str, int]] = {}
    for s in states:
        if s.migrated_from or not s.upgrade:
            continue
        d = s.upgrade.get("decision") or s.upgrade.get("action", "")
        if d == upgrades.REBUILD and s.upgrade.get("action") == upgrades.UNKNOWN:
            d = "rebuild (no profile version for the release)"  # asked, not done: `upgrades._register`
        decisions[d] = decisions.get(d, 0) + 1
        per = lines.setdefault(s.upgrade.get("line", ""), {})
        per[d] = per.get(d, 0) + 1
    return {"decisions": decisions, "lines": lines}


def summary_line(release: str, states: list[TargetState]) -> str:
    """`decision_summary` in one line: `Neuron SDK 2.33.1: 4 target(s): 3 re-verify, 1 rebuild; by line:
    vllm-neuron-native 3 re-verify; vllm-neuron 1 rebuild`, then, once anything was done, how many
    rows ended each way `OUTCOME_WORDS` names (`; 2 attested, 1 waiting for the next recompile run`)."""
    summary = decision_summary(states)

    def counted(c: dict[str, int]) -> str:
        return ", ".join(f"{n} {d}" for d, n in sorted(c.items(), key=lambda kv: (-kv[1], kv[0])))

    total = sum(summary["decisions"].values())
    per_line = "; ".join(f"{line} {counted(c)}" for line, c in summary["lines"].items())
    decided = counted(summary["decisions"]) or "none"
    done = {o: n for o in OUTCOME_WORDS if (n := sum(s.outcome == o for s in states))}
    then = "; " + ", ".join(f"{n} {OUTCOME_WORDS[o]}" for o, n in done.items()) if done else ""
    return f"Neuron SDK {release}: {total} target(s): {decided}; by line: {per_line or '-'}{then}"


# The outcomes `summary_line` counts after the decisions: what was done about them, or is still to do.
OUTCOME_WORDS = {
    ATTESTED: "attested",
    NOT_ATTESTED: "attest-failed",
    TO_ATTEST: "to attest on a Neuron host of the release",
    WAITING: "waiting for the next recompile run",
}


def upgrade_lines(states: list[TargetState]) -> list[str]:
    """One line per catalog target: what the upgrade does with it and why (`upgrades.decide`), then
    its migration row when one was built."""
    out = []
    for s in sorted(states, key=lambda s: s.order):
        if s.migrated_from:
            out.append(f"{s.source} {s.slug}: migration of {s.migrated_from}: {s.outcome or s.status}")
        elif s.upgrade:
            out.append(f"{s.source} {s.slug} ({s.upgrade.get('family')}, {s.profile}): {s.upgrade.get('sentence')}")
    return out


def upgrade_markdown(release: str, states: list[TargetState]) -> list[str]:
    lines = upgrade_lines(states)
    if not release or not lines:
        return []
    head = ["", f"## Upgrade to Neuron SDK {release}", ""]  # its summary line leads the report
    return [*head, *[f"- {line}" for line in lines]]


def speed_line(s: TargetState) -> str:
    """Row `s`'s speed against the channel its report compares with ("" when not compared)."""
    if not s.speed:
        return ""
    return f"speed against {s.speed['channel']}: {s.speed['verdict']}: {s.speed['summary']}"


def speed_markdown(states: list[TargetState]) -> list[str]:
    """The report's speed section: each rebuilt or re-smoked row against what `stable` serves."""
    said = [
        f"- {s.source} {s.slug} ({s.profile}): {speed_line(s)}"
        for s in sorted(states, key=lambda s: s.order)
        if s.speed
    ]
    return ["", "## Speed against what `stable` serves", "", *said] if said else []


def write_report(store: ArtifactStore, report: Report) -> dict[str, str]:
    """The report's JSON, then its Markdown; returns both URIs. Re-running overwrites the same
    stamp's report, which is what a retried report task should do."""
    json_key = layout.recompile_report(report.stamp, "json")
    md_key = layout.recompile_report(report.stamp, "md")
    report.record().write(store, json_key)
    store.put_bytes(report.to_markdown().encode(), md_key)
    return {"json": store.uri(json_key), "markdown": store.uri(md_key)}


def stamp_of(when: Any) -> str:
    """`YYYY-MM-DDTHH-MM-SSZ` for a datetime (UTC) or now."""
    if when is None:
        return time.strftime("%Y-%m-%dT%H-%M-%SZ", time.gmtime())
    return when.astimezone(datetime.UTC).strftime("%Y-%m-%dT%H-%M-%SZ")
