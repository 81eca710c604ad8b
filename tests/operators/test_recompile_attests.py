"""The recompile DAG's attest tasks as the report sees them: `route_attests` runs only the attest tasks of
queues with kept builds and a worker, and the report marks a build no task attested `to-attest`, saying
why and the command that does it on a Neuron host of the release (the tasks run in
tests/dags/test_recompile_dag.py)."""

from __future__ import annotations

from typing import Any

import pytest

import neuronforge_airflow.operators.recompile as ops
from neuronforge.farm import recompile


class _TI:
    """What the tasks read of their task instance: XComs pulled by task id (and key), XComs pushed."""

    def __init__(self, xcoms: dict[tuple[str, str | None], Any]) -> None:
        self.xcoms = xcoms

    def xcom_pull(self, task_ids: str, key: str | None = None) -> Any:
        return self.xcoms.get((task_ids, key))

    def xcom_push(self, key: str, value: Any) -> None:
        self.xcoms[("route_attests", key)] = value


PLAN = {"release": "2.33.0", "store_uri": "file:///s", "attests": {"default": [0], "neuron-2.33.0": [1]}}


def test_only_the_attests_of_served_queues_with_builds_run(monkeypatch: pytest.MonkeyPatch) -> None:
    ti = _TI({})
    monkeypatch.setattr(ops, "get_current_context", lambda: {"ti": ti})
    monkeypatch.setattr(ops, "default_executor", lambda: "CeleryExecutor")
    monkeypatch.setattr(ops, "celery_active_queues", lambda timeout=5.0: {"celery@cpu": [{"name": "default"}]})
    assert ops.route_attests.function(PLAN) == ["attest_kept_default"]  # no other queue has builds to attest
    served = ti.xcoms[("route_attests", ops.ATTESTS_XCOM)]
    assert served["neuron-2.33.0"]["served"] is False and "neuron-2.33.0" in served["neuron-2.33.0"]["detail"]
    monkeypatch.setenv("NEURONFORGE_NEURON_RUNNER", "kubernetes")  # no attest pod yet: said, not queued
    assert ops.route_attests.function(PLAN) == ["attest_kept_default"]
    assert "kubernetes" in ti.xcoms[("route_attests", ops.ATTESTS_XCOM)]["neuron-2.33.0"]["detail"]
    assert ops.route_attests.function({**PLAN, "attests": {}}) == []  # a dry run, or nothing kept


@pytest.mark.parametrize(
    ("served", "why"),
    [
        ({"served": False, "detail": "no Celery worker consumes queue 'neuron-2.33.0'"}, "no Celery worker"),
        ({"served": True, "detail": "consumed"}, "attest_kept_neuron_2_33_0 did not succeed"),
    ],
)
def test_the_report_takes_each_outcome_and_says_what_attests_the_rest(served: dict, why: str) -> None:
    states = [recompile.TargetState(i, f"org/m{i}", i, f"s{i}", {}, recompile.FRESH, key=f"{i:064x}") for i in (0, 1)]
    ti = _TI(
        {
            ("route_attests", ops.ATTESTS_XCOM): {"default": {"served": True}, "neuron-2.33.0": served},
            ("attest_kept_default", None): {"0": ["attested", "build 000000000000 at SDK 2.33.0: re-smoke passed"]},
        }
    )
    ops._attested(ti, PLAN, states)
    assert (states[0].outcome, states[0].outcome_detail) == (
        "attested",
        "build 000000000000 at SDK 2.33.0: re-smoke passed",
    )
    assert states[1].outcome == "to-attest" and states[1].outcome_detail.startswith(why)
    assert states[1].outcome_detail.endswith(
        f"on a Neuron host of SDK 2.33.0: neuronforge attest {states[1].key[:12]} --sdk 2.33.0 --store file:///s"
    )
