"""neuronforge_compile_publish: checkpoint -> plan -> quantize -> compile -> smoke test -> publish.

Only wiring: the stages are declared once in `neuronforge.pipeline.STAGES` (the CLI runs the same
list); `operators/compile_publish.py` turns each into a task. Each target of a run is one mapped
instance of the task group of its serving profile's queue (`cpu_target` on the default queue;
`neuron_2_26_1_target`, whose worker stages go to queue `neuron-2.26.1`, …), so targets
are independent: one failing target does not stop the others from publishing.
Tasks hand each other store references, so any worker may run any task.
"""

from __future__ import annotations

import pendulum
from airflow.sdk import dag, task_group

from neuronforge.pipeline import STAGES
from operators.build_claim import ClaimBuildOperator
from operators.compile_params import PARAMS
from operators.compile_publish import DEFAULT_QUEUE, expand_targets, group_id, queues, stage_task, tickets_for
from operators.kubernetes import pod_tasks, runner


def _chain(state, queue: str, pods: dict | None = None):
    """The stages in declaration order; worker stages on `queue`, or in pods (`pods`)."""
    for stage in STAGES:
        if stage.run is None:  # the claim: deferred while another run holds the lease
            state = ClaimBuildOperator(task_id=stage.name, ticket=state).output
        elif pods and stage.name in pods:
            state = pods[stage.name](state)
        else:
            state = stage_task(stage, queue if stage.on_backend_worker else DEFAULT_QUEUE)(state)
    return state


def target_group(queue: str):
    """One mapped task group per queue. Neuron queues (`neuron-<sdk release>`): toolchain detection,
    compile and smoke on the workers of that SDK release, so the key and the plan's toolchain check
    use what those workers have; or, with NEURONFORGE_NEURON_RUNNER=kubernetes, compile and smoke in
    pods of the neuron worker image."""

    def targets(ticket):
        if queue != DEFAULT_QUEUE and runner() == "kubernetes":
            compile_pod, smoke_pod = pod_tasks(queue)
            return _chain(ticket, queue, {"compile_graphs": compile_pod, "smoke": smoke_pod})
        return _chain(ticket, queue)

    targets.__doc__ = f"The targets whose serving profile routes to queue {queue!r}."
    return task_group(group_id=group_id(queue))(targets)


@dag(
    dag_id="neuronforge_compile_publish",
    schedule=None,
    start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
    catchup=False,
    max_active_runs=4,
    tags=["neuronforge"],
    doc_md=__doc__,
    params=PARAMS,
)
def neuronforge_compile_publish():
    tickets = expand_targets()
    for queue in queues():  # one group per queue any registered profile routes to
        target_group(queue).expand(ticket=tickets_for(queue)(tickets))


neuronforge_compile_publish()
