"""The recompile DAG's attest tasks as the report sees them: `route_attests` asks whether a worker consumes
each queue with kept builds (the default one, `neuron-<release>` of the run's release) and returns the
Neuron ones to attest on, which the Neuron attest task is mapped over; the report marks a build no task
attested `to-attest`, saying why and the command that does it on a Neuron host of the release (the tasks
run in tests/dags/test_recompile_dag.py)."""

from __future__ import annotations

from typing import Any

import pytest

import neuronforge_airflow.operators.recompile as ops
from neuronforge.farm import recompile


class _TI:
    """What the tasks read of their task instance: XComs pulled by task id, key and map index, XComs pushed."""

    def __init__(self, xcoms: dict[tuple[str, str | None, int | None], Any]) -> None:
        self.xcoms = xcoms

    def xcom_pull(self, task_ids: str, key: str | None = None, map_indexes: int | None = None) -> Any:
        return self.xcoms.get((task_ids, key, map_indexes))

    def xcom_push(self, key: str, value: Any) -> None:
        self.xcoms[("route_attests", key, None)] = value


# 2.33.1: a release known to the release table with no registered profile; its Neuron hosts attest all the same
PLAN = {"release": "2.33.1", "store_uri": "file:///s", "attests": {"default": [0], "neuron-2.33.1": [1]}}


def _celery(monkeypatch: pytest.MonkeyPatch, queues: list[str], policy: bool = True) -> _TI:
    from neuronforge_airflow.policies import deployment_checks

    monkeypatch.setattr(deployment_checks, "policy_loaded", lambda: policy)  # the worker loaded it (or not)
    ti = _TI({})
    monkeypatch.setattr(ops, "get_current_context", lambda: {"ti": ti})
    monkeypatch.setattr(ops, "default_executor", lambda: "CeleryExecutor")
    answer = {"celery@host": [{"name": q} for q in queues]}
    monkeypatch.setattr(ops, "celery_active_queues", lambda timeout=5.0: answer)
    return ti


def test_the_neuron_attest_goes_to_the_releases_queue_only_when_a_worker_consumes_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    ti = _celery(monkeypatch, ["default"])
    assert ops.route_attests.function(PLAN) == []  # nobody on neuron-2.33.1: the mapped attest is skipped
    served = ti.xcoms[("route_attests", ops.ATTESTS_XCOM, None)]
    assert served["neuron-2.33.1"]["served"] is False and "'neuron-2.33.1'" in served["neuron-2.33.1"]["detail"]
    assert served["default"]["served"] is True
    ti = _celery(monkeypatch, ["default", "neuron-2.33.1"])  # a worker of 2.33.1's image on its Neuron queue
    assert ops.route_attests.function(PLAN) == ["neuron-2.33.1"]
    monkeypatch.setenv("NEURONFORGE_NEURON_RUNNER", "kubernetes")  # no attest pod yet: said, not queued
    assert ops.route_attests.function(PLAN) == []
    assert "kubernetes" in ti.xcoms[("route_attests", ops.ATTESTS_XCOM, None)]["neuron-2.33.1"]["detail"]
    assert ops.route_attests.function({**PLAN, "attests": {}}) == []  # a dry run, or nothing kept


def test_without_the_cluster_policy_the_neuron_attest_is_said_not_left_waiting_unrouted(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Only the cluster policy puts the Neuron attest on `neuron-<release>`; without it the instance would
    wait on `neuron-unrouted` until the queued-task timeout. So, as the compile DAG's run-start check does,
    the router asks whether this worker's settings loaded it, and says how to install it."""
    ti = _celery(monkeypatch, ["default", "neuron-2.33.1"], policy=False)
    assert ops.route_attests.function(PLAN) == []
    said = ti.xcoms[("route_attests", ops.ATTESTS_XCOM, None)]
    assert said["default"]["served"] is True and said["neuron-2.33.1"]["served"] is False
    detail = said["neuron-2.33.1"]["detail"]
    assert detail.startswith("the neuronforge cluster policy is not installed on this Airflow worker, so the Neuron ")
    assert "queue neuron-2.33.1" in detail and "airflow_local_settings.py" in detail


def test_the_default_attest_skips_itself_without_a_cpu_build_to_attest() -> None:
    from airflow.sdk.exceptions import AirflowSkipException

    with pytest.raises(AirflowSkipException):
        ops.attest_kept_default.function({**PLAN, "attests": {"neuron-2.33.1": [1]}})


@pytest.mark.parametrize(
    ("served", "routed", "why"),
    [
        ({"served": False, "detail": "no Celery worker consumes queue 'neuron-2.33.1'"}, [], "no Celery worker"),
        (
            {"served": True, "detail": "consumed"},
            ["neuron-2.33.1"],
            "attest_kept_neuron on queue 'neuron-2.33.1' did not succeed",
        ),
    ],
)
def test_the_report_takes_each_outcome_and_says_what_attests_the_rest(served: dict, routed: list, why: str) -> None:
    states = [recompile.TargetState(i, f"org/m{i}", i, f"s{i}", {}, recompile.FRESH, key=f"{i:064x}") for i in (0, 1)]
    ti = _TI(
        {
            ("route_attests", ops.ATTESTS_XCOM, None): {"default": {"served": True}, "neuron-2.33.1": served},
            ("route_attests", None, None): routed,
            ("attest_kept_default", None, None): {
                "0": ["attested", "build 000000000000 at SDK 2.33.1: re-smoke passed"]
            },
        }
    )
    ops._attested(ti, PLAN, states)
    assert (states[0].outcome, states[0].outcome_detail) == (
        "attested",
        "build 000000000000 at SDK 2.33.1: re-smoke passed",
    )
    assert states[1].outcome == "to-attest" and states[1].outcome_detail.startswith(why)
    assert states[1].outcome_detail.endswith(
        f"on a Neuron host of SDK 2.33.1: neuronforge attest {states[1].key[:12]} --sdk 2.33.1 --store file:///s"
    )
    # the Neuron attest's instance of that queue (its map index in what route_attests returned) reported it
    ti.xcoms[("route_attests", None, None)] = ["neuron-2.33.1"]
    ti.xcoms[("attest_kept_neuron", None, 0)] = {"1": ["attested", "build 000000000001 at SDK 2.33.1: re-smoke passed"]}
    ops._attested(ti, PLAN, states)
    assert states[1].outcome == "attested"


def test_a_run_whose_trigger_failed_is_a_failed_row_not_one_still_queued(tmp_path) -> None:
    """The fan-out's own failure (`rebuild_runs` or a `trigger_rebuilds[i]` instance failed: the compile run
    was never started) makes its rows FAILED, naming the task, so `verdict` fails the run; before, they read
    "not started yet" and the run ended green. A row whose run did start keeps what the store says. The
    states come from the Task SDK's `get_task_states` (the real method, its real result shape)."""
    import inspect

    from airflow.sdk.execution_time.task_runner import RuntimeTaskInstance

    from neuronforge.farm import recompile

    assert list(inspect.signature(RuntimeTaskInstance.get_task_states).parameters)[:4] == [
        "dag_id",
        "map_index",
        "task_ids",
        "task_group_id",
    ]

    class TI:
        dag_id, run_id = "neuronforge_recompile_on_upgrade", "scheduled__x"

        def __init__(self, states: dict) -> None:
            self.states, self.asked = states, []

        def get_task_states(self, dag_id, map_index=None, task_ids=None, task_group_id=None, run_ids=None, **kw):
            self.asked.append((dag_id, task_ids, run_ids))
            return {self.run_id: self.states}

    def rows() -> list:
        out = []
        ends = ((0, "rebuild-a", "queued"), (1, "rebuild-b", "queued"), (2, "rebuild-b", "rebuilt"))
        for order, run_id, outcome in ends:
            s = recompile.TargetState(order=order, source="org/m", line=1, slug=f"t{order}", target={}, status="stale")
            s.run_id, s.outcome = run_id, outcome
            out.append(s)
        return out

    plan = {"runs": [{"trigger_run_id": "rebuild-a"}, {"trigger_run_id": "rebuild-b"}]}
    states = rows()
    ti = TI({"rebuild_runs": "success", "trigger_rebuilds_0": "success", "trigger_rebuilds_1": "failed"})
    ops._untriggered(ti, plan, states)
    assert ti.asked == [(TI.dag_id, ["rebuild_runs", "trigger_rebuilds"], [TI.run_id])]
    assert [s.outcome for s in states] == ["queued", "failed", "rebuilt"]
    assert states[1].outcome_detail == (
        "its compile run rebuild-b was not started: task trigger_rebuilds[1] failed (its log says why)"
    )
    states = rows()
    ops._untriggered(TI({"rebuild_runs": "failed", "trigger_rebuilds": "upstream_failed"}), plan, states)
    assert [s.outcome for s in states] == ["failed", "failed", "rebuilt"]
    assert "task rebuild_runs failed" in states[0].outcome_detail
    states = rows()
    ops._untriggered(TI({}), {"runs": []}, states)  # nothing triggered: nothing asked, nothing changed
    assert [s.outcome for s in states] == ["queued", "queued", "rebuilt"]
