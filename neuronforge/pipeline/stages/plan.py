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


def run(state: BuildState, ctx: Context) -> BuildState:
    """The planner on the fetched checkpoint's exact tensor sizes, and the toolchain check."""
    checkpoint = materialize(ctx.store, state.need("checkpoint"), ctx.work_dir)
    result = check_plan(checkpoint, state.target, state.pinned_toolchain())
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
