"""Neuron compile and smoke tasks as Kubernetes pods: a per-deployment alternative to Celery
workers on queue `neuron-<sdk release>`.

With `NEURONFORGE_NEURON_RUNNER=kubernetes` the compile and smoke tasks of each Neuron queue's group
(`neuron_2_26_1_target`, …) are KubernetesPodOperators (`@task.kubernetes`) running the neuron
worker image of that SDK release (`NEURONFORGE_NEURON_IMAGE`, `{sdk}` replaced by the release;
built from docker/neuron-worker.Dockerfile with NEURON_SDK_VERSION=<release>) with
`aws.amazon.com/neuron` device requests sized for the target (tp × logical-core size over the
cores per device), in `NEURONFORGE_K8S_NAMESPACE`, shaped by an optional pod template
(`NEURONFORGE_K8S_POD_TEMPLATE`: service account, the shared work-dir volume, store credentials).
The pod runs the same stage as the Celery task (`operators.compile_publish.run_stage_task`).
"""

from __future__ import annotations

import os
from typing import Any

from neuronforge.devices import CORES_PER_DEVICE, neuron_devices  # noqa: F401 (re-exported)
from neuronforge.errors import InvalidInput

RUNNERS = ("celery", "kubernetes")
NEURON_RESOURCE = "aws.amazon.com/neuron"
DEFAULT_IMAGE = "neuronforge-neuron-worker:{sdk}"


def runner() -> str:
    value = os.environ.get("NEURONFORGE_NEURON_RUNNER", "celery")
    if value not in RUNNERS:
        raise InvalidInput(f"NEURONFORGE_NEURON_RUNNER={value!r}; use one of {list(RUNNERS)}")
    return value


def _devices_template(group: str) -> str:
    # Rendered per mapped task: the device count the prepare task of the same target recorded.
    return f"{{{{ ti.xcom_pull(task_ids='{group}.prepare', map_indexes=ti.map_index)['neuron_devices'] }}}}"


def image_for(sdk_release: str) -> str:
    """The worker image of an SDK release: NEURONFORGE_NEURON_IMAGE with `{sdk}` replaced."""
    return os.environ.get("NEURONFORGE_NEURON_IMAGE", DEFAULT_IMAGE).replace("{sdk}", sdk_release)


def pod_settings(group: str, sdk_release: str) -> dict[str, Any]:
    """KubernetesPodOperator arguments shared by the compile and smoke pods of one queue's group."""
    devices = _devices_template(group)
    settings: dict[str, Any] = {
        "image": image_for(sdk_release),
        "namespace": os.environ.get("NEURONFORGE_K8S_NAMESPACE", "airflow"),
        "container_resources": {"requests": {NEURON_RESOURCE: devices}, "limits": {NEURON_RESOURCE: devices}},
        "env_vars": {"NEURONFORGE_HOME": os.environ.get("NEURONFORGE_HOME", "/var/lib/neuronforge")},
        "get_logs": True,
        "on_finish_action": "delete_succeeded_pod",
    }
    if os.environ.get("NEURONFORGE_K8S_POD_TEMPLATE"):
        settings["pod_template_file"] = os.environ["NEURONFORGE_K8S_POD_TEMPLATE"]
    return settings


def pod_tasks(queue: str):
    """(compile, smoke) of queue `neuron-<sdk release>`'s group as `@task.kubernetes` tasks; their
    stages run in a pod of that release's image."""
    from airflow.sdk import task

    from operators.compile_publish import POOL, group_id

    settings = pod_settings(group_id(queue), queue.removeprefix("neuron-"))

    @task.kubernetes(task_id="compile_graphs", pool=POOL, **settings)
    def compile_graphs(state: dict[str, Any]) -> dict[str, Any]:
        from operators.compile_publish import run_stage_task

        return run_stage_task("compile_graphs", state)

    @task.kubernetes(task_id="smoke", pool=POOL, **settings)
    def smoke(state: dict[str, Any]) -> dict[str, Any]:
        from operators.compile_publish import run_stage_task

        return run_stage_task("smoke", state)

    return compile_graphs, smoke
