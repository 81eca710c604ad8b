"""Stage `prepare`: pin the source and the toolchain, compute the cache key, look it up in the
store's index; a miss must pass the planner's structural checks before anything is claimed or
downloaded. Also what the DAG's first task asks of each target before routing it (`find_published`).
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from neuronforge.artifacts.opening import lookup
from neuronforge.artifacts.published import Published
from neuronforge.pipeline.buildstate import BuildState, PublishedRef, SourcePin
from neuronforge.pipeline.planner import PlanRejected, static_checks
from neuronforge.pipeline.stage import Context, Stage
from neuronforge.pipeline.stages.resolve import resolve_source
from neuronforge.profiles import ServingProfile
from neuronforge.profiles.registry import compile_request
from neuronforge.profiles.request import CompileRequest, cache_key
from neuronforge.spec.source import ModelSource
from neuronforge.spec.target import TargetSpec
from neuronforge.spec.toolchain import Toolchain
from neuronforge.stores import ArtifactStore

log = logging.getLogger(__name__)


@dataclass
class Prepared:
    request: CompileRequest
    toolchain: Toolchain
    key: str


def prepare(
    source: str | ModelSource,
    target: TargetSpec,
    work_dir: Path,
    compiler_flags: str = "",
    allow_pickle: bool = False,
    toolchain: Toolchain | None = None,
) -> Prepared:
    """Pin the source and the toolchain (the profile's, as this worker's toolchain interpreter has
    it, unless `toolchain` is given: one detected elsewhere): everything the cache key needs."""
    pinned = resolve_source(source, work_dir=work_dir, allow_pickle=allow_pickle)
    request = compile_request(pinned, target)
    toolchain = toolchain or request.profile.detect_toolchain(compiler_flags)
    return Prepared(request, toolchain, cache_key(request, toolchain))


def find_published(state: BuildState, store: ArtifactStore, work_dir: Path) -> tuple[BuildState, Published] | None:
    """Is this target already published? What the DAG's first task asks of each target on the default
    queue, before routing any: the key `prepare` computes, then one index lookup. The toolchain is
    detected here when the profile detects it on the default queue (cpu); otherwise it is the one its
    toolchain queue's `prepare` last recorded in the store, if still the profile's pins — without one
    the target is not known to hit and its own `prepare` looks it up. On a hit: the state as `prepare`
    leaves it (source, toolchain, key, `hit`) and the artifact."""
    from neuronforge.pipeline.toolchain_records import last_detected

    profile = state.profile
    toolchain = None
    if profile.placement("toolchain").queue is not None:  # detected on another queue's workers
        toolchain = last_detected(store, profile)
        if toolchain is None:
            return None
    source = state.source.source() if state.source is not None else state.model
    prep = prepare(source, state.target, work_dir, allow_pickle=state.allow_pickle, toolchain=toolchain)
    hit = lookup(store, prep.key, state=state)
    if hit is None:
        return None
    return state.model_copy(update={**_prepared(state, prep), "hit": PublishedRef.of(hit)}), hit


def _prepared(state: BuildState, prep: Prepared) -> dict[str, Any]:
    """What `prepare` adds to a build state: the pinned source, the toolchain, the key."""
    update: dict[str, Any] = {
        "source": SourcePin.of(prep.request.source),
        "toolchain": prep.toolchain.to_json(),
        "key": prep.key,
    }
    if state.profile.neuron:
        from neuronforge.compilation.devices import neuron_devices

        update["neuron_devices"] = neuron_devices(state.target)
    return update


def check_static(source: ModelSource | None, target: TargetSpec) -> None:
    """The planner's structural checks before any lease or download: without a model (the form's
    targets) tp vs the instance; with one, also heads and sequence length vs its config.json,
    read alone (a few KB) from wherever the source is."""
    arch = None
    if source is not None:
        from neuronforge.spec.modelconfig import ModelArch

        config = _read_config(source)
        arch = ModelArch.from_config(config) if config is not None else None
    failed = static_checks(arch, target)
    if failed:
        raise PlanRejected.of(target.slug, failed)


def _read_config(source: ModelSource) -> dict[str, Any] | None:
    """The source's config.json alone, or None when it cannot be had cheaply (the full plan on the
    fetched checkpoint still runs)."""
    try:
        if source.kind == "s3":
            from neuronforge.stores import open_location

            return json.loads(open_location(source.location).get_bytes("config.json"))
        if source.kind == "hf":
            from huggingface_hub import hf_hub_download

            from neuronforge.pipeline.stages.resolve import hub_cache_dir, hub_offline

            path = hf_hub_download(
                source.location,
                "config.json",
                revision=source.resolved_revision,
                cache_dir=hub_cache_dir(),
                local_files_only=hub_offline(),
            )
            return json.loads(Path(path).read_text(encoding="utf-8"))
        from neuronforge.pipeline.stages.resolve import local_folder

        return json.loads((local_folder(source) / "config.json").read_text(encoding="utf-8"))
    except Exception as exc:
        log.info("config.json of %s not read before fetching (%s); planning after the fetch", source, exc)
        return None


def run(state: BuildState, ctx: Context) -> BuildState:
    """Pin the source, detect the toolchain, compute the key, look it up; a miss must pass the
    planner's structural checks before anything is claimed or downloaded. The store is checked
    first (reachable, bucket present) and, on a miss, that it takes writes: a store that cannot hold
    the result fails in seconds, not after the download and the compile. A source the run's first
    task pinned is not resolved again. A Neuron profile's toolchain, detected here on its queue, is
    recorded in the store for the first task (`toolchain_records.record_detected`)."""
    ctx.store.probe(write=False)
    given = state.source.source() if state.source is not None else state.model
    prep = prepare(given, state.target, ctx.work_dir, allow_pickle=state.allow_pickle)
    source, key = prep.request.source, prep.key
    update = _prepared(state, prep)
    hit = lookup(ctx.store, key, state=state)
    if hit is not None:
        log.info("cache hit for %s: %s", key[:12], hit.manifest_uri)
        update["hit"] = PublishedRef.of(hit)
        ctx.published = hit
    else:
        try:
            check_static(source, state.target)
            # This worker's toolchain must be the one the profile pins (its consumer checks the
            # versions at load time): refused here, before any lease or download.
            pinned = state.profile.toolchain_problems(prep.toolchain)
            if pinned:
                raise PlanRejected(f"{state.target.slug}: " + "; ".join(pinned))
        except PlanRejected as exc:
            from neuronforge.artifacts.farm_index import record_failure

            record_failure(ctx.store, key, "prepare", exc, ctx.run_id, state)  # for the recompile report
            raise
        ctx.store.probe(write=True)
        log.info("no published artifact for key %s: building %s", key[:12], state.target.slug)
    _record_toolchain(prep.request.profile, prep.toolchain, ctx)
    return state.model_copy(update=update)


def _record_toolchain(profile: ServingProfile, toolchain: Toolchain, ctx: Context) -> None:
    """Keep what a profile's toolchain queue detected for the DAG's first task, which keys its cache
    hits on the default queue (only a toolchain that is the profile's pins; never fails the stage:
    without it the first task leaves the lookup to this stage)."""
    if profile.placement("toolchain").queue is None or profile.toolchain_problems(toolchain):
        return
    from neuronforge.pipeline.toolchain_records import record_detected

    try:
        if record_detected(ctx.store, profile, toolchain, ctx.run_id):
            log.info("recorded the toolchain of %s for the run's first task", profile.ref)
    except Exception as exc:  # a read-only store serves hits: not recorded, nothing else lost
        log.warning("could not record the toolchain of %s: %s", profile.ref, exc)


STAGE = Stage(
    "prepare",
    run,
    "pin source and toolchain, key, index lookup, static plan",
    "toolchain",
    holds_lease=False,
    skip_on_hit=False,
    writes=("source", "toolchain", "key"),
)
