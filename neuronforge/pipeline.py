"""The compile-and-publish pipeline for one target, as plain function calls.

    resolve -> index lookup (hit: stop) -> fetch -> plan -> quantize -> compile -> sync cache
            -> smoke test -> publish

The Airflow DAG runs the same stages as separate tasks (`operators/`); `run_target` chains them in
one process for the CLI (`neuronforge run`), the benchmark and the tests. Every step is a function
of typed inputs; re-running any of them is safe.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from neuronforge import leases
from neuronforge.checkpoint import verify_checkpoint
from neuronforge.errors import InvalidInput, NeuronforgeError
from neuronforge.planner import Check, Plan, plan
from neuronforge.request import CompileRequest, Toolchain, cache_key
from neuronforge.source import ModelSource
from neuronforge.stages.compile import CompileInput, compile_target, sync_cache
from neuronforge.stages.fetch import FetchRequest, fetch
from neuronforge.stages.publish import Published, PublishInput, check_formats, lookup, publish
from neuronforge.stages.resolve import resolve_source
from neuronforge.stages.smoke import DEFAULT_PROMPTS, SmokeInput, smoke_test
from neuronforge.stores import ArtifactStore
from neuronforge.target import TargetSpec
from neuronforge.toolchain import detect_toolchain

log = logging.getLogger(__name__)


class PlanRejected(InvalidInput):
    """The planner found the target invalid or too big; nothing was compiled or published."""


class SmokeFailed(NeuronforgeError):
    """The compiled artifact did not load or did not generate like the reference; nothing published."""


@dataclass
class Prepared:
    request: CompileRequest
    toolchain: Toolchain
    key: str


@dataclass
class TargetOutcome:
    key: str
    status: str  # "published" | "cache-hit"
    published: Published
    compiler_invocations: int = 0
    timings: dict[str, float] = field(default_factory=dict)

    def summary(self) -> dict[str, Any]:
        return {
            "status": self.status,
            "cache_key": self.key,
            "manifest_uri": self.published.manifest_uri,
            "uris": self.published.uris,
            "compiler_invocations": self.compiler_invocations,
            "timings": self.timings,
        }


def prepare(source: str | ModelSource, target: TargetSpec, work_dir: Path, compiler_flags: str = "") -> Prepared:
    """Pin the source and the toolchain: everything the cache key needs."""
    pinned = resolve_source(source, work_dir=work_dir)
    toolchain = detect_toolchain(target.backend, compiler_flags)
    request = CompileRequest(pinned, target)
    return Prepared(request, toolchain, cache_key(request, toolchain))


def check_plan(checkpoint_dir: Path, target: TargetSpec, toolchain: Toolchain | None = None) -> Plan:
    """Plan `target` for a fetched checkpoint (exact weight sizes from its headers) and, given the
    toolchain detected on the compiling worker, check that it can build it; raise `PlanRejected`
    with every problem and its fix when it is invalid, does not fit or cannot be built."""
    from neuronforge.backends.support import toolchain_problems

    verified = verify_checkpoint(checkpoint_dir)
    result = plan(verified.arch, target, tensors=verified.tensors)
    if toolchain is not None:
        problems = toolchain_problems(target, toolchain, verified.arch.model_type)
        result.checks += [Check("toolchain", False, p) for p in problems] or [
            Check("toolchain", True, f"{toolchain.backend} {toolchain.backend_version} can build it")
        ]
    if not result.ok:
        raise PlanRejected(f"{target.slug}: " + "; ".join(result.problems))
    return result


@dataclass
class CompileInputs:
    """What the compile and smoke stages read for a target, after quantization if it asks for it."""

    compile_dir: Path  # the checkpoint the compiler reads
    quantized_dir: Path | None = None  # NxD-format quantized checkpoint (nxdi reads it at compile)
    reference_dir: Path | None = None  # the weights the artifact must reproduce (dequantized)
    unquantized_dir: Path | None = None
    info: dict[str, Any] = field(default_factory=dict)  # for the manifest


def quantize_for(
    checkpoint_dir: Path, source: ModelSource, target: TargetSpec, work_dir: Path, store: ArtifactStore | None
) -> CompileInputs:
    """Stage `quantize` for a target: the quantized checkpoint (shared by every target asking for
    the same quantization and dtype), and for the cpu backend its dequantized twin to compile."""
    if not target.quantization.enabled:
        return CompileInputs(checkpoint_dir)
    from neuronforge.stages.quantize import QuantizeRequest, dequantized_checkpoint, quantize

    result = quantize(QuantizeRequest(checkpoint_dir, source, target.quantization, target.dtype, work_dir), store)
    dequantized = dequantized_checkpoint(result.local_dir, work_dir / "dequantized" / result.prefix, target.dtype)
    info = {
        "uri": store.uri(result.prefix) if store is not None else str(result.local_dir),
        "reused": result.reused,
        "max_rel_error": result.manifest["max_rel_error"],
        "tensors_quantized": len(result.manifest["tensors"]),
    }
    compile_dir = dequantized if target.backend == "cpu" else checkpoint_dir
    return CompileInputs(compile_dir, result.local_dir, dequantized, checkpoint_dir, info)


def run_target(
    source: str,
    target: TargetSpec,
    store: ArtifactStore,
    work_dir: Path,
    *,
    prompts: list[str] | None = None,
    max_new_tokens: int = 8,
    formats: tuple[str, ...] = ("optimum",),
    allow_pickle: bool = False,
    lease_ttl_s: float = leases.DEFAULT_TTL_S,
    lease_poll_s: float = 5.0,
) -> TargetOutcome:
    """One target through every stage; an identical request already building elsewhere (its
    lease in the store is live) is waited for and its artifact reused instead of compiled again."""
    timings: dict[str, float] = {}
    t0 = time.monotonic()
    check_formats(formats)  # bad input fails here, not after the compile
    prep = prepare(source, target, work_dir)
    hit = lookup(store, prep.key)
    timings["resolve_lookup"] = round(time.monotonic() - t0, 3)
    if hit is not None:
        log.info("cache hit for %s: %s", prep.key[:12], hit.manifest_uri)
        return TargetOutcome(prep.key, "cache-hit", hit, 0, timings)
    holder = leases.holder_id()
    while (lease := leases.try_acquire(store, prep.key, holder, lease_ttl_s)) is None:
        other = leases.current(store, prep.key)
        log.info("%s is being built by %s; waiting for its artifact", prep.key[:12], other.holder if other else "?")
        started = time.monotonic()
        waited = leases.wait_for(store, prep.key, lambda: lookup(store, prep.key), poll_s=lease_poll_s)
        timings["lease_wait"] = round(timings.get("lease_wait", 0) + time.monotonic() - started, 3)
        if waited is not None:
            return TargetOutcome(prep.key, "cache-hit", waited, 0, timings)
    with leases.LeaseKeeper(store, lease, lease_ttl_s) as keeper:
        return _build(prep, target, store, work_dir, timings, keeper, prompts, max_new_tokens, formats, allow_pickle)


def _build(
    prep: Prepared,
    target: TargetSpec,
    store: ArtifactStore,
    work_dir: Path,
    timings: dict[str, float],
    keeper: leases.LeaseKeeper,
    prompts: list[str] | None,
    max_new_tokens: int,
    formats: tuple[str, ...],
    allow_pickle: bool,
) -> TargetOutcome:
    def step(name: str, fn):
        started = time.monotonic()
        value = fn()
        timings[name] = round(time.monotonic() - started, 3)
        return value

    fetch_request = FetchRequest(str(prep.request.source), store.root_uri, work_dir, allow_pickle)
    fetched = step("fetch", lambda: fetch(fetch_request, store))
    step("plan", lambda: check_plan(fetched.local_dir, target, prep.toolchain))
    inputs = step("quantize", lambda: quantize_for(fetched.local_dir, prep.request.source, target, work_dir, store))
    built = step(
        "compile",
        lambda: compile_target(
            CompileInput(prep.request, prep.toolchain, prep.key, inputs.compile_dir, work_dir, inputs.quantized_dir),
            store,
        ),
    )
    compile_info = {
        "graphs": built.graphs,
        "compiler_invocations": built.compiler_invocations,
        "seconds": built.seconds,
        "graph_set": built.graph_set,
    }
    if inputs.info:
        compile_info["quantized"] = inputs.info
    synced = step("sync_cache", lambda: sync_cache(work_dir, prep.toolchain, store, compile_info))
    compile_info["cache_sync"] = synced.to_json()  # failed entries are listed in the manifest
    smoke = step(
        "smoke",
        lambda: smoke_test(
            SmokeInput(
                built.build_dir,
                inputs.compile_dir,
                target.dtype,
                backend=target.backend,
                prompts=list(prompts or DEFAULT_PROMPTS),
                max_new_tokens=max_new_tokens,
                reference_dir=inputs.reference_dir,
                unquantized_dir=inputs.unquantized_dir,
            )
        ),
    )
    if not smoke.passed:
        raise SmokeFailed(f"{target.slug}: smoke test failed: {smoke.reason}")
    publish_input = PublishInput(
        prep.request,
        prep.toolchain,
        prep.key,
        built.build_dir,
        smoke.to_json(),
        compile_info,
        work_dir,
        formats,
        fetched.local_dir,
    )
    keeper.assert_held()  # a run whose lease was taken over publishes nothing
    published = step("publish", lambda: publish(publish_input, store))
    return TargetOutcome(prep.key, "published", published, built.compiler_invocations, timings)
