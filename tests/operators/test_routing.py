"""pool_slots = tp for Neuron compile / smoke task instances, through the cluster policy hook."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from neuronforge_airflow.policies.routing import DAG_ID, pool_slots_for, task_instance_mutation_hook

CONF = {"targets": [{"tp_degree": 8}, {"tp_degree": 2}], "profile": "vllm-neuron@2.26.1"}
# Per-target backends (as the recompile DAG sends them): the neuron group maps only the Neuron ones.
MIXED = {
    "targets": [
        {"tp_degree": 1},
        {"tp_degree": 8, "profile": "vllm-neuron@2.26.1"},
        {"tp_degree": 2, "profile": "optimum-neuron"},
    ]
}
LMI = {"targets": [{"tp_degree": 2, "profile": "lmi-neuronx"}]}


@pytest.mark.parametrize(
    ("task_id", "map_index", "conf", "expected"),
    [
        ("neuron_2_26_1_target.compile_graphs", 0, CONF, None),  # compiles on a CPU worker: no NeuronCores
        ("neuron_2_26_1_target.smoke", 0, CONF, 8),
        ("neuron_2_26_1_target.smoke", 1, CONF, 2),
        ("neuron_2_21_1_target.compile_graphs", 0, LMI, 2),  # transformers-neuronx compiles on a Neuron host
        ("neuron_2_26_1_target.fetch_checkpoint", 0, CONF, None),  # not a NeuronCore user
        ("cpu_target.compile_graphs", 0, CONF, None),
        ("neuron_2_26_1_target.compile_graphs", -1, CONF, None),  # not yet expanded
        ("neuron_2_26_1_target.compile_graphs", 5, CONF, None),  # beyond the conf: leave as declared
        ("neuron_2_26_1_target.compile_graphs", 0, {}, None),  # defaults from the form's Params
        (
            "neuron_2_26_1_target.compile_graphs",
            0,
            {"targets": [{"tp_degree": "8", "profile": "vllm-neuron@2.26.1"}]},
            None,
        ),
        ("neuron_2_26_1_target.smoke", 0, MIXED, 8),
        ("neuron_2_26_1_target.smoke", 1, MIXED, 2),
        ("neuron_2_26_1_target.smoke", 2, MIXED, None),
    ],
)
def test_pool_slots_follow_the_targets_tp(task_id, map_index, conf, expected) -> None:
    assert pool_slots_for(task_id, map_index, conf) == expected


def test_pool_slots_follow_the_groups_tickets_when_hits_left_the_run() -> None:
    """Map index i is the group's i-th ticket: the targets the first task found published are not
    in it, so the conf's order would size the wrong target."""
    tickets = [{"target": {"tp_degree": 2, "profile": "vllm-neuron@2.26.1"}}]  # CONF's tp-8 target was a hit
    assert pool_slots_for("neuron_2_26_1_target.smoke", 0, CONF) == 8
    assert pool_slots_for("neuron_2_26_1_target.smoke", 0, CONF, tickets) == 2
    assert pool_slots_for("neuron_2_26_1_target.smoke", 1, CONF, tickets) is None
    assert pool_slots_for("neuron_2_26_1_target.compile_graphs", 0, CONF, tickets) is None  # a CPU worker's


def test_hook_mutates_only_this_dags_sized_task_instances() -> None:
    ti = SimpleNamespace(dag_id=DAG_ID, task_id="neuron_2_26_1_target.smoke", map_index=0, pool_slots=1)
    task_instance_mutation_hook(ti, dag_run=SimpleNamespace(conf=CONF))
    assert ti.pool_slots == 8
    other = SimpleNamespace(dag_id="other", task_id="neuron_2_26_1_target.smoke", map_index=0, pool_slots=1)
    task_instance_mutation_hook(other, dag_run=SimpleNamespace(conf=CONF))
    assert other.pool_slots == 1
    early = SimpleNamespace(dag_id=DAG_ID, task_id="neuron_2_26_1_target.smoke", map_index=1, pool_slots=1)
    task_instance_mutation_hook(early, dag_run=None)  # before the instance is bound to a run
    assert early.pool_slots == 1


def test_airflow_loads_the_policy_from_airflow_home(tmp_path) -> None:
    """Installed as documented, Airflow's own settings pick the hook up."""
    import os
    import shutil
    import subprocess
    import sys
    from pathlib import Path

    repo = Path(__file__).resolve().parents[2]
    (tmp_path / "config").mkdir()
    shutil.copy(repo / "docker" / "airflow_local_settings.py", tmp_path / "config" / "airflow_local_settings.py")
    code = (
        "import airflow.settings as s; "
        "print(s.task_instance_mutation_hook.is_noop, "
        "[h.plugin_name for h in s.get_policy_plugin_manager().hook.task_instance_mutation_hook.get_hookimpls()])"
    )
    env = {**os.environ, "AIRFLOW_HOME": str(tmp_path)}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False ['AirflowLocalSettingsPolicy']"


def test_deployment_record_names_the_pool_and_who_saw_it() -> None:
    from datetime import UTC, datetime

    from neuronforge_airflow.policies.routing import deployment_record

    at = datetime(2026, 5, 1, tzinfo=UTC)
    assert deployment_record(None, "d", "r", now=at) == {
        "policy": "neuronforge_airflow.policies.routing.task_instance_mutation_hook",
        "pools": {"neuron_cores": None},
        "dag_id": "d",
        "run_id": "r",
        "recorded_at": "2026-05-01T00:00:00+00:00",
    }


def test_recording_never_breaks_task_instance_creation() -> None:
    """A run without a DB session (or any failure to record) leaves the task instance as it is."""
    ti = SimpleNamespace(dag_id=DAG_ID, task_id="expand_targets", map_index=-1, pool_slots=1)
    task_instance_mutation_hook(ti, dag_run=SimpleNamespace(conf=CONF, dag_id=DAG_ID, run_id="r"))
    assert ti.pool_slots == 1


def test_the_recompile_dags_neuron_attest_goes_to_the_queue_its_router_returned(monkeypatch) -> None:
    """Instance i of `attest_kept_neuron` runs on the i-th queue `route_attests` returned (read from its XCom
    in the caller's session): `neuron-<release>` of the run's release, a profile registered for it or not.
    Any other task, an instance not expanded yet, a router that has not returned: left as declared."""
    from neuronforge_airflow.policies import routing

    returned: dict[str, object] = {"route_attests": ["neuron-2.33.2"]}
    monkeypatch.setattr(routing, "returned", lambda dag_run, task_id: returned.get(task_id))
    run = SimpleNamespace(conf={"sdk": "2.33.2"}, dag_id=routing.RECOMPILE_DAG_ID, run_id="r")

    def queue_of(task_id: str, map_index: int) -> str:
        ti = SimpleNamespace(dag_id=routing.RECOMPILE_DAG_ID, task_id=task_id, map_index=map_index)
        ti.queue = "neuron-unrouted" if task_id == routing.NEURON_ATTEST_TASK else "default"
        task_instance_mutation_hook(ti, dag_run=run)
        return ti.queue

    assert queue_of("attest_kept_neuron", 0) == "neuron-2.33.2"
    assert queue_of("attest_kept_neuron", 1) == "neuron-unrouted"  # past what the router returned
    assert queue_of("attest_kept_neuron", -1) == "neuron-unrouted"  # not expanded yet
    assert queue_of("attest_kept_default", 0) == "default"
    returned.clear()  # the router has not returned (or its XCom cannot be read)
    assert queue_of("attest_kept_neuron", 0) == "neuron-unrouted"
    returned["route_attests"] = {"not": "a list"}
    assert queue_of("attest_kept_neuron", 0) == "neuron-unrouted"
