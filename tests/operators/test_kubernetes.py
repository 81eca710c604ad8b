"""The Kubernetes runner setting: Neuron compile and smoke as pods of the neuron worker image."""

from __future__ import annotations

from pathlib import Path

import pytest

from neuronforge.errors import InvalidInput
from neuronforge.target import TargetSpec
from operators.kubernetes import NEURON_RESOURCE, neuron_devices, runner


def _t(instance: str, tp: int, **kw) -> TargetSpec:
    return TargetSpec.parse(
        {"instance_type": instance, "tp_degree": tp, "sequence_length": 64, "profile": "vllm-neuron", **kw}
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
    for name in ("compile_graphs", "smoke"):
        pod = tasks[f"neuron_2_26_1_target.{name}"]
        assert isinstance(pod, KubernetesPodOperator) and pod.pool == "neuron_cores"
        assert pod.image == "123.dkr.ecr.us-east-1.amazonaws.com/nf-neuron:2.26.1"
        limit = pod.container_resources["limits"][NEURON_RESOURCE]
        assert "neuron_2_26_1_target.prepare" in limit and "['neuron_devices']" in limit
        assert not isinstance(tasks[f"cpu_target.{name}"], KubernetesPodOperator)
    # The pod runs the Celery task's body: a build state that hit the index passes through untouched.
    from neuronforge.buildstate import BuildState, PublishedRef
    from neuronforge.target import TargetSpec

    target = TargetSpec.parse(
        {"instance_type": "inf2.xlarge", "tp_degree": 2, "sequence_length": 64, "profile": "vllm-neuron"}
    )
    hit = BuildState(
        model="org/m", target=target, store_uri="s3://b", hit=PublishedRef(manifest_uri="s3://b/m.json", prefix="m")
    ).model_dump(mode="json")
    assert tasks["neuron_2_26_1_target.compile_graphs"].python_callable(hit) == hit
