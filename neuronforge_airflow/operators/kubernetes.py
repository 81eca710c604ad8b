"""The toolchain stages of Neuron targets as Kubernetes pods: a per-deployment alternative to Celery
workers on queues `neuron-compile-<sdk release>` and `neuron-<sdk release>`.

With `NEURONFORGE_NEURON_RUNNER=kubernetes` the stages of each Neuron group (`neuron_2_26_1_target`,
…) that need the SDK — `prepare` (toolchain detection), `compile_graphs`, `smoke` — are
KubernetesPodOperators (`@task.kubernetes`) running the neuron worker image of that SDK release
(`NEURONFORGE_NEURON_IMAGE`, `{sdk}` replaced by the release; built from
docker/neuron-worker.Dockerfile with NEURON_SDK_VERSION=<release>), in `NEURONFORGE_K8S_NAMESPACE`,
shaped by an optional pod template (`NEURONFORGE_K8S_POD_TEMPLATE`: service account, the shared
work-dir volume, store credentials). Placed as the profile places them: a stage that needs
NeuronCores (the smoke test; compiling only where the toolchain needs a device) requests
`aws.amazon.com/neuron` devices sized for the target (tp × logical-core size over the cores per
device) and takes pool slots; the others are CPU pods that request no device, so they schedule on
CPU nodes. So no Celery worker of a Neuron queue is needed at all. Each pod runs the same stage as
the Celery task (`neuronforge_airflow.operators.compile_publish.run_stage_task`).
"""

from __future__ import annotations

from typing import Any

from neuronforge.common import settings
from neuronforge.compilation.devices import CORES_PER_DEVICE, neuron_devices  # noqa: F401 (re-exported)

RUNNERS = settings.RUNNERS
POD_HOME = "/var/lib/neuronforge"  # the pods' NEURONFORGE_HOME unless the scheduler's names one
NEURON_RESOURCE = "aws.amazon.com/neuron"
# The neuron worker image of a release as docker/compose.yaml tags it (`neuronforge-neuron-worker:
# ${NEURON_SDK_VERSION}`): the default of NEURONFORGE_NEURON_IMAGE in neuronforge.common.settings, the one name of that
# image (tests/test_docker.py checks they agree).
DEFAULT_IMAGE: str = settings.default("neuron_image")


def runner() -> str:
    """NEURONFORGE_NEURON_RUNNER: one of RUNNERS (another value: InvalidInput)."""
    return settings.current().neuron_runner


def _devices_template(group: str) -> str:
    # Rendered per mapped task: the device count the prepare task of the same target recorded.
    return f"{{{{ ti.xcom_pull(task_ids='{group}.prepare', map_indexes=ti.map_index)['neuron_devices'] }}}}"


def release_of(queue: str) -> str:
    """The SDK release of a Neuron queue: `neuron-compile-2.26.1` and `neuron-2.26.1` -> `2.26.1`."""
    return queue.removeprefix("neuron-compile-").removeprefix("neuron-")


def image_for(sdk_release: str) -> str:
    """The worker image of an SDK release: NEURONFORGE_NEURON_IMAGE with `{sdk}` replaced."""
    return settings.current().neuron_image.replace("{sdk}", sdk_release)


def pod_settings(group: str, sdk_release: str, neuron_cores: bool) -> dict[str, Any]:
    """KubernetesPodOperator arguments of one toolchain stage's pods in one Neuron group: Neuron
    device requests only for a stage that needs NeuronCores (a CPU pod otherwise)."""
    s = settings.current()
    options: dict[str, Any] = {
        "image": image_for(sdk_release),
        "namespace": s.k8s_namespace,
        # the pods' own work dir: the scheduler's NEURONFORGE_HOME when set, never this checkout's default
        "env_vars": {settings.variable("home"): str(s.home) if s.from_env("home") else POD_HOME},
        "get_logs": True,
        "on_finish_action": "delete_succeeded_pod",
    }
    if neuron_cores:
        devices = _devices_template(group)
        options["container_resources"] = {"requests": {NEURON_RESOURCE: devices}, "limits": {NEURON_RESOURCE: devices}}
    if s.k8s_pod_template:
        options["pod_template_file"] = s.k8s_pod_template
    return options


# `@task.kubernetes` runs a function's own source in the pod (no closures): one function per stage.
def _prepare(state: dict[str, Any]) -> dict[str, Any]:
    from neuronforge_airflow.operators.compile_publish import run_stage_task

    return run_stage_task("prepare", state)


def _compile_graphs(state: dict[str, Any]) -> dict[str, Any]:
    from neuronforge_airflow.operators.compile_publish import run_stage_task

    return run_stage_task("compile_graphs", state)


def _smoke(state: dict[str, Any]) -> dict[str, Any]:
    from neuronforge_airflow.operators.compile_publish import run_stage_task

    return run_stage_task("smoke", state)


def _register_hub_cache(state: dict[str, Any]) -> dict[str, Any]:
    from neuronforge_airflow.operators.compile_publish import run_stage_task

    return run_stage_task("register_hub_cache", state)


POD_BODIES = {
    "prepare": _prepare,
    "compile_graphs": _compile_graphs,
    "smoke": _smoke,
    "register_hub_cache": _register_hub_cache,
}


def pod_tasks(queue: str) -> dict[str, Any]:
    """Stage name -> its `@task.kubernetes` task, for the stages of toolchain queue `queue`'s group
    that need the SDK (every stage with a kind); each runs in a pod of that release's image."""
    from airflow.sdk import task

    from neuronforge.pipeline.runner import STAGES
    from neuronforge_airflow.operators.compile_publish import POOL, group_id, placements

    where = placements(queue)
    release = release_of(queue)
    tasks = {}
    for stage in (s for s in STAGES if s.kind is not None):
        placement = where[stage.kind]
        options = pod_settings(group_id(queue), release, placement.neuron_cores)
        if placement.neuron_cores:
            options["pool"] = POOL
        tasks[stage.name] = task.kubernetes(task_id=stage.name, **options)(POD_BODIES[stage.name])
    return tasks
