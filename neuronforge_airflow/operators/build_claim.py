"""The DAG's side of compile leases: `claim_build` takes the target's lease or, while another run
holds it, defers to the triggerer (no worker slot held) until that run publishes — then the target
is a cache hit — or its lease lapses, and then tries again. See `neuronforge/artifacts/leases.py`."""

from __future__ import annotations

import logging
from typing import Any

from neuronforge.artifacts import leases
from neuronforge.common import settings

# the trigger's classpath before it moved to triggers/: a task deferred by an earlier release is stored with it
from neuronforge_airflow.operators.base import NeuronforgeOperator
from neuronforge_airflow.triggers.build_finished import BuildFinishedTrigger

log = logging.getLogger(__name__)


def poll_s() -> float:
    """How often a waiting target looks at the store (NEURONFORGE_LEASE_POLL_S, default 10 s)."""
    return settings.current().lease_poll_s


class ClaimBuildOperator(NeuronforgeOperator):
    """Passes a hit through; otherwise returns the build state with `lease` (this run builds) or
    `hit` (another run built it while this one waited, deferred)."""

    template_fields = ("ticket",)

    def __init__(self, *, ticket: Any, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.ticket = ticket  # the prepare task's BuildState (JSON), rendered from its XCom

    def _state(self):
        from neuronforge.pipeline.buildstate import BuildState

        return BuildState.model_validate(self.ticket)

    def _claim(self, context: Any) -> dict[str, Any]:
        from neuronforge.artifacts import farm_index
        from neuronforge.pipeline.buildstate import LeaseRef

        state = self._state()
        key = state.need("key")
        holder = f"airflow:{context['run_id']}:{self.task_id}[{context['ti'].map_index}]:{leases.holder_id()}"
        store = self.hook.get_conn(state.store_uri)
        # held for the run's next task: this task's process ends now (no process of ours holds it)
        lease = leases.try_acquire(store, key, holder, leases.handoff_s(), bound=False)
        if lease is not None:
            farm_index.announce(store, lease, state)
            log.info("lease %s taken: this run builds %s", key[:12], state.target.slug)
            return state.model_copy(update={"lease": LeaseRef.of(lease)}).model_dump(mode="json")
        log.info("another run is building %s; waiting (deferred) for its artifact", key[:12])
        self.defer(trigger=BuildFinishedTrigger(state.store_uri, key, poll_s()), method_name="resume")
        raise AssertionError("unreachable: defer() raises")

    def run(self, context: Any) -> dict[str, Any]:
        if self._state().hit is not None:
            return self.ticket
        return self._claim(context)

    def resume(self, context: Any, event: dict[str, Any] | None = None) -> dict[str, Any]:
        with self.policy():
            if event and event.get("status") == "published":
                from neuronforge.pipeline.buildstate import PublishedRef

                log.info("built by another run: %s", event["hit"]["manifest_uri"])
                hit = PublishedRef.model_validate(event["hit"])
                return self._state().model_copy(update={"hit": hit}).model_dump(mode="json")
            return self._claim(context)  # the holder finished without publishing or died: try to take over
