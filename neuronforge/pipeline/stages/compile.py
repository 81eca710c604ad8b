"""Stage `compile`: turn a verified checkpoint into compiled graphs for one target, through the
compile cache, and stage `sync_cache`: mirror new cache entries into the store.

The target's serving profile picks the backend (`neuronforge.compilation.backends`: `cpu` runs here; the Neuron
ones run their toolchain in the SDK image's own interpreter, `neuronforge.compilation.backends.interpreter`) and
the settings its consumer needs. The build goes to a fresh folder named
after the cache key, so a re-run never mixes outputs of two attempts.

`run` is the stage's adapter (what it reads from the `BuildState`, what it writes back) and `STAGE`
its declaration, listed in `neuronforge.pipeline.runner.STAGES`.
"""

from __future__ import annotations

import hashlib
import json
import logging
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from neuronforge.artifacts import layout
from neuronforge.artifacts.localcache import (
    StoredObjects,
    adopt,
    file_entries,
    materialize,
    publish_tree,
    stored_objects_of,
)
from neuronforge.common import settings
from neuronforge.compilation.compile_cache import CompileCache, SyncReport, graph_set_key
from neuronforge.pipeline.buildstate import BuildState, CompiledRef
from neuronforge.pipeline.stage import Context, Stage
from neuronforge.profiles.request import CompileRequest
from neuronforge.records.payload_manifest import PayloadManifest
from neuronforge.spec.toolchain import Toolchain
from neuronforge.stores import ArtifactStore

log = logging.getLogger(__name__)


@dataclass
class CompileInput:
    request: CompileRequest
    toolchain: Toolchain
    key: str
    checkpoint_dir: Path  # what the compiler reads (for the cpu backend: dequantized when quantized)
    work_dir: Path
    quantized_dir: Path | None = None  # the quantize stage's output (NxD Inference reads it)


@dataclass
class CompileOutput:
    build_dir: Path
    graphs: list[dict] = field(default_factory=list)
    compiler_invocations: int = 0
    seconds: float = 0.0
    graph_set: str | None = None  # Neuron backends: the graph-set key its entries are recorded under
    graph_env: dict[str, str] = field(default_factory=dict)  # the graph-shaping variables it ran with


def compile_cache(work_dir: Path, toolchain: Toolchain, store: ArtifactStore | None) -> CompileCache:
    return CompileCache(work_dir / "compile-cache", toolchain.compiler, toolchain.compiler_version, store)


def compile_target(inp: CompileInput, store: ArtifactStore | None = None) -> CompileOutput:
    """Compile through the target's serving profile: its backend, told what the consumer needs."""
    from neuronforge.compilation.backends.base import CompileJob

    started = time.monotonic()
    target = inp.request.target
    profile = inp.request.profile
    build = inp.work_dir / "build" / inp.key[:12]
    shutil.rmtree(build, ignore_errors=True)
    cache = compile_cache(inp.work_dir, inp.toolchain, store)
    config = json.loads((inp.checkpoint_dir / "config.json").read_text(encoding="utf-8"))
    graph_set, preseed = None, None
    if profile.neuron:
        graph_set = graph_set_key(config, target.normalized().model_dump(mode="json"), inp.toolchain.keyed_json())
        # Scoped pre-seed: only the entries a compile of the same graphs recorded; pulling every
        # entry of the compiler version grows with the store (bench/cache_seed.py).
        preseed = cache.graph_set(graph_set)
        log.info("graph set %s: %s", graph_set[:12], f"{len(preseed)} recorded entries" if preseed else "new")
    job = CompileJob(
        checkpoint_dir=inp.checkpoint_dir,
        model_type=config["model_type"],
        target=target,
        out=build,
        cache=cache,
        flags=inp.toolchain.compiler_flags,
        timeout_s=settings.current().compile_timeout_s,
        work_dir=inp.work_dir,
        settings=profile.compile_settings(target, config["model_type"], inp.quantized_dir, model_config=config),
        preseed=preseed,
        quantized_dir=inp.quantized_dir,
        python=profile.python(),
    )
    result = profile.backend.compile(job)
    return CompileOutput(
        build,
        result.graphs,
        result.compiler_invocations,
        round(time.monotonic() - started, 3),
        graph_set,
        job.graph_env,
    )


def sync_cache(work_dir: Path, toolchain: Toolchain, store: ArtifactStore, compiled: dict | None = None) -> SyncReport:
    """Upload the compile-cache entries this host built that the store lacks (model.done last),
    then record which entries the compile's graph set uses (`compiled`: the compile stage's
    summary), so the next worker compiling the same graphs pre-seeds exactly those."""
    cache = compile_cache(work_dir, toolchain, store)
    report = cache.sync_to_store()
    if compiled and compiled.get("graph_set"):
        entries = [g["entry"] for g in compiled.get("graphs", [])]
        report.graph_set_recorded = cache.record_graph_set(compiled["graph_set"], entries)
    return report


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
    from neuronforge.pipeline.stages.quantize_tensors import dequantized_checkpoint

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


def run(state: BuildState, ctx: Context) -> BuildState:
    """Compile, sync the new compile-cache entries (on this host, where the compiler left them),
    assemble the artifact's payload with the smoke reference and check it with the profile's
    preflight, and stage it in the store: what the smoke test (any Neuron host) loads and publish
    copies."""
    from neuronforge.pipeline.stages.payload import PayloadInput, assemble_payload, launch_texts

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
    manifest = PayloadManifest(cache_key=key, files=file_entries(payload), launch=launch_texts(payload))
    prefix = layout.build_prefix(key, hashlib.sha256(manifest.to_bytes()).hexdigest())
    # Bytes once: what the store already holds (the checkpoint's files, the compile-cache entries just
    # synced) is copied inside it, not uploaded a second time.
    stored = stored_inputs(state, ctx)
    stored.update({(f["sha256"], int(f["size"])): f["key"] for f in synced.stored})
    ref = publish_tree(ctx.store, payload, prefix, manifest, stored=stored)  # the bytes `prefix` names
    adopt(payload, ref, ctx.work_dir)  # a smoke test on this host (the CLI) downloads nothing
    shutil.rmtree(out.build_dir, ignore_errors=True)
    return state.model_copy(update={"compiled": CompiledRef(build=ref, record=record)})


STAGE = Stage(
    "compile_graphs",
    run,
    "compile, sync the compile cache, assemble + preflight + stage the payload with the smoke reference",
    "compile",
    reads=("source", "toolchain", "key", "checkpoint"),
    writes=("compiled",),
)
