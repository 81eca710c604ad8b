"""The Kubernetes runner setting: the Neuron targets' toolchain stages as pods of the SDK's worker image,
requesting Neuron devices only where the stage needs them."""

from __future__ import annotations

from pathlib import Path

import pytest

from neuronforge.common.errors import InvalidInput
from neuronforge.spec.target import TargetSpec
from neuronforge_airflow.operators.kubernetes import NEURON_RESOURCE, neuron_devices, runner


def _t(instance: str, tp: int, **kw) -> TargetSpec:
    return TargetSpec.parse(
        {"instance_type": instance, "tp_degree": tp, "sequence_length": 64, "profile": "vllm-neuron@2.26.1", **kw}
    )


def test_device_requests_follow_the_target() -> None:
    assert neuron_devices(_t("inf2.xlarge", 1)) == 1
    assert neuron_devices(_t("inf2.48xlarge", 24)) == 12
    assert neuron_devices(_t("trn1.32xlarge", 8)) == 4
    assert neuron_devices(_t("trn2.48xlarge", 4)) == 1  # 4 logical cores at LNC 2 = 8 physical = 1 device
    assert neuron_devices(_t("trn2.48xlarge", 64)) == 16


def test_unknown_runner_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NEURONFORGE_NEURON_RUNNER", "slurm")
    with pytest.raises(InvalidInput, match="use one of"):
        runner()


def test_kubernetes_runner_makes_neuron_tasks_pods(airflow_db: str, monkeypatch: pytest.MonkeyPatch) -> None:
    from airflow.dag_processing.dagbag import DagBag
    from airflow.providers.cncf.kubernetes.operators.pod import KubernetesPodOperator

    monkeypatch.setenv("NEURONFORGE_NEURON_RUNNER", "kubernetes")
    monkeypatch.setenv("NEURONFORGE_NEURON_IMAGE", "123.dkr.ecr.us-east-1.amazonaws.com/nf-neuron:{sdk}")
    bag = DagBag(dag_folder=str(Path(__file__).resolve().parents[2] / "dags"))
    assert bag.import_errors == {}
    tasks = {t.task_id: t for t in bag.dags["neuronforge_compile_publish"].tasks}
    # The smoke test loads on Neuron devices: a pod requesting them, sized per target, in the pool.
    smoke = tasks["neuron_2_26_1_target.smoke"]
    assert isinstance(smoke, KubernetesPodOperator) and smoke.pool == "neuron_cores"
    assert smoke.image == "123.dkr.ecr.us-east-1.amazonaws.com/nf-neuron:2.26.1"
    limit = smoke.container_resources["limits"][NEURON_RESOURCE]
    assert "neuron_2_26_1_target.prepare" in limit and "['neuron_devices']" in limit
    # Toolchain detection and the compile are CPU pods of the same image: no device, no pool, so no
    # Celery worker of a Neuron queue is needed at all.
    for name in ("prepare", "compile_graphs"):
        pod = tasks[f"neuron_2_26_1_target.{name}"]
        assert isinstance(pod, KubernetesPodOperator) and pod.pool == "default_pool"
        assert pod.image == "123.dkr.ecr.us-east-1.amazonaws.com/nf-neuron:2.26.1"
        assert NEURON_RESOURCE not in str(pod.container_resources or "")
    # transformers-neuronx (LMI) compiles where it can load: its compile pod requests devices.
    lmi = tasks["neuron_2_21_1_target.compile_graphs"]
    assert lmi.pool == "neuron_cores" and NEURON_RESOURCE in str(lmi.container_resources)
    for name in ("prepare", "compile_graphs", "smoke"):
        assert not isinstance(tasks[f"cpu_target.{name}"], KubernetesPodOperator)
    # The pod runs the Celery task's body: a build state that hit the index passes through untouched.
    from neuronforge.pipeline.buildstate import BuildState, PublishedRef
    from neuronforge.spec.target import TargetSpec

    target = TargetSpec.parse(
        {"instance_type": "inf2.xlarge", "tp_degree": 2, "sequence_length": 64, "profile": "vllm-neuron@2.26.1"}
    )
    hit = BuildState(
        model="org/m", target=target, store_uri="s3://b", hit=PublishedRef(manifest_uri="s3://b/m.json", prefix="m")
    ).model_dump(mode="json")
    assert tasks["neuron_2_26_1_target.compile_graphs"].python_callable(hit) == hit


def test_pods_mode_needs_no_celery_worker_of_a_neuron_queue(airflow_db: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The recompile DAG's toolchain detection (`watch_toolchain_*`, what the compile DAG's `prepare`
    does per target) runs as a CPU pod of the SDK image too, and `check_workers` does not hold it back
    for want of a Celery worker on the Neuron queue, even under the CeleryExecutor."""
    from types import SimpleNamespace

    from airflow.dag_processing.dagbag import DagBag
    from airflow.providers.cncf.kubernetes.operators.pod import KubernetesPodOperator

    from neuronforge.profiles import neuron_queues
    from neuronforge_airflow.operators import recompile

    monkeypatch.setenv("NEURONFORGE_NEURON_RUNNER", "kubernetes")
    monkeypatch.delenv("NEURONFORGE_NEURON_IMAGE", raising=False)
    bag = DagBag(dag_folder=str(Path(__file__).resolve().parents[2] / "dags" / "neuronforge_recompile_on_upgrade.py"))
    assert bag.import_errors == {}
    tasks = {t.task_id: t for t in bag.dags["neuronforge_recompile_on_upgrade"].tasks}
    watch = tasks["watch_toolchain_neuron_compile_2_26_1"]
    assert isinstance(watch, KubernetesPodOperator) and watch.image == "neuronforge-neuron-worker:2.26.1"
    assert watch.queue == "default" and watch.pool == "default_pool"  # no Neuron queue, no NeuronCores
    assert NEURON_RESOURCE not in str(watch.container_resources or "")
    assert list(watch.op_args) == ["neuron-compile-2.26.1"]  # the pod detects that queue's profiles

    # check_workers under Celery with no worker at all: every needed queue is served by its pods
    pushed: dict = {}
    ti = SimpleNamespace(xcom_push=lambda key, value: pushed.update({key: value}))
    context = {"dag_run": SimpleNamespace(conf={}), "params": {}, "ti": ti}
    monkeypatch.setattr(recompile, "get_current_context", lambda: context)
    monkeypatch.setenv("AIRFLOW__CORE__EXECUTOR", "CeleryExecutor")
    branches = recompile.check_workers.function()
    queues = recompile.needed_queues(None)
    assert queues and set(queues) <= set(neuron_queues())
    assert set(branches) == {*(recompile.watch_task_id(q) for q in queues), "find_stale"}
    for queue in queues:
        image = f"neuronforge-neuron-worker:{queue.removeprefix('neuron-compile-').removeprefix('neuron-')}"
        assert pushed[recompile.WORKERS_XCOM][queue] == {
            "served": True,
            "detail": f"NEURONFORGE_NEURON_RUNNER=kubernetes: a pod of {image} runs its watch, no worker needed",
        }
