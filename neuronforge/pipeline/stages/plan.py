"""Stage `plan_target`: the planner on the fetched checkpoint (exact weight sizes from its headers)
and the toolchain detected on the compiling worker: a target that is invalid, does not fit or cannot
be built is refused (`PlanRejected`, with every problem and its fix) before the compile.
"""

from __future__ import annotations

import logging
from pathlib import Path

from neuronforge.artifacts.localcache import materialize
from neuronforge.checkpoints.checkpoint import verify_checkpoint
from neuronforge.pipeline.buildstate import BuildState
from neuronforge.pipeline.planner import Check, Plan, PlanRejected, plan
from neuronforge.pipeline.stage import Context, Stage
from neuronforge.profiles.registry import profile_of
from neuronforge.spec.target import TargetSpec
from neuronforge.spec.toolchain import Toolchain

log = logging.getLogger(__name__)


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


def registry_check(checkpoint: Path, state: BuildState) -> Check:
    """With --hub-registry, before the compile: the build must be one optimum-neuron's lookup can find
    (its dtype the model's config.json's: `OptimumRegistry.dtype_problem`) and its toolchain the
    consumer's (the version lock); else the plan is refused, as the register stage would refuse it
    after the compile and the smoke test."""
    import json

    from neuronforge.pipeline.planner import Fix
    from neuronforge.spec.target import TORCH_DTYPE_NAMES

    registry = state.profile.hub_registry
    assert registry is not None
    config = json.loads((checkpoint / "config.json").read_text(encoding="utf-8"))
    have = config.get("dtype", config.get("torch_dtype")) if isinstance(config, dict) else None
    want = TORCH_DTYPE_NAMES[state.target.dtype]
    if have != want:
        short = next((k for k, v in TORCH_DTYPE_NAMES.items() if v == have), None)
        fix = Fix("dtype", short, "(the model's own dtype)") if short else None
        text = (
            f"--hub-registry: optimum-neuron's lookup finds a build only in the dtype of the model's config.json "
            f"({have}), this target is {want} ({registry.rule_digest})"
        )
        if fix is None:
            text += "; leave --hub-registry out"
        raise PlanRejected.of(state.target.slug, [Check("hub registry", False, text, fix)])
    problems = registry.version_problems(dict(state.pinned_toolchain().packages))
    if problems:
        text = f"--hub-registry: {'; '.join(problems)}; build on a worker of the profile's image"
        raise PlanRejected.of(state.target.slug, [Check("hub registry", False, text)])
    return Check("hub registry", True, f"registrable in {state.hub_registry}: {want} is the model's config.json dtype")


def run(state: BuildState, ctx: Context) -> BuildState:
    """The planner on the fetched checkpoint's exact tensor sizes, and the toolchain check."""
    checkpoint = materialize(ctx.store, state.need("checkpoint"), ctx.work_dir)
    result = check_plan(checkpoint, state.target, state.pinned_toolchain())
    if state.hub_registry and state.profile.hub_registry is not None:
        try:
            result.checks.append(registry_check(checkpoint, state))
        except PlanRejected as exc:
            if not state.hub_registry_default:
                raise
            # the workers' default registry never refuses a build: it is published unregistered
            log.warning("not registering in %s (NEURONFORGE_HUB_REGISTRY): %s", state.hub_registry, exc)
            state = state.model_copy(update={"hub_registry": None})
    for c in result.checks:
        (log.warning if c.warn else log.info)("plan %s: %s", c.name, c.message)
    return state.model_copy(update={"plan": [c.message for c in result.checks]})


STAGE = Stage(
    "plan_target",
    run,
    "planner on the exact tensor sizes + toolchain check",
    reads=("toolchain", "checkpoint"),
    writes=("plan",),
)
