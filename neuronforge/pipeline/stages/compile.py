"""Stage `compile`: turn a verified checkpoint into compiled graphs for one target, through the
compile cache, and stage `sync_cache`: mirror new cache entries into the store.

The target's serving profile picks the backend (`neuronforge.compilation.backends`: `cpu` runs here; the Neuron
ones run their toolchain in the SDK image's own interpreter, `neuronforge.compilation.backends.interpreter`) and
the settings its consumer needs. The build goes to a fresh folder named
after the cache key, so a re-run never mixes outputs of two attempts.
"""

from __future__ import annotations

import json
import logging
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path

from neuronforge.common import settings
from neuronforge.compilation.compile_cache import CompileCache, SyncReport, graph_set_key
from neuronforge.profiles.request import CompileRequest
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
    config = json.loads((inp.checkpoint_dir / "config.json").read_text())
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
