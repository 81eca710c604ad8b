"""neuronforge_compile_publish: checkpoint -> plan -> compile -> cache -> smoke test -> publish.

Only wiring: the tasks live in `operators/compile_publish.py`, the logic in `neuronforge/`.
Each target of a run is one mapped instance of a task group (`cpu_target`, or `neuron_target` whose
compile and smoke tasks go to the `neuron` queue), so targets are independent: one failing target
does not stop the others from publishing.
"""

from __future__ import annotations

import pendulum
from airflow.sdk import Param, dag, task_group

from neuronforge import settings
from neuronforge.stages.publish import FORMATS
from operators.build_claim import ClaimBuildOperator
from operators.compile_publish import (
    NEURON_QUEUE,
    TARGET_SCHEMA,
    compile_graphs,
    cpu_tickets,
    expand_targets,
    fetch_checkpoint,
    neuron_tickets,
    plan_target,
    prepare,
    publish_artifact,
    quantize_weights,
    smoke,
    sync_compile_cache,
)
from operators.kubernetes import pod_tasks, runner


def _chain(ticket, prepare_task, compile_task, smoke_task):
    t = prepare_task(ticket)
    # Take the target's compile lease, or wait (deferred, no worker slot) for whoever holds it.
    t = ClaimBuildOperator(task_id="claim_build", ticket=t).output
    t = fetch_checkpoint(t)
    t = plan_target(t)
    t = quantize_weights(t)
    t = compile_task(t)
    t = sync_compile_cache(t)
    t = smoke_task(t)
    return publish_artifact(t)


@task_group
def cpu_target(ticket):
    """Targets of the cpu backend: compile and smoke on the default queue."""
    return _chain(ticket, prepare, compile_graphs, smoke)


@task_group
def neuron_target(ticket):
    """Targets of the Neuron backends: toolchain detection, compile and smoke on Neuron workers
    (queue `neuron`), so the key and the plan's toolchain check use what those workers have; or,
    with NEURONFORGE_NEURON_RUNNER=kubernetes, compile and smoke in pods of the neuron worker image."""
    if runner() == "kubernetes":
        compile_pod, smoke_pod = pod_tasks()
        return _chain(ticket, prepare.override(queue=NEURON_QUEUE), compile_pod, smoke_pod)
    return _chain(
        ticket,
        prepare.override(queue=NEURON_QUEUE),
        compile_graphs.override(queue=NEURON_QUEUE),
        smoke.override(queue=NEURON_QUEUE),
    )


@dag(
    dag_id="neuronforge_compile_publish",
    schedule=None,
    start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
    catchup=False,
    max_active_runs=4,
    tags=["neuronforge"],
    doc_md=__doc__,
    params={
        "model": Param(
            "",
            type="string",
            title="Model",
            description="org/name[@revision], s3://bucket/prefix or a folder; empty: the embedded tiny Llama",
        ),
        "targets": Param(
            [settings.DEFAULT_TARGET],
            type="array",
            minItems=1,
            items=TARGET_SCHEMA,
            title="Targets",
            description="One compile per target (instance, tp, batch size, sequence length, dtype, quantization)",
        ),
        "backend": Param("cpu", type="string", enum=["cpu", "optimum", "nxdi"], title="Backend"),
        "publish_formats": Param(
            ["optimum"],
            type="array",
            items={"type": "string", "enum": list(FORMATS)},
            title="Publish formats",
            description="optimum: the compiled model; lmi: serving.properties + split model; tnx: older Optimum layout",
        ),
        "store": Param("", type="string", title="Store URI", description="empty: NEURONFORGE_STORE or the local store"),
        "prompts": Param(
            ["Hello, my name is", "The capital of France is"],
            type="array",
            minItems=1,
            items={"type": "string", "minLength": 1},
            title="Smoke-test prompts",
        ),
        "max_new_tokens": Param(8, type="integer", minimum=1, maximum=256, title="Smoke-test tokens"),
    },
)
def neuronforge_compile_publish():
    tickets = expand_targets()
    cpu_target.expand(ticket=cpu_tickets(tickets))
    neuron_target.expand(ticket=neuron_tickets(tickets))


neuronforge_compile_publish()
