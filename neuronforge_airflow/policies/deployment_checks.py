"""Run-start deployment checks: fail the first task of a run with one clear sentence instead of
letting the Neuron tasks wait forever (no `neuron_cores` pool, or one too small for a target's tp)
or run unsized (no cluster policy).

Called from inside an Airflow 3 task, i.e. the Task SDK: the worker has no metadata-DB access and
the execution API has no pool endpoint. So:

- the policy: the worker's own Airflow settings must have loaded `neuronforge_airflow.policies.routing`'s
  `task_instance_mutation_hook` (from `$AIRFLOW_HOME/config/airflow_local_settings.py`, which every
  component of a deployment shares);
- the pool: that hook, running where the run's task instances were created (api-server or
  scheduler, with the DB), recorded the pool's slots in the Variable `neuronforge_deployment`
  (`neuronforge_airflow/policies/routing.py`); the task reads the record through the Task SDK. A record older than
  the run means the policy did not run there.
"""

from __future__ import annotations

import json
import os
from datetime import datetime, timedelta
from typing import Any

from neuronforge.common.errors import InvalidInput
from neuronforge_airflow.policies.routing import POOL, RECORD_VARIABLE

# Clocks of the component that created the run and of the one that recorded: same DB side, but
# allow for skew between hosts.
RECORD_SKEW = timedelta(minutes=5)
POOL_DESCRIPTION = "NeuronCores of the Neuron workers"


def _install_policy_hint() -> str:
    home = os.environ.get("AIRFLOW_HOME") or "~/airflow"
    return (
        f"copy docker/airflow_local_settings.py to {home}/config/airflow_local_settings.py on every Airflow "
        "component (api-server, scheduler, dag-processor, triggerer, workers; the images already do) and restart them"
    )


def policy_missing(consequence: str) -> str:
    """The sentence for a worker whose Airflow settings did not load the cluster policy: `consequence`,
    and how to install it."""
    hint = _install_policy_hint()
    return f"the neuronforge cluster policy is not installed on this Airflow worker, so {consequence}: {hint}"


def _pool_command(slots: int) -> str:
    return f'airflow pools set {POOL} {slots} "{POOL_DESCRIPTION}"'


def policy_loaded() -> bool:
    """Whether this process's Airflow settings loaded neuronforge's cluster policy: the
    `airflow_local_settings` module Airflow imported at start-up exposes `neuronforge_airflow.policies.routing`'s hook
    — itself, or a hook of the platform's own that calls it and says so (`functools.wraps`: its
    `__wrapped__`) — and Airflow registered a task-instance mutation hook. (Airflow wraps the function
    in a shim, so the registered hook itself does not name it.)"""
    import inspect
    import sys

    from airflow import settings

    from neuronforge_airflow.policies import routing

    if getattr(settings.task_instance_mutation_hook, "is_noop", True):
        return False
    local_settings = sys.modules.get("airflow_local_settings")
    hook = getattr(local_settings, "task_instance_mutation_hook", None)
    if hook is None:
        return False
    ours = routing.task_instance_mutation_hook
    return inspect.unwrap(hook, stop=lambda f: f is ours) is ours


def _read_record() -> dict[str, Any] | None:
    from airflow.sdk import Variable

    raw = Variable.get(RECORD_VARIABLE, default=None)
    if raw is None:
        return None
    try:
        record = json.loads(raw) if isinstance(raw, str) else raw
    except ValueError:
        return None
    return record if isinstance(record, dict) else None


def _run_after() -> datetime | None:
    from airflow.sdk import get_current_context

    dag_run = get_current_context().get("dag_run")
    return getattr(dag_run, "run_after", None)


def problem(
    needs_neuron: bool, max_tp: int, *, policy: bool, record: dict | None, run_after: datetime | None
) -> str | None:
    """The one-sentence reason this deployment cannot run the run's targets, or None."""
    if not needs_neuron:
        return None
    if not policy:
        return policy_missing(f"the Neuron compile and smoke tasks would not take tp slots of pool {POOL}")
    recorded_at = None
    if record is not None:
        try:
            recorded_at = datetime.fromisoformat(record["recorded_at"])
        except (KeyError, TypeError, ValueError):
            recorded_at = None
    if recorded_at is None or (run_after is not None and recorded_at < run_after - RECORD_SKEW):
        return (
            "the neuronforge cluster policy did not run where this run was created (the api-server or the "
            f"scheduler: no fresh Variable {RECORD_VARIABLE}), so the Neuron tasks would not be sized: "
            f"{_install_policy_hint()}"
        )
    pools = record.get("pools")
    slots = pools.get(POOL) if isinstance(pools, dict) else None
    need = max(int(max_tp), 1)
    if slots is None:
        return (
            f"the Airflow pool {POOL} does not exist, so the Neuron tasks of this run would wait forever: create it "
            f"with `{_pool_command(need)}` (slots: the NeuronCores of your Neuron workers, at least this run's "
            f"largest tp degree {need})"
        )
    if slots != -1 and slots < need:  # -1: an unlimited pool
        return (
            f"the Airflow pool {POOL} has {slots} slots but a target of this run needs tp={need}, so its Neuron tasks "
            f"would wait forever: raise it with `{_pool_command(need)}` (or more: the NeuronCores of your Neuron "
            "workers), or lower the target's tp_degree"
        )
    return None


def check_deployment(needs_neuron: bool, max_tp: int) -> None:
    """Raise InvalidInput when this deployment cannot run a run whose Neuron targets need up to
    `max_tp` NeuronCores: pool `neuron_cores` missing or too small, or the cluster policy not
    installed. Nothing is checked for runs without Neuron targets. Call it inside a task."""
    if not needs_neuron:
        return
    policy = policy_loaded()
    reason = problem(
        needs_neuron,
        max_tp,
        policy=policy,
        record=_read_record() if policy else None,
        run_after=_run_after() if policy else None,
    )
    if reason is not None:
        raise InvalidInput(reason[0].upper() + reason[1:] + ".")
