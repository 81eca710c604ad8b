"""The compile-and-publish pipeline, declared once.

    prepare -> claim_build -> fetch_checkpoint -> plan_target -> quantize_weights
            -> compile_graphs (+ compile-cache sync) -> smoke -> register_hub_cache -> publish_artifact

Each stage lives in one module of `neuronforge.pipeline.stages` with its adapter (`run`: what it
reads from the `BuildState`, the stage function, what it writes back) and its declaration (`STAGE`:
name, the fields it reads and writes, placement). `STAGES` lists them with what each needs from
where it runs (`Stage.kind`): the toolchain (`prepare`), the compiler (`compile_graphs`), the
consumer's load (`smoke`) — each profile places those (`ServingProfile.placement`: for the Neuron
profiles, the toolchain stages on CPU workers of the SDK's image, queue `neuron-compile-<sdk
release>`, and only the smoke test on Neuron hosts, queue `neuron-<sdk release>`, taking `tp`
NeuronCores of pool `neuron_cores`) — and whether it holds the target's compile lease. The CLI
(`run_target`) runs the list in one process; the DAG is generated from the same list by one task
factory (`neuronforge_airflow/operators/compile_publish.py`), whose tasks (and the Kubernetes pods)
run each stage through the same `execute`. What happens around every stage (lease keeping, host
timing, failure records) is a hook of `execute` (`neuronforge.pipeline.hooks`).
Every stage is a function `(BuildState, Context) -> BuildState`: the state carries store
references, and each stage materializes what it needs on its own host (`neuronforge.artifacts.localcache`),
so consecutive stages may run on different hosts that share nothing but the store.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from neuronforge.artifacts import leases
from neuronforge.artifacts.published import Published, lookup
from neuronforge.common import interrupts
from neuronforge.common.errors import NeuronforgeError
from neuronforge.pipeline.buildstate import BuildState
from neuronforge.pipeline.hooks import LeaseKeeping, StageHooks, default_hooks
from neuronforge.pipeline.stage import Context, Stage
from neuronforge.pipeline.stages import claim as claim_stage
from neuronforge.pipeline.stages import compile as compile_stage
from neuronforge.pipeline.stages import fetch as fetch_stage
from neuronforge.pipeline.stages import plan as plan_stage
from neuronforge.pipeline.stages import prepare as prepare_stage
from neuronforge.pipeline.stages import publish as publish_stage
from neuronforge.pipeline.stages import quantize as quantize_stage
from neuronforge.pipeline.stages import register as register_stage
from neuronforge.pipeline.stages import smoke as smoke_stage
from neuronforge.spec.target import TargetSpec
from neuronforge.stores import ArtifactStore

log = logging.getLogger(__name__)

# The pipeline, in order: one list of the stage modules' declarations.
STAGES: tuple[Stage, ...] = tuple(
    m.STAGE
    for m in (
        prepare_stage,
        claim_stage,
        fetch_stage,
        plan_stage,
        quantize_stage,
        compile_stage,
        smoke_stage,
        register_stage,
        publish_stage,
    )
)
STAGE_BY_NAME = {s.name: s for s in STAGES}


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
    lease_poll_s: float | None = None,
    hub_registry: str | None = None,
) -> TargetOutcome:
    """One target through `STAGES` in this process; an identical request already building
    elsewhere (its lease in the store is live) is waited for and its artifact reused. The lease is
    held from the first stage after the claim to the final one (`hooks.LeaseKeeping`). A waiter looks
    at the store every quarter heartbeat (`lease_poll_s`), so it sees a dead holder within about one."""
    lease_ttl_s = leases.default_ttl_s() if lease_ttl_s is None else lease_ttl_s
    lease_poll_s = leases.heartbeat_for(lease_ttl_s) / 4 if lease_poll_s is None else lease_poll_s
    state = BuildState(
        model=source,
        target=target,
        store_uri=store.root_uri,
        prompts=list(prompts or []),
        max_new_tokens=max_new_tokens,
        allow_pickle=allow_pickle,
        hub_registry=hub_registry,
    )
    ctx = Context(store, work_dir)
    keeping = LeaseKeeping(lease_ttl_s)
    hooks = (keeping, *default_hooks())
    timings: dict[str, float] = {}
    state = _timed(STAGE_BY_NAME["prepare"], state, ctx, timings, hooks)
    if state.hit is None:
        claimed = state
        state = _timed_call("claim_build", lambda: claim_stage.claim(claimed, ctx, lease_ttl_s, lease_poll_s), timings)
    if state.hit is not None:  # the artifact prepare's lookup (or the claim's wait) found: not read again
        if ctx.published is None:  # pragma: no cover - every stage that sets `hit` keeps what it found
            raise NeuronforgeError(f"{state.key}: a cache hit without the artifact it found")
        note = register_stage.hit_note(state, ctx.published.manifest)
        if note:
            log.warning("%s", note)
        return TargetOutcome(state.need("key"), "cache-hit", ctx.published, 0, timings, state)
    try:
        for stage in STAGES:
            if stage.run is None or stage.name == "prepare":
                continue
            state = _timed(stage, state, ctx, timings, hooks)
    except BaseException:
        keeping.abandon(ctx, state)  # a lease claimed but not yet kept (interrupted in between) is freed
        raise
    published = lookup(store, state.need("key"))
    if published is None:  # pragma: no cover - publish wrote the index entry just now
        raise NeuronforgeError(f"{state.key}: published but not found in the index")
    invocations = int(state.need("compiled").record.get("compiler_invocations", 0))
    return TargetOutcome(state.need("key"), "published", published, invocations, timings, state)


def _timed(
    stage: Stage, state: BuildState, ctx: Context, timings: dict[str, float], hooks: Iterable[StageHooks]
) -> BuildState:
    return _timed_call(stage.name, lambda: execute(stage, state, ctx, hooks), timings)


def execute(stage: Stage, state: BuildState, ctx: Context, hooks: Iterable[StageHooks] | None = None) -> BuildState:
    """Run one stage for a state — the CLI, the DAG's tasks and the Kubernetes pods alike: a hit
    passes through; the stage's declared reads must be there (else it does not start), its declared
    writes must be there after; `hooks` (default: host timing and failure records) run around it,
    `before_stage` in order, `after_stage` / `on_stage_error` in reverse order, like nested `with`
    blocks (a hook whose `before_stage` failed, and the ones after it, are not told of the error)."""
    if stage.run is None:
        raise RuntimeError(f"{stage.name} is run by the CLI's or the DAG's own claim")
    if state.hit is not None and stage.skip_on_hit:
        return state
    missing = [f for f in stage.reads if getattr(state, f) is None]
    if missing:
        raise RuntimeError(
            f"{state.target.slug}: stage {stage.name} needs {', '.join(missing)} in the build state; "
            "the stage producing it has not run"
        )
    hooks = tuple(default_hooks() if hooks is None else hooks)
    entered: list[StageHooks] = []
    try:
        for hook in hooks:
            hook.before_stage(stage, state, ctx)
            entered.append(hook)
        ctx.stage_started = started = time.monotonic()
        done = stage.run(state, ctx)
        unwritten = [f for f in stage.writes if getattr(done, f) is None]
        if unwritten:
            raise RuntimeError(f"{state.target.slug}: stage {stage.name} did not write {', '.join(unwritten)}")
    except BaseException as exc:  # an interrupt too: the lease hook releases on the way out
        for hook in reversed(entered):
            hook.on_stage_error(stage, state, ctx, exc)
        raise
    seconds = time.monotonic() - started
    for hook in reversed(hooks):
        done = hook.after_stage(stage, done, ctx, seconds)
    return done


def _timed_call(name: str, fn: Callable[[], BuildState], timings: dict[str, float]) -> BuildState:
    started = time.monotonic()
    with interrupts.stage(name):  # an interrupt's one line names it
        value = fn()
    timings[name] = round(time.monotonic() - started, 3)
    return value
