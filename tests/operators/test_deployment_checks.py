"""Run-start deployment checks: the `neuron_cores` pool and the cluster policy, seen from a task.

The real-Airflow tests run a DAG whose first task is `expand_targets` with `dag.test()` on the
session's SQLite DB: the policy (installed from docker/airflow_local_settings.py the way Airflow's
settings install it) records the pool where the run's task instances are created, and the task
reads the record through the Task SDK.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from neuronforge_airflow.policies import routing
from neuronforge_airflow.policies.deployment_checks import problem

REPO = Path(__file__).resolve().parents[2]
NOW = datetime(2026, 5, 1, 12, 0, tzinfo=UTC)


def _record(slots: int | None, at: datetime = NOW) -> dict:
    return routing.deployment_record(slots, "d", "r", now=at)


@pytest.mark.parametrize(
    ("needs_neuron", "max_tp", "policy", "record", "expected"),
    [
        (False, 8, False, None, None),  # cpu-only runs need neither pool nor policy
        (True, 2, True, _record(2), None),
        (True, 2, True, _record(32), None),
        (True, 8, True, _record(-1), None),  # an unlimited pool
        (True, 2, False, _record(2), "cluster policy is not installed on this Airflow worker"),
        (True, 2, True, None, "did not run where this run was created"),
        (True, 2, True, _record(2, NOW - timedelta(hours=1)), "did not run where this run was created"),
        (True, 4, True, _record(None), "pool neuron_cores does not exist, so the Neuron tasks of this run would wait"),
        (True, 4, True, _record(2), "pool neuron_cores has 2 slots but a target of this run needs tp=4"),
    ],
)
def test_problem_names_what_is_missing(needs_neuron, max_tp, policy, record, expected) -> None:
    found = problem(needs_neuron, max_tp, policy=policy, record=record, run_after=NOW)
    if expected is None:
        assert found is None
    else:
        assert expected in found


def test_the_fix_is_in_the_message() -> None:
    missing = problem(True, 4, policy=True, record=_record(None), run_after=NOW)
    assert 'airflow pools set neuron_cores 4 "NeuronCores of the Neuron workers"' in missing
    small = problem(True, 8, policy=True, record=_record(2), run_after=NOW)
    assert "airflow pools set neuron_cores 8" in small
    no_policy = problem(True, 1, policy=False, record=None, run_after=NOW)
    assert "docker/airflow_local_settings.py to" in no_policy and "/config/airflow_local_settings.py" in no_policy


def test_a_platform_hook_that_wraps_ours_counts_as_the_policy(monkeypatch: pytest.MonkeyPatch) -> None:
    """A platform team's own `task_instance_mutation_hook` that calls ours (and says so with
    functools.wraps) is the policy installed; one that does not call ours, or hides it, is not."""
    import functools
    import sys
    import types

    from airflow import settings

    from neuronforge_airflow.policies.deployment_checks import policy_loaded

    def theirs(task_instance, dag_run=None) -> None:
        """Route some runs elsewhere, after neuronforge's hook."""

    wrapped = functools.wraps(routing.task_instance_mutation_hook)(theirs)
    twice = functools.wraps(wrapped)(lambda task_instance, dag_run=None: wrapped(task_instance, dag_run))
    monkeypatch.setattr(settings.task_instance_mutation_hook, "is_noop", False)
    for hook, loaded in ((routing.task_instance_mutation_hook, True), (wrapped, True), (twice, True),
                         (lambda task_instance, dag_run=None: None, False), (None, False)):  # fmt: skip
        module = types.ModuleType("airflow_local_settings")
        if hook is not None:
            module.task_instance_mutation_hook = hook
        monkeypatch.setitem(sys.modules, "airflow_local_settings", module)
        assert policy_loaded() is loaded, hook
    monkeypatch.setattr(settings.task_instance_mutation_hook, "is_noop", True)  # Airflow registered none
    assert policy_loaded() is False


# --- real Airflow ---------------------------------------------------------------------------------


@pytest.fixture
def clean_deployment(airflow_db: str):
    """No `neuron_cores` pool and no deployment record before and after the test."""
    from airflow.models.pool import Pool
    from airflow.models.variable import Variable

    def clean() -> None:
        if Pool.get_pool(routing.POOL) is not None:
            Pool.delete_pool(routing.POOL)
        Variable.delete(routing.RECORD_VARIABLE)

    clean()
    yield
    clean()


def _set_pool(slots: int) -> None:
    from airflow.models.pool import Pool

    Pool.create_or_update_pool(routing.POOL, slots, "NeuronCores of the Neuron workers", include_deferred=False)


CHECK_DAG = """
import pendulum
from pathlib import Path

from airflow.sdk import dag, get_current_context, task

from neuronforge.common.errors import InvalidInput
from neuronforge_airflow.policies.deployment_checks import check_deployment


@dag(dag_id="nf_deployment_check", schedule=None, start_date=pendulum.datetime(2026, 1, 1, tz="UTC"))
def nf_deployment_check():
    @task
    def expand_targets() -> None:
        conf = get_current_context()["dag_run"].conf
        out = Path(conf["out"])
        try:
            check_deployment(conf["needs_neuron"], conf["max_tp"])
        except InvalidInput as exc:
            out.write_text(str(exc))
            raise
        out.write_text("ok")

    expand_targets()


nf_deployment_check()
"""


@pytest.fixture
def check_dag(airflow_db: str, tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch):
    """A DAG whose first task, `expand_targets`, runs the check (its error goes to conf["out"]), in a
    DAG bundle of its own next to the repository's dags folder (`dag.test()` runs bundle DAGs only)."""
    from airflow.dag_processing.dagbag import DagBag

    folder = tmp_path_factory.mktemp("check-dag")
    (folder / "nf_deployment_check.py").write_text(CHECK_DAG)
    local = "airflow.dag_processing.bundles.local.LocalDagBundle"
    bundles = [
        {"name": "dags-folder", "classpath": local, "kwargs": {}},
        {"name": "nf-deployment-check", "classpath": local, "kwargs": {"path": str(folder)}},
    ]
    monkeypatch.setenv("AIRFLOW__DAG_PROCESSOR__DAG_BUNDLE_CONFIG_LIST", json.dumps(bundles))
    bag = DagBag(dag_folder=str(folder))
    assert bag.import_errors == {}
    return bag.dags["nf_deployment_check"]


def _run(dag, tmp_path: Path, needs_neuron: bool, max_tp: int) -> tuple[str, str]:
    out = tmp_path / f"check-{needs_neuron}-{max_tp}.txt"
    run = dag.test(run_conf={"needs_neuron": needs_neuron, "max_tp": max_tp, "out": str(out)})
    return str(run.state), out.read_text()


def test_without_the_policy_a_neuron_run_fails_at_its_first_task(clean_deployment, check_dag, tmp_path: Path) -> None:
    _set_pool(8)  # the pool alone is not enough: nothing would size the tasks
    state, message = _run(check_dag, tmp_path, True, 2)
    assert state == "failed"
    assert message.startswith("The neuronforge cluster policy is not installed on this Airflow worker")
    # a cpu-only run needs neither
    assert _run(check_dag, tmp_path, False, 2) == ("success", "ok")


def test_without_the_pool_the_run_fails_with_the_command_to_create_it(
    clean_deployment, policy, check_dag, tmp_path: Path
) -> None:
    state, message = _run(check_dag, tmp_path, True, 2)
    assert state == "failed"
    assert "pool neuron_cores does not exist" in message
    assert 'airflow pools set neuron_cores 2 "NeuronCores of the Neuron workers"' in message


def test_a_pool_smaller_than_a_targets_tp_fails_and_a_big_enough_one_passes(
    clean_deployment, policy, check_dag, tmp_path: Path
) -> None:
    from airflow.models.variable import Variable

    _set_pool(2)
    state, message = _run(check_dag, tmp_path, True, 4)
    assert state == "failed"
    assert "has 2 slots but a target of this run needs tp=4" in message
    _set_pool(4)  # raised between runs: the next run's record sees it
    assert _run(check_dag, tmp_path, True, 4) == ("success", "ok")
    record = json.loads(Variable.get(routing.RECORD_VARIABLE))
    assert record["pools"] == {"neuron_cores": 4}
    assert record["dag_id"] == "nf_deployment_check"
    assert record["policy"] == "neuronforge_airflow.policies.routing.task_instance_mutation_hook"
