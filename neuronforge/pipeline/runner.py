"""The compile-and-publish pipeline, declared once.

    prepare -> claim_build -> fetch_checkpoint -> plan_target -> quantize_weights
            -> compile_graphs (+ compile-cache sync) -> smoke -> publish_artifact

`STAGES` lists them with what each needs from where it runs (`Stage.kind`): the toolchain
(`prepare`), the compiler (`compile_graphs`), the consumer's load (`smoke`) — each profile places
those (`ServingProfile.placement`: for the Neuron profiles, the toolchain stages on CPU workers of the
SDK's image, queue `neuron-compile-<sdk release>`, and only the smoke test on Neuron hosts, queue
`neuron-<sdk release>`, taking `tp` NeuronCores of pool `neuron_cores`) — and whether it holds the
target's compile lease. The CLI (`run_target`) runs the list in one process; the DAG is generated
from the same list by one task factory (`neuronforge_airflow/operators/compile_publish.py`).
Every stage is a function `(BuildState, Context) -> BuildState`: the state carries store
references, and each stage materializes what it needs on its own host (`neuronforge.artifacts.localcache`),
so consecutive stages may run on different hosts that share nothing but the store.
"""

from __future__ import annotations

import hashlib
import json
import logging
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from neuronforge.artifacts import farm_index, layout, leases
from neuronforge.artifacts.localcache import (
    StoredObjects,
    adopt,
    file_entries,
    materialize,
    publish_tree,
    stored_objects_of,
)
from neuronforge.artifacts.published import Published, lookup
from neuronforge.checkpoints.checkpoint import verify_checkpoint
from neuronforge.common.errors import ExitCode, InvalidInput, NeuronforgeError
from neuronforge.pipeline.buildstate import (
    BuildState,
    CompiledRef,
    LeaseRef,
    PublishedRef,
    QuantizedRef,
    SourcePin,
)
from neuronforge.pipeline.planner import Check, Plan, plan, static_checks
from neuronforge.pipeline.stages.resolve import resolve_source
from neuronforge.profiles import ServingProfile
from neuronforge.profiles.registry import compile_request, profile_of
from neuronforge.profiles.request import CompileRequest, cache_key
from neuronforge.records.payload_manifest import PayloadManifest
from neuronforge.spec.source import ModelSource
from neuronforge.spec.target import Surface, TargetSpec
from neuronforge.spec.toolchain import Toolchain
from neuronforge.stores import ArtifactStore

log = logging.getLogger(__name__)


class PlanRejected(InvalidInput):
    """The planner found the target invalid or too big; nothing was compiled or published. Raised
    with its failed checks (`of`), it says their fixes in each surface's words (`said`); its message
    is the CLI's."""

    checks: tuple[Check, ...] = ()
    slug: str = ""

    @classmethod
    def of(cls, slug: str, checks: list[Check]) -> PlanRejected:
        exc = cls(f"{slug}: " + "; ".join(c.message for c in checks))
        exc.slug, exc.checks = slug, tuple(checks)
        return exc

    def said(self, surface: Surface) -> str:
        """The rejection in a surface's words: the form's and the Airflow tasks' ("Sequence length: 2048")."""
        if not self.checks:
            return str(self)
        return f"{self.slug}: " + "; ".join(c.said(surface) for c in self.checks)

    exit_code = ExitCode.REJECTED  # `run`: the configuration is refused, not the command line


class SmokeFailed(NeuronforgeError):
    """The compiled artifact did not load or did not generate like the reference; nothing published."""

    exit_code = ExitCode.REJECTED


@dataclass
class Context:
    """Where a stage runs: the store (shared by every host) and this host's work dir."""

    store: ArtifactStore
    work_dir: Path
    keeper: leases.LeaseKeeper | None = None  # the lease's heartbeat (`leases.keeping`), checked before publishing
    run_id: str = ""  # the Airflow run, for failure records
    stage_started: float | None = None  # monotonic start of the running stage (`execute` sets it)
    # The artifact a lookup of this build found (prepare's, or the claim's wait): the CLI's outcome,
    # without reading the index again.
    published: Published | None = None


# -- helpers the stages (and tests) share ------------------------------------------------------------
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
    hit = lookup(store, prep.key)
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


def check_plan(checkpoint_dir: Path, target: TargetSpec, toolchain: Toolchain | None = None) -> Plan:
    """Plan `target` for a fetched checkpoint (exact weight sizes from its headers) and, given the
    toolchain detected on the compiling worker, check that it is the profile's pinned one and can
    build it; raise `PlanRejected`
    with every problem and its fix when it is invalid, does not fit or cannot be built."""
    from neuronforge.compilation.backends.support import toolchain_problems

    verified = verify_checkpoint(checkpoint_dir)
    result = plan(verified.arch, target, tensors=verified.tensors)
    if toolchain is not None:
        profile = profile_of(target)
        problems = profile.toolchain_problems(toolchain) + toolchain_problems(
            target, toolchain, verified.arch.model_type
        )
        result.checks += [Check("toolchain", False, p) for p in problems] or [
            Check(
                "toolchain",
                True,
                f"{toolchain.backend} {toolchain.backend_version} with {toolchain.compiler} "
                f"{toolchain.compiler_version} is what {profile.ref} pins and can build it",
            )
        ]
    if not result.ok:
        raise PlanRejected.of(target.slug, result.failed)
    return result


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
            from neuronforge.stores import open_store

            return json.loads(open_store(source.location).get_bytes("config.json"))
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
            return json.loads(Path(path).read_text())
        from neuronforge.pipeline.stages.resolve import local_folder

        return json.loads((local_folder(source) / "config.json").read_text())
    except Exception as exc:
        log.info("config.json of %s not read before fetching (%s); planning after the fetch", source, exc)
        return None


@dataclass
class CompileInputs:
    """What the compile stage reads for a target, after quantization if it asks for it."""

    compile_dir: Path  # the checkpoint the compiler reads
    checkpoint_dir: Path  # the verified checkpoint as fetched (profiles that publish it)
    quantized_dir: Path | None = None  # NxD-format quantized checkpoint (nxdi reads it at compile)
    reference_dir: Path | None = None  # the weights the artifact must reproduce (dequantized)
    unquantized_dir: Path | None = None


def compile_inputs(state: BuildState, ctx: Context) -> CompileInputs:
    """Materialize on this host what the compiler and the smoke reference read."""
    checkpoint = materialize(ctx.store, state.need("checkpoint"), ctx.work_dir)
    if state.quantized is None:
        return CompileInputs(checkpoint, checkpoint, reference_dir=checkpoint)
    from neuronforge.pipeline.stages.quantize import dequantized_checkpoint

    ref = state.quantized.checkpoint
    quantized = materialize(ctx.store, ref, ctx.work_dir)
    dequantized = dequantized_checkpoint(
        quantized, ctx.work_dir / "dequantized" / ref.manifest_sha256, state.target.dtype
    )
    # A backend that reads the quantized checkpoint itself compiles from the original config; the
    # others compile the dequantized weights (the numbers the quantized model computes with).
    backend = state.profile.backend
    compile_dir = checkpoint if backend.reads_quantized or backend.quantizes_at_load else dequantized
    return CompileInputs(compile_dir, checkpoint, quantized, dequantized, checkpoint)


def stored_inputs(state: BuildState, ctx: Context) -> StoredObjects:
    """The objects the store holds of the build's inputs, by content: the checkpoint mirror's files
    and the quantized checkpoint's (from their manifests: this host's verified copies, else one small
    GET each). A payload file with the same bytes (a tokenizer, a config, a profile's copy of the
    checkpoint) is copied from there inside the store instead of uploaded."""
    refs = [state.need("checkpoint")] + ([state.quantized.checkpoint] if state.quantized is not None else [])
    stored: StoredObjects = {}
    for ref in refs:
        stored.update(stored_objects_of(ctx.store, ref, ctx.work_dir))
    return stored


# -- the stages ----------------------------------------------------------------------------------
def _prepare(state: BuildState, ctx: Context) -> BuildState:
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
    hit = lookup(ctx.store, key)
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


def _claim(state: BuildState, ctx: Context, ttl_s: float, poll_s: float) -> BuildState:
    """The CLI's claim: take the key's lease, or wait (blocking) for whoever holds it to publish."""
    key = state.need("key")
    holder = leases.holder_id()
    while (lease := leases.try_acquire(ctx.store, key, holder, ttl_s)) is None:
        other = leases.current(ctx.store, key)
        log.info("%s is being built by %s; waiting for its artifact", key[:12], other.holder if other else "?")
        waited = leases.wait_for(ctx.store, key, lambda: lookup(ctx.store, key), poll_s=poll_s)
        if waited is not None:
            ctx.published = waited
            return state.model_copy(update={"hit": PublishedRef.of(waited)})
    farm_index.announce(ctx.store, lease, state)
    return state.model_copy(update={"lease": LeaseRef.of(lease)})


def _fetch(state: BuildState, ctx: Context) -> BuildState:
    from neuronforge.pipeline.stages.fetch import FetchRequest, fetch, fetch_summary

    req = FetchRequest(state.pinned_source(), ctx.store.root_uri, ctx.work_dir, state.allow_pickle)
    result = fetch(req, ctx.store)
    summary = fetch_summary(result)
    log.info(
        "checkpoint %s: %d files, %d bytes, %s",
        summary["source"],
        summary["files"],
        summary["bytes"],
        "reused" if result.reused else "fetched",
    )
    return state.model_copy(update={"checkpoint": result.ref})


def _plan(state: BuildState, ctx: Context) -> BuildState:
    checkpoint = materialize(ctx.store, state.need("checkpoint"), ctx.work_dir)
    result = check_plan(checkpoint, state.target, state.pinned_toolchain())
    for c in result.checks:
        log.info("plan %s: %s", c.name, c.message)
    return state.model_copy(update={"plan": [c.message for c in result.checks]})


def _quantize(state: BuildState, ctx: Context) -> BuildState:
    """The quantized checkpoint (shared by every target asking for the same quantization and
    dtype); a pass-through for targets that do not quantize."""
    if not state.target.quantization.enabled:
        return state
    from neuronforge.pipeline.stages.quantize import QuantizeRequest, quantize

    checkpoint = materialize(ctx.store, state.need("checkpoint"), ctx.work_dir)
    t = state.target
    result = quantize(
        QuantizeRequest(checkpoint, state.pinned_source(), t.quantization, t.dtype, ctx.work_dir), ctx.store
    )
    info = {
        "uri": ctx.store.uri(result.prefix),
        "reused": result.reused,
        "max_rel_error": result.manifest.max_rel_error,
        "tensors_quantized": len(result.manifest.tensors),
    }
    log.info("quantized checkpoint %s: %s", t.quantization.slug, info)
    return state.model_copy(update={"quantized": QuantizedRef(checkpoint=result.ref, info=info)})


def _compile(state: BuildState, ctx: Context) -> BuildState:
    """Compile, sync the new compile-cache entries (on this host, where the compiler left them),
    assemble the artifact's payload with the smoke reference and check it with the profile's
    preflight, and stage it in the store: what the smoke test (any Neuron host) loads and publish
    copies."""
    from neuronforge.pipeline.stages.compile import CompileInput, compile_target, sync_cache
    from neuronforge.pipeline.stages.payload import PayloadInput, assemble_payload

    inputs = compile_inputs(state, ctx)
    toolchain, key = state.pinned_toolchain(), state.need("key")
    out = compile_target(
        CompileInput(state.request(), toolchain, key, inputs.compile_dir, ctx.work_dir, inputs.quantized_dir),
        ctx.store,
    )
    for g in out.graphs:
        log.info(
            "graph %s: %s (%s, %.1fs)",
            g["name"],
            g["entry"],
            "cache hit" if g["cached"] else "compiled",
            g["seconds"] or 0.0,
        )
    record: dict[str, Any] = {
        "graphs": out.graphs,
        "compiler_invocations": out.compiler_invocations,
        "seconds": out.seconds,
        "graph_set": out.graph_set,
    }
    if out.graph_env:  # Neuron backends: the graph-shaping environment (backends.base.graph_env)
        record["graph_env"] = out.graph_env
    if state.quantized is not None:
        record["quantized"] = state.quantized.info
    synced = sync_cache(ctx.work_dir, toolchain, ctx.store, record)
    record["cache_sync"] = synced.to_json()  # failures listed
    profile = state.profile
    payload, formats = assemble_payload(
        PayloadInput(
            state.request(),
            toolchain,
            key,
            out.build_dir,
            ctx.work_dir,
            reference_dir=inputs.reference_dir or inputs.compile_dir,
            checkpoint_dir=inputs.checkpoint_dir if profile.needs_checkpoint else None,
            unquantized_dir=inputs.unquantized_dir,
            prompts=tuple(state.prompts),
            max_new_tokens=state.max_new_tokens,
        ),
        ctx.store,
    )
    record["formats"] = formats
    manifest = PayloadManifest(cache_key=key, files=file_entries(payload))
    prefix = layout.build_prefix(key, hashlib.sha256(manifest.to_bytes()).hexdigest())
    # Bytes once: what the store already holds (the checkpoint's files, the compile-cache entries just
    # synced) is copied inside it, not uploaded a second time.
    stored = stored_inputs(state, ctx)
    stored.update({(f["sha256"], int(f["size"])): f["key"] for f in synced.stored})
    ref = publish_tree(ctx.store, payload, prefix, manifest.to_json(), stored=stored)
    adopt(payload, ref, ctx.work_dir)  # a smoke test on this host (the CLI) downloads nothing
    shutil.rmtree(out.build_dir, ignore_errors=True)
    return state.model_copy(update={"compiled": CompiledRef(build=ref, record=record)})


def _smoke(state: BuildState, ctx: Context) -> BuildState:
    """Load the staged payload — downloaded here, on a host that did not compile it — as its
    consumer does (the profile reads how from the payload's launch files), in a fresh process, through
    a compile cache holding only the entries the launch files name (pulled from the store): a graph the
    load has to compile fails the test."""
    from neuronforge.pipeline.stages.smoke import SmokeInput, smoke_test

    compiled = state.need("compiled")
    payload = materialize(ctx.store, compiled.build, ctx.work_dir)
    profile = state.profile
    load = profile.smoke_load(payload)
    result = smoke_test(
        SmokeInput(payload, load, profile.backend.name, _smoke_cache(state, ctx, load.cache_entries), profile.python())
    )
    log.info(
        "smoke: %s (load %.2fs, first token %.4fs, %.5fs/token)",
        result.reason,
        result.load_s or 0,
        result.time_to_first_token_s or 0,
        result.per_token_s or 0,
    )
    if not result.passed:
        raise SmokeFailed(f"{state.target.slug}: smoke test failed: {result.reason}")
    return state.model_copy(update={"smoke": result.to_json()})


def _smoke_cache(state: BuildState, ctx: Context, entries: tuple[str, ...] | None):  # -> CompileCache
    """A fresh compile cache for the smoke load: empty, or holding exactly the entries the payload's
    launch files point the consumer at, pulled from the store (an entry the store lacks stays
    missing, and the load that would compile it fails the test)."""
    from neuronforge.compilation.compile_cache import CompileCache

    root = ctx.work_dir / "smoke-cache" / state.need("key")[:12]
    shutil.rmtree(root, ignore_errors=True)
    toolchain = state.pinned_toolchain()
    cache = CompileCache(root, toolchain.compiler, toolchain.compiler_version, ctx.store)
    if entries:
        cache.preseed(list(entries))
    return cache


def _publish(state: BuildState, ctx: Context) -> BuildState:
    from neuronforge.common.hosts import StageRun, host_report
    from neuronforge.pipeline.stages.publish import PublishInput, publish

    compiled = state.need("compiled")
    runs = [*state.hosts]
    if ctx.stage_started is not None:  # this stage so far: the manifest is its last write
        host = state.profile.placement(STAGE_BY_NAME["publish_artifact"].kind).host
        runs.append(StageRun.now("publish_artifact", time.monotonic() - ctx.stage_started, host))
    inp = PublishInput(
        state.request(),
        state.pinned_toolchain(),
        state.need("key"),
        compiled.build,
        state.need("smoke"),
        compiled.record,
        run_id=ctx.run_id,
        hosts=host_report(runs),
    )
    if ctx.keeper is not None:
        ctx.keeper.assert_held()  # a run whose lease was taken over publishes nothing
    published = publish(inp, ctx.store)
    log.info("published %s", published.manifest_uri)
    # The staged payload served its purpose: the artifact holds it now (a retry finds the key published).
    ctx.store.delete_prefix(layout.build_prefix(inp.key, "").rstrip("/"))
    return state.model_copy(update={"published": PublishedRef.of(published)})


# -- the declaration -----------------------------------------------------------------------------
@dataclass(frozen=True)
class Stage:
    """One stage and what it needs from where it runs (the DAG turns this into task settings)."""

    name: str  # the task id in the DAG
    run: Callable[[BuildState, Context], BuildState] | None  # None: the claim (CLI/DAG specific)
    doc: str
    # What it needs of its host, placed by the target's profile (`ServingProfile.placement`):
    # "toolchain" | "compile" | "smoke"; None: any worker.
    kind: str | None = None
    holds_lease: bool = True  # runs under the target's compile lease (heart-beats it)
    skip_on_hit: bool = True  # a cache hit passes through it untouched
    final: bool = False  # ends the build: its result is the artifact, and the lease is released after it


STAGES: tuple[Stage, ...] = (
    Stage(
        "prepare",
        _prepare,
        "pin source and toolchain, key, index lookup, static plan",
        "toolchain",
        holds_lease=False,
        skip_on_hit=False,
    ),
    Stage("claim_build", None, "take the key's compile lease or wait for whoever holds it", holds_lease=False),
    Stage("fetch_checkpoint", _fetch, "checkpoint verified and mirrored into the store"),
    Stage("plan_target", _plan, "planner on the exact tensor sizes + toolchain check"),
    Stage("quantize_weights", _quantize, "quantized checkpoint, when the target asks for one"),
    Stage(
        "compile_graphs",
        _compile,
        "compile, sync the compile cache, assemble + preflight + stage the payload with the smoke reference",
        "compile",
    ),
    Stage("smoke", _smoke, "load the staged payload as the consumer does, compiling forbidden; compare", "smoke"),
    Stage("publish_artifact", _publish, "copy the tested payload into the artifact folder, manifest last", final=True),
)
STAGE_BY_NAME = {s.name: s for s in STAGES}


# -- the CLI's runner ----------------------------------------------------------------------------
@dataclass
class TargetOutcome:
    key: str
    status: str  # "published" | "cache-hit"
    published: Published
    compiler_invocations: int = 0
    timings: dict[str, float] = field(default_factory=dict)
    state: BuildState | None = None

    def summary(self) -> dict[str, Any]:
        return {
            "status": self.status,
            "cache_key": self.key,
            "manifest_uri": self.published.manifest_uri,
            "uris": self.published.uris,
            "compiler_invocations": self.compiler_invocations,
            "timings": self.timings,
        }


def run_target(
    source: str,
    target: TargetSpec,
    store: ArtifactStore,
    work_dir: Path,
    *,
    prompts: list[str] | None = None,
    max_new_tokens: int = 8,
    allow_pickle: bool = False,
    lease_ttl_s: float | None = None,
    lease_poll_s: float = 5.0,
) -> TargetOutcome:
    """One target through `STAGES` in this process; an identical request already building
    elsewhere (its lease in the store is live) is waited for and its artifact reused."""
    lease_ttl_s = leases.default_ttl_s() if lease_ttl_s is None else lease_ttl_s
    state = BuildState(
        model=source,
        target=target,
        store_uri=store.root_uri,
        prompts=list(prompts or []),
        max_new_tokens=max_new_tokens,
        allow_pickle=allow_pickle,
    )
    ctx = Context(store, work_dir)
    timings: dict[str, float] = {}
    state = _timed(STAGE_BY_NAME["prepare"], state, ctx, timings)
    if state.hit is None:
        state = _timed_call("claim_build", lambda: _claim(state, ctx, lease_ttl_s, lease_poll_s), timings)
    if state.hit is not None:  # the artifact prepare's lookup (or the claim's wait) found: not read again
        if ctx.published is None:  # pragma: no cover - every stage that sets `hit` keeps what it found
            raise NeuronforgeError(f"{state.key}: a cache hit without the artifact it found")
        return TargetOutcome(state.need("key"), "cache-hit", ctx.published, 0, timings, state)
    with leases.keeping(store, state.need("lease").lease(), lease_ttl_s) as keeper:
        ctx.keeper = keeper
        for stage in STAGES:
            if stage.run is None or stage.name == "prepare":
                continue
            state = _timed(stage, state, ctx, timings)
    published = lookup(store, state.need("key"))
    if published is None:  # pragma: no cover - publish wrote the index entry just now
        raise NeuronforgeError(f"{state.key}: published but not found in the index")
    invocations = int(state.need("compiled").record.get("compiler_invocations", 0))
    return TargetOutcome(state.need("key"), "published", published, invocations, timings, state)


def _timed(stage: Stage, state: BuildState, ctx: Context, timings: dict[str, float]) -> BuildState:
    return _timed_call(stage.name, lambda: execute(stage, state, ctx), timings)


def execute(stage: Stage, state: BuildState, ctx: Context) -> BuildState:
    """Run one stage for a state (CLI and DAG alike): a hit passes through; a failure of a build
    whose key is known is recorded in the store (`failures/<key>.json`) for the recompile report."""
    if stage.run is None:
        raise RuntimeError(f"{stage.name} is run by the CLI's or the DAG's own claim")
    if state.hit is not None and stage.skip_on_hit:
        return state
    from neuronforge.common.hosts import StageRun

    ctx.stage_started = started = time.monotonic()
    try:
        done = stage.run(state, ctx)
        host = state.profile.placement(stage.kind).host
        return done.model_copy(
            update={"hosts": [*done.hosts, StageRun.now(stage.name, time.monotonic() - started, host)]}
        )
    except Exception as exc:
        if state.key and stage.holds_lease:
            from neuronforge.artifacts.farm_index import record_failure

            try:
                record_failure(ctx.store, state.key, stage.name, exc, ctx.run_id, state)
            except Exception as record_exc:
                log.warning("could not record the failure of %s: %s", state.key[:12], record_exc)
        raise


def _timed_call(name: str, fn: Callable[[], BuildState], timings: dict[str, float]) -> BuildState:
    started = time.monotonic()
    value = fn()
    timings[name] = round(time.monotonic() - started, 3)
    return value
