"""Stage `claim_build`: take the key's compile lease, or wait for whoever holds it to publish. The
DAG claims with its own deferrable operator (`neuronforge_airflow/operators/build_claim.py`); the
CLI's claim (`claim`) blocks in its process. The declaration has no `run`: each runner claims its way.
"""

from __future__ import annotations

import logging

from neuronforge.artifacts import farm_index, leases
from neuronforge.artifacts.opening import lookup
from neuronforge.common.progress import heartbeat
from neuronforge.pipeline.buildstate import BuildState, LeaseRef, PublishedRef
from neuronforge.pipeline.stage import Context, Stage

log = logging.getLogger(__name__)


def claim(state: BuildState, ctx: Context, ttl_s: float, poll_s: float) -> BuildState:
    """The CLI's claim: take the key's lease, or wait (blocking) for whoever holds it to publish; a
    holder that dies on this host, or stops renewing elsewhere, is taken over (`leases.try_acquire`)."""
    key = state.need("key")
    holder = leases.holder_id()
    told: set[str] = set()  # the holders already named: one line per holder, not one per poll
    while (lease := leases.try_acquire(ctx.store, key, holder, ttl_s)) is None:
        other = leases.current(ctx.store, key)
        if other is not None and other.holder not in told:
            told.add(other.holder)
            # a warning: the CLI shows it at its default verbosity (a silent wait looks like a hang)
            log.warning("%s", leases.waiting_line(ctx.store, other))
        # a heartbeat while it waits, like every long step: who builds it, and when the wait ends at most
        with heartbeat(leases.waiting_beat(other, key)):
            waited = leases.wait_for(ctx.store, key, lambda: lookup(ctx.store, key, state=state), poll_s=poll_s)
        if waited is not None:
            ctx.published = waited
            return state.model_copy(update={"hit": PublishedRef.of(waited)})
    try:
        farm_index.announce(ctx.store, lease, state)
    except BaseException:  # an interrupt (or a store failure) before the build holds it: not left held
        leases.release(ctx.store, lease)
        raise
    return state.model_copy(update={"lease": LeaseRef.of(lease)})


STAGE = Stage(
    "claim_build",
    None,
    "take the key's compile lease or wait for whoever holds it",
    holds_lease=False,
    reads=("key",),
)
