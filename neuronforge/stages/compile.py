"""Stage `compile`: turn a verified checkpoint into compiled graphs for one target, through the
compile cache, and stage `sync_cache`: mirror new cache entries into the store.

Backends: `cpu` (here, `neuronforge.backends.cpu`); the Neuron backends (`optimum`, `nxdi`) plug in
behind the same call. The build goes to a fresh folder named after the cache key, so a re-run never
mixes outputs of two attempts.
"""

from __future__ import annotations

import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path

from neuronforge.compile_cache import CompileCache, SyncReport
from neuronforge.errors import InvalidInput
from neuronforge.request import CompileRequest, Toolchain
from neuronforge.stores import ArtifactStore


@dataclass
class CompileInput:
    request: CompileRequest
    toolchain: Toolchain
    key: str
    checkpoint_dir: Path
    work_dir: Path


@dataclass
class CompileOutput:
    build_dir: Path
    graphs: list[dict] = field(default_factory=list)
    compiler_invocations: int = 0
    seconds: float = 0.0


def compile_cache(work_dir: Path, toolchain: Toolchain, store: ArtifactStore | None) -> CompileCache:
    return CompileCache(work_dir / "compile-cache", toolchain.compiler, toolchain.compiler_version, store)


def compile_target(inp: CompileInput, store: ArtifactStore | None = None) -> CompileOutput:
    started = time.monotonic()
    target = inp.request.target
    build = inp.work_dir / "build" / inp.key[:12]
    shutil.rmtree(build, ignore_errors=True)
    cache = compile_cache(inp.work_dir, inp.toolchain, store)
    if target.backend == "cpu":
        from neuronforge.backends.cpu import compile_cpu

        result = compile_cpu(inp.checkpoint_dir, target, build, cache, inp.work_dir)
        graphs = [g.__dict__ for g in result.graphs]
        invocations = result.compiler_invocations
    else:
        raise InvalidInput(f"backend {target.backend!r} needs a Neuron worker (docker/neuron-worker.Dockerfile)")
    return CompileOutput(build, graphs, invocations, round(time.monotonic() - started, 3))


def sync_cache(work_dir: Path, toolchain: Toolchain, store: ArtifactStore) -> SyncReport:
    """Upload the compile-cache entries this host built that the store lacks (model.done last)."""
    return compile_cache(work_dir, toolchain, store).sync_to_store()
