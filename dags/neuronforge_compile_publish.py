"""neuronforge_compile_publish: checkpoint -> plan -> quantize -> compile -> smoke test -> publish.

Only wiring: the stages are declared once in `neuronforge.pipeline.STAGES` (the CLI runs the same
list); `operators/compile_publish.py` turns each into a task. Each target of a run is one mapped
instance of a task group (`cpu_target`, or `neuron_target` whose backend stages go to the `neuron`
queue), so targets are independent: one failing target does not stop the others from publishing.
Tasks hand each other store references, so any worker may run any task.
"""

from __future__ import annotations

import pendulum
from airflow.sdk import dag, task_group

from neuronforge.pipeline import STAGES
from operators.build_claim import ClaimBuildOperator
from operators.compile_params import PARAMS
from operators.compile_publish import (
    NEURON_QUEUE,
    cpu_tickets,
    expand_targets,
    neuron_tickets,
    stage_task,
)
from operators.kubernetes import pod_tasks, runner


def _chain(state, queue: str, pods: dict | None = None):
    """The stages in declaration order; backend stages on `queue`, or in pods (`pods`)."""
    for stage in STAGES:
        if stage.run is None:  # the claim: deferred while another run holds the lease
            state = ClaimBuildOperator(task_id=stage.name, ticket=state).output
        elif pods and stage.name in pods:
            state = pods[stage.name](state)
        else:
            state = stage_task(stage, queue if stage.on_backend_worker else "default")(state)
    return state


@task_group
def cpu_target(ticket):
    """Targets of the cpu backend: every stage on the default queue."""
    return _chain(ticket, "default")


@task_group
def neuron_target(ticket):
    """Targets of the Neuron backends: toolchain detection, compile and smoke on Neuron workers
    (queue `neuron`), so the key and the plan's toolchain check use what those workers have; or,
    with NEURONFORGE_NEURON_RUNNER=kubernetes, compile and smoke in pods of the neuron worker image."""
    if runner() == "kubernetes":
        compile_pod, smoke_pod = pod_tasks()
        return _chain(ticket, NEURON_QUEUE, {"compile_graphs": compile_pod, "smoke": smoke_pod})
    return _chain(ticket, NEURON_QUEUE)


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
    cpu_target.expand(ticket=cpu_tickets(tickets))
    neuron_target.expand(ticket=neuron_tickets(tickets))


neuronforge_compile_publish()
