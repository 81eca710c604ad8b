"""`TriggerRunOperator`: what it hands the Task SDK's task runner (which creates the run, skips an
existing one, or waits deferred) and how it ends a deferred wait. The whole path against a real
metadata DB is in tests/dags/test_recompile_dag.py."""

from __future__ import annotations

import pytest
from airflow.sdk.exceptions import AirflowException, DagRunTriggerException

from neuronforge_airflow.operators.trigger_run import TriggeredRunLink, TriggerRunOperator


def _operator(**kwargs) -> TriggerRunOperator:
    args = {"task_id": "t", "trigger_dag_id": "other", "trigger_run_id": "recompile__x__00", "conf": {"a": 1}}
    return TriggerRunOperator(**(args | kwargs))


def test_execute_asks_the_task_runner_for_the_run_with_every_field() -> None:
    op = _operator(
        wait_for_completion=True,
        deferrable=True,
        poke_interval=7,
        allowed_states=["success", "failed"],
        failed_states=[],
        skip_when_already_exists=True,
    )
    with pytest.raises(DagRunTriggerException) as raised:
        op.execute({})
    e = raised.value
    assert (e.trigger_dag_id, e.dag_run_id, e.conf) == ("other", "recompile__x__00", {"a": 1})
    assert e.wait_for_completion and e.deferrable and e.skip_when_already_exists and not e.reset_dag_run
    assert (e.allowed_states, e.failed_states, e.poke_interval) == (["success", "failed"], [], 7)
    assert e.logical_date is not None and e.logical_date.tzinfo is not None


def test_a_state_no_run_ends_in_is_refused_when_the_dag_is_parsed() -> None:
    with pytest.raises(ValueError, match=r"cannot end in \['running'\]"):
        _operator(allowed_states=["success", "running"])


def test_the_deferred_wait_fails_on_a_failed_state_and_passes_otherwise() -> None:
    event = ("airflow.providers.standard.triggers.external_task.DagStateTrigger", {"run_ids": ["r1"], "r1": "failed"})
    with pytest.raises(AirflowException, match="r1"):
        _operator(failed_states=["failed"]).execute_complete({}, event)
    _operator(allowed_states=["success", "failed"], failed_states=[]).execute_complete({}, event)


def test_the_link_is_the_triggered_runs_page(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AIRFLOW__API__BASE_URL", "http://127.0.0.1:8080/")
    link = TriggeredRunLink().get_link(_operator(trigger_run_id="manual__2026-01-01T00:00:00+00:00"), ti_key=None)
    assert link == "http://127.0.0.1:8080/dags/other/runs/manual__2026-01-01T00%3A00%3A00%2B00%3A00"
