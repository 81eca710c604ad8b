"""neuronforge_compile_publish: checkpoint -> plan -> quantize -> compile -> smoke test -> publish.

Only wiring: the stages are declared once in `neuronforge.pipeline.runner.STAGES` (the CLI runs the same
list); `neuronforge_airflow/operators/compile_publish.py` turns each into a task. Each target of a run is one mapped
instance of the task group of its serving profile's toolchain queue (`cpu_target` on the default
queue; `neuron_2_26_1_target`, whose toolchain stages go to `neuron-compile-2.26.1` and whose smoke
test goes to `neuron-2.26.1`, …), so targets are independent: one failing target does not stop the
others from publishing. The first task, `expand_targets`, looks every target up in the store's
index: a target already published is reported there ("cache hit", its Asset event emitted) and goes
no further, and only the `tickets_*` tasks of queues with a target left to build run — a run whose
targets are all published ends after its first task, every other task skipped.
Tasks hand each other store references, so any worker may run any task.
"""

from __future__ import annotations

import pendulum
from airflow.sdk import dag, task_group

from neuronforge.common.deployment_names import COMPILE_DAG
from neuronforge.pipeline.runner import STAGES
from neuronforge_airflow.operators.build_claim import ClaimBuildOperator
from neuronforge_airflow.operators.compile_publish import (
    DEFAULT_QUEUE,
    expand_targets,
    group_id,
    placements,
    queues,
    stage_task,
    tickets_for,
)
from neuronforge_airflow.operators.kubernetes import pod_tasks, runner
from neuronforge_airflow.params import PARAMS, with_form


def _chain(state, queue: str, pods: dict | None = None):
    """The stages in declaration order, each placed as the group's profiles place its kind; or the
    toolchain stages in pods (`pods`)."""
    where = placements(queue)
    for stage in STAGES:
        if stage.run is None:  # the claim: deferred while another run holds the lease
            state = ClaimBuildOperator(task_id=stage.name, ticket=state).output
        elif pods and stage.name in pods:
            state = pods[stage.name](state)
        else:
            state = stage_task(stage, where[stage.kind])(state)
    return state


def target_group(queue: str):
    """One mapped task group per toolchain queue. A Neuron SDK release's group: toolchain detection
    and compile on the CPU workers of that release's image (`neuron-compile-<release>`, no devices),
    the smoke test alone on its Neuron hosts (`neuron-<release>`, NeuronCores from the pool); or,
    with NEURONFORGE_NEURON_RUNNER=kubernetes, those stages in pods of the release's image (CPU
    pods, and Neuron device requests for the smoke pod only)."""

    def targets(ticket):
        if queue != DEFAULT_QUEUE and runner() == "kubernetes":
            return _chain(ticket, queue, pod_tasks(queue))
        return _chain(ticket, queue)

    targets.__doc__ = f"The targets whose serving profile routes to queue {queue!r}."
    return task_group(group_id=group_id(queue))(targets)


@dag(
    dag_id=COMPILE_DAG,
    schedule=None,
    start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
    catchup=False,
    max_active_runs=4,
    tags=["neuronforge"],
    doc_md=__doc__,
)
def neuronforge_compile_publish():
    outcome = expand_targets()  # follows only the tickets_* tasks of queues with a target to build
    for queue in queues():  # one group per queue any registered profile routes to
        target_group(queue).expand(ticket=tickets_for(queue)(outcome))


with_form(neuronforge_compile_publish(), PARAMS)  # the form: on the DAG, not copied into its tasks
