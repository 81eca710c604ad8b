"""The sweep DAG for real (`dag.test()`, SQLite, the real local backend): candidates are mapped
tasks on the profile's queue, one at a time; what a rule or monotonicity decides is skipped without
a compile; the files land in the store; a second run resumes and compiles nothing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from neuronforge.artifacts import layout
from neuronforge.spec.source import ModelSource
from neuronforge.stores import open_store

DAG_ID = "neuronforge_config_sweep"


@pytest.fixture
def dag(airflow_db: str):
    from airflow.dag_processing.dagbag import DagBag

    bag = DagBag(dag_folder=str(Path(__file__).resolve().parents[2] / "dags"))
    assert bag.import_errors == {}
    return bag.dags[DAG_ID]


def _states(run) -> dict[tuple[str, int], str]:
    return {(ti.task_id, ti.map_index): str(ti.state) for ti in run.get_task_instances()}


def test_dag_parses_with_a_mapped_try_per_queue(dag) -> None:
    tasks = {t.task_id: t for t in dag.tasks}
    # a try is a whole build, smoke test included: on the profile's Neuron hosts
    assert tasks["try_cpu"].queue == "default" and tasks["try_neuron_2_26_1"].queue == "neuron-2.26.1"
    assert tasks["candidates_neuron_2_26_1"].queue == "default"
    assert all(tasks[t].max_active_tis_per_dag == 1 for t in tasks if t.startswith("try_"))
    assert [o.name for o in tasks["finish_sweep"].outlets] == ["neuronforge-config-sweeps"]
    assert tasks["finish_sweep"].trigger_rule == "all_done"
    assert set(dag.params) == {
        "model",
        "instance",
        "profile",
        "tp",
        "batch_sizes",
        "seq_lens",
        "dtype",
        "method",
        "retry_failed",
        "store",
    }


def test_a_sweep_run_then_a_resumed_one(dag, served_llama: Path, tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("NEURONFORGE_HOME", str(tmp_path / "home"))
    store_uri = f"file://{tmp_path / 'store'}"
    conf = {
        "model": str(served_llama),
        "instance": "inf2.xlarge",
        "profile": "cpu",
        "dtype": "fp32",
        "batch_sizes": [2, 1],
        "seq_lens": [128, 64],
        "store": store_uri,
    }
    run = dag.test(run_conf=conf)
    states = _states(run)
    # planned order: batch up, sequence down: (2,1,128) compiled, (2,1,64) by rule, (2,2,128), (2,2,64).
    # A task that compiled succeeds, one whose candidates were all decided is skipped (dag.test may
    # start mapped tasks out of order: the first to run then decides the ones before it too).
    tries = [states[("try_cpu", i)] for i in range(4)]
    assert set(tries) == {"success", "skipped"} and tries.count("success") <= 2, states
    assert states[("finish_sweep", -1)] == "success"
    from neuronforge.profiles import get_profile

    out_key, records_key = layout.sweep_files(
        ModelSource.parse(str(served_llama)), "inf2.xlarge", get_profile("cpu").ref
    )
    store = open_store(store_uri)
    entries = json.loads(store.get_bytes(out_key))[str(served_llama)]
    assert {(e["batch_size"], e["sequence_length"]) for e in entries} == {(1, 128), (2, 128)}
    records = json.loads(store.get_bytes(records_key))
    assert records["finished"] and len(records["candidates"]) == 4
    # a second run resumes from the store: every candidate is decided, nothing compiles
    again = _states(dag.test(run_conf=conf))
    assert [again[("try_cpu", i)] for i in range(4)] == ["skipped"] * 4, again
    assert again[("finish_sweep", -1)] == "success"


def test_a_candidate_list_the_rules_refuse_fails_the_first_task(dag, tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("NEURONFORGE_HOME", str(tmp_path / "home"))
    run = dag.test(
        run_conf={"instance": "inf2.xlarge", "profile": "cpu", "tp": [3], "store": f"file://{tmp_path / 'store'}"}
    )
    states = _states(run)
    assert states[("plan_sweep", -1)] == "failed"
    assert not (tmp_path / "store").exists() or not any((tmp_path / "store").rglob("*.json"))
