"""What happens around every stage, wherever it runs (the CLI's `run_target`, an Airflow stage task,
a Kubernetes pod): the runner's hooks, after kedro's `before_node_run` / `after_node_run` /
`on_node_error`. `runner.execute(stage, state, ctx, hooks)` calls each hook's `before_stage` in
order, then, like nested `with` blocks, `after_stage` (or `on_stage_error`) in reverse order: the
first hook is the outermost (the lease is taken before and left after everything else).

- `LeaseKeeping`: the target's compile lease heart-beaten while a lease-holding stage works
  (`leases.keeping`): for one task (`hand_on`: left held for the next task, the result carrying its
  latest version; released after the final stage) or for the whole build in one process (the CLI:
  taken at the first such stage, released after the final one or on the first failure).
- `HostTiming`: each stage's seconds and kind of host, in `BuildState.hosts` (the manifest's `hosts`).
- `TransferLog`: each transfer a stage made (bytes, files, seconds, MB/s, client), measured by the
  stores and the Hub download (`neuronforge.common.transfers`), in `BuildState.transfers` (the
  manifest's `transfers`).
- `FailureRecords`: a failure of a build whose key is known, in the store (`failures/<key>.json`)
  for the recompile report.
"""

from __future__ import annotations

import logging
import sys
from contextlib import AbstractContextManager
from typing import Protocol

from neuronforge.pipeline.buildstate import BuildState, LeaseRef
from neuronforge.pipeline.stage import Context, Stage

log = logging.getLogger(__name__)


class StageHooks(Protocol):
    """One concern around every stage. `after_stage` gets the stage's result and returns it (changed
    or not): what a hook adds to the state travels with it to the next task."""

    def before_stage(self, stage: Stage, state: BuildState, ctx: Context) -> None: ...

    def after_stage(self, stage: Stage, state: BuildState, ctx: Context, seconds: float) -> BuildState: ...

    def on_stage_error(self, stage: Stage, state: BuildState, ctx: Context, exc: BaseException) -> None: ...


class HostTiming:
    """Every stage that ran, with its seconds and the kind of host its profile places it on."""

    def before_stage(self, stage: Stage, state: BuildState, ctx: Context) -> None:
        pass

    def after_stage(self, stage: Stage, state: BuildState, ctx: Context, seconds: float) -> BuildState:
        from neuronforge.common.hosts import StageRun

        host = state.profile.placement(stage.kind).host
        return state.model_copy(update={"hosts": [*state.hosts, StageRun.now(stage.name, seconds, host)]})

    def on_stage_error(self, stage: Stage, state: BuildState, ctx: Context, exc: BaseException) -> None:
        pass


class TransferLog:
    """The transfers each stage made, kept in the state with the stage's name (`common.transfers`)."""

    def __init__(self) -> None:
        self._collecting: AbstractContextManager[list] | None = None
        self._sink: list = []

    def before_stage(self, stage: Stage, state: BuildState, ctx: Context) -> None:
        from neuronforge.common import transfers

        self._collecting = transfers.collecting()
        self._sink = self._collecting.__enter__()

    def after_stage(self, stage: Stage, state: BuildState, ctx: Context, seconds: float) -> BuildState:
        from neuronforge.records.transfers import TransferRecord

        self._stop()
        if not self._sink:
            return state
        made = [TransferRecord.of(stage.name, t) for t in self._sink]
        return state.model_copy(update={"transfers": [*state.transfers, *made]})

    def on_stage_error(self, stage: Stage, state: BuildState, ctx: Context, exc: BaseException) -> None:
        self._stop()

    def _stop(self) -> None:
        collecting, self._collecting = self._collecting, None
        if collecting is not None:
            collecting.__exit__(None, None, None)


class FailureRecords:
    """A failed lease-holding stage of a build whose key is known, recorded for the recompile report
    (never hiding the failure itself: a record that cannot be written is a warning)."""

    def before_stage(self, stage: Stage, state: BuildState, ctx: Context) -> None:
        pass

    def after_stage(self, stage: Stage, state: BuildState, ctx: Context, seconds: float) -> BuildState:
        return state

    def on_stage_error(self, stage: Stage, state: BuildState, ctx: Context, exc: BaseException) -> None:
        if not (state.key and stage.holds_lease) or not isinstance(exc, Exception):
            return  # an interrupt (SIGINT/SIGTERM) is no failure of the build: the rerun builds it
        from neuronforge.artifacts.farm_index import record_failure

        try:
            record_failure(ctx.store, state.key, stage.name, exc, ctx.run_id, state)
        except Exception as record_exc:
            log.warning("could not record the failure of %s: %s", state.key[:12], record_exc)


class LeaseKeeping:
    """The compile lease held while lease-holding stages work (`leases.keeping`). `hand_on` (a DAG
    task): held for this stage only, left held for the next task (the result carries its latest
    version), released after the final stage. Without (the CLI): taken at the first lease-holding
    stage, held across the next ones, released after the final stage or when a stage fails."""

    def __init__(self, ttl_s: float | None = None, *, hand_on: bool = False) -> None:
        self.ttl_s = ttl_s
        self.hand_on = hand_on
        self._held: AbstractContextManager | None = None
        self._taken = False  # it kept the lease at some point (and let it go after)

    def before_stage(self, stage: Stage, state: BuildState, ctx: Context) -> None:
        if self._held is not None or not stage.holds_lease or state.lease is None:
            return
        from neuronforge.artifacts import leases

        held = leases.keeping(ctx.store, state.lease.lease(), self.ttl_s, hand_on=self.hand_on)
        self._taken = True
        ctx.keeper = held.__enter__()  # a lease taken over raises here: the stage does not run
        self._held = held

    def after_stage(self, stage: Stage, state: BuildState, ctx: Context, seconds: float) -> BuildState:
        if self._held is None or not (self.hand_on or stage.final):
            return state
        keeper = ctx.keeper
        self._leave(None)
        if self.hand_on and keeper is not None:
            state = state.model_copy(update={"lease": LeaseRef.of(keeper.lease)})
            if stage.final:
                from neuronforge.artifacts import leases

                leases.release(ctx.store, keeper.lease)
        return state

    def on_stage_error(self, stage: Stage, state: BuildState, ctx: Context, exc: BaseException) -> None:
        if self._held is not None:
            self._leave(exc)

    def abandon(self, ctx: Context, state: BuildState) -> None:
        """The CLI's build ended early (a failure or an interrupt between two stages): the lease the
        claim took and no stage kept yet is released too, so the next identical run starts at once."""
        if self._held is not None:
            self._leave(sys.exc_info()[1])
        elif not (self._taken or self.hand_on) and state.lease is not None:
            from neuronforge.artifacts import leases

            leases.release(ctx.store, state.lease.lease())

    def _leave(self, exc: BaseException | None) -> None:
        held, self._held = self._held, None
        if held is None:
            return
        if exc is None:
            held.__exit__(None, None, None)  # hand_on: proves the lease still ours, or raises LeaseLost
        else:
            held.__exit__(type(exc), exc, exc.__traceback__ or sys.exc_info()[2])


def default_hooks() -> tuple[StageHooks, ...]:
    """What every run of a stage records: its host timing, its transfers and, when it fails, its failure."""
    return (HostTiming(), TransferLog(), FailureRecords())
