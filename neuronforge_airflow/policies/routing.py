"""Per-target pool slots for the Neuron tasks that hold NeuronCores: `pool_slots = tp`.

Airflow fixes a mapped task's `pool_slots` in `partial()`, the same for every mapped instance, but a
run's targets have different tensor-parallel degrees. Airflow's documented way to adjust a task
instance from the run's configuration is the `task_instance_mutation_hook` cluster policy, which the
scheduler calls as it creates each mapped instance, with the `dag_run` (and so `dag_run.conf`).
`docker/airflow_local_settings.py` installs `task_instance_mutation_hook` below; copy it to
`$AIRFLOW_HOME/config/` (the images and `make demo` do).

Map index i of a Neuron queue's group (`neuron_2_26_1_target`, …) is the i-th ticket of the group's
`tickets_*` task: the run's targets routed to that queue, in the order of `conf["targets"]` (a
target's own `profile`, else the run's, else the form's default `cpu`), less those the run's first
task found published. The hook reads those tickets (their XCom, in the metadata DB) as the scheduler
expands the group; without them (an XCom backend that keeps values elsewhere) it maps the conf's
targets, which is exact when none of the group's targets was a cache hit. Only a stage its profile
places on a Neuron host (`ServingProfile.placement(...).neuron_cores`: the smoke test; compiling
only where the toolchain needs a device) is sized; a compile on a CPU worker holds no NeuronCores.

The recompile DAG's run aims at one SDK release R, known only once its `find_stale` has decided (the
form's `sdk`, else the newest release in effect: the table's and the store's accepted ones), and its kept
builds on Neuron profiles are smoked on the Neuron hosts of R's image, queue `neuron-<R>` — any R, a
profile registered for it or not. A task's declared queue is the same for every run, so its Neuron attest
task (`attest_kept_neuron`) is mapped over what `route_attests` returns (the queues with kept builds and a
worker: at most `neuron-<R>`), and as the scheduler expands it the hook puts instance i on the i-th of them
(read from that XCom, as the tickets are). Airflow honours a queue set here: the hook runs scheduler-side
as task instances are created or expanded, and what it sets is stored and used to dispatch to the
executor (Airflow's cluster-policy docs, `task_instance_mutation_hook`).

The hook also leaves the run-start deployment check (`neuronforge_airflow/policies/deployment_checks.py`) what a
task cannot see in Airflow 3: workers have no metadata-DB access and the Task SDK's execution API
has no pool endpoint. The hook runs where task instances are created, which has the DB (the
api-server for a triggered run, the scheduler for a scheduled one, `dag.test()`): when it creates
the `expand_targets` instance of a run it records the `neuron_cores` pool's slots (None: no such
pool) in the Airflow Variable `neuronforge_deployment`, in the caller's own DB transaction, and the
task reads it back through the Task SDK. A missing or old record means the policy does not run
where runs are created.
"""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime
from functools import cache
from typing import Any

from neuronforge.common.deployment_names import COMPILE_DAG, DEPLOYMENT_VARIABLE, NEURON_POOL, RECOMPILE_DAG

DAG_ID = COMPILE_DAG
SIZED_STAGES = ("compile_graphs", "smoke")  # the stages a profile may place on a Neuron host
POOL = NEURON_POOL
DEFAULT_QUEUE = "default"  # the Celery queue of every stage a profile does not place elsewhere
# The first task of a run: its creation is when the deployment record is refreshed.
RECORDING_TASK = "expand_targets"
RECORD_VARIABLE = DEPLOYMENT_VARIABLE
POLICY = f"{__name__}.task_instance_mutation_hook"
# The recompile DAG's attest of kept builds on Neuron hosts: a mapped task whose instance i the hook puts on
# the i-th queue its router returned (the run's release is known only once the run has decided, and a task's
# declared queue is the same for every run). Declared on UNROUTED_QUEUE, which no worker consumes; the router
# maps it over nothing when the worker's settings did not load this policy (`route_attests`), and says so.
RECOMPILE_DAG_ID = RECOMPILE_DAG
ATTEST_ROUTE_TASK = "route_attests"
NEURON_ATTEST_TASK = "attest_kept_neuron"
UNROUTED_QUEUE = "neuron-unrouted"

log = logging.getLogger(__name__)


def group_id(queue: str) -> str:
    """The task group of a toolchain queue's targets: `cpu_target`, `neuron_2_26_1_target`, …"""
    if queue == DEFAULT_QUEUE:
        return "cpu_target"
    release = queue.removeprefix("neuron-compile-").removeprefix("neuron-")
    return f"neuron_{release.replace('-', '_').replace('.', '_')}_target"


def pool_slots_for(
    task_id: str, map_index: int, conf: dict[str, Any] | None, tickets: list[Any] | None = None
) -> int | None:
    """The pool slots a task instance needs, or None to leave it as declared. `tickets`: what the
    group's `tickets_*` task returned (build states), when known; else the conf's targets are mapped."""
    group, _, stage = task_id.rpartition(".")
    if stage not in SIZED_STAGES or map_index is None or map_index < 0:
        return None
    if tickets is not None:
        targets = [t.get("target") if isinstance(t, dict) else None for t in tickets]
        routed = [(t, p) for t in targets if isinstance(t, dict) and (p := _profile_of(t, {}))]
    else:
        from neuronforge_airflow.params import conf_targets

        conf = conf or {}
        targets = conf.get("targets")
        if targets is not None and not isinstance(targets, list):
            return None
        targets = conf_targets(conf)
        routed = [(t, p) for t in targets if isinstance(t, dict) and (p := _profile_of(t, conf)) and _group(p) == group]
    if map_index >= len(routed):
        return None
    target, profile = routed[map_index]
    if not profile.placement(stage_kind(stage)).neuron_cores:
        return None
    tp = target.get("tp_degree")
    return tp if isinstance(tp, int) and tp >= 1 else None


@cache
def stage_kind(stage: str) -> str | None:
    """The pipeline's kind of a stage (`neuronforge.pipeline.runner.STAGES`, where each stage declares
    it), read once per process: the scheduler imports the pipeline at the first Neuron task it sizes."""
    from neuronforge.pipeline.runner import STAGE_BY_NAME

    return STAGE_BY_NAME[stage].kind


def _profile_of(target: dict[str, Any], conf: dict[str, Any]):  # -> ServingProfile | None
    """The profile of a conf's target (None: an unknown profile; the run fails anyway)."""
    from neuronforge.common.errors import InvalidInput
    from neuronforge.profiles import get_profile

    try:
        return get_profile(str(target.get("profile") or conf.get("profile") or "cpu"))
    except InvalidInput:
        return None


def _group(profile) -> str:
    return group_id(profile.queue or DEFAULT_QUEUE)


def group_tickets(task_instance: Any, dag_run: Any) -> list[Any] | None:
    """The tickets of a sized task's group as the run routed them (the `tickets_*` task's return
    value, read from the DB in the caller's session), or None when they cannot be read."""
    group, _, stage = str(getattr(task_instance, "task_id", "")).rpartition(".")
    if stage not in SIZED_STAGES or getattr(task_instance, "map_index", -1) < 0:
        return None
    value = returned(dag_run, f"tickets_{group.removesuffix('_target')}")
    return value if isinstance(value, list) else None


def returned(dag_run: Any, task_id: str) -> Any:
    """What the unmapped task `task_id` of `dag_run` returned (its XCom, read in the caller's session: the
    hook must not open one of its own), or None when it has not or it cannot be read."""
    try:
        from airflow.models.xcom import XComModel
        from sqlalchemy import select
        from sqlalchemy.orm import object_session

        session = object_session(dag_run)
        if session is None:
            return None
        with session.no_autoflush:
            row = session.scalars(
                select(XComModel).where(
                    XComModel.dag_id == dag_run.dag_id,
                    XComModel.run_id == dag_run.run_id,
                    XComModel.task_id == task_id,
                    XComModel.map_index == -1,
                    XComModel.key == "return_value",
                )
            ).first()
        return XComModel.deserialize_value(row) if row is not None else None
    except Exception:  # the policy must never stop task instances from being created
        log.warning("neuronforge: could not read what %s returned", task_id, exc_info=True)
        return None


def attest_queue(task_instance: Any, dag_run: Any) -> str | None:
    """The queue of an instance of the recompile DAG's Neuron attest task: map index i smokes the kept
    builds of the i-th queue `ATTEST_ROUTE_TASK` returned (`neuron-<release>` of the release the run aims
    at, when a worker consumes it), so it runs there; None: leave it as declared."""
    if getattr(task_instance, "task_id", None) != NEURON_ATTEST_TASK:
        return None
    index = getattr(task_instance, "map_index", -1)
    routed = returned(dag_run, ATTEST_ROUTE_TASK) if isinstance(index, int) and index >= 0 else None
    if not isinstance(routed, list) or index >= len(routed) or not isinstance(routed[index], str):
        return None
    return routed[index]


def deployment_record(pool_slots: int | None, dag_id: str, run_id: str, now: datetime | None = None) -> dict[str, Any]:
    """What the hook leaves the run-start check: the pool as seen from the DB, and who saw it when."""
    return {
        "policy": POLICY,
        "pools": {POOL: pool_slots},
        "dag_id": dag_id,
        "run_id": run_id,
        "recorded_at": (now or datetime.now(UTC)).isoformat(),
    }


def record_deployment(dag_run: Any) -> None:
    """Upsert the `neuronforge_deployment` Variable in the session `dag_run` belongs to (the caller's
    transaction: no second connection, which SQLite would lock out). Never fails the caller."""
    try:
        from airflow.models.pool import Pool
        from airflow.models.variable import Variable
        from sqlalchemy import select
        from sqlalchemy.orm import object_session

        session = object_session(dag_run)
        if session is None:  # a detached run: nothing to write with
            return
        with session.no_autoflush:
            slots = session.scalar(select(Pool.slots).where(Pool.pool == POOL))
            value = json.dumps(deployment_record(slots, dag_run.dag_id, dag_run.run_id))
            with session.begin_nested():
                var = session.scalar(select(Variable).where(Variable.key == RECORD_VARIABLE))
                if var is None:
                    description = (
                        "Written by the neuronforge cluster policy "
                        "(neuronforge_airflow/policies/routing.py) at each run start"
                    )
                    session.add(Variable(key=RECORD_VARIABLE, val=value, description=description))
                else:
                    var.set_val(value)
    except Exception:  # the policy must never stop task instances from being created
        log.warning("neuronforge: could not record the deployment state for %s", dag_run.run_id, exc_info=True)


def task_instance_mutation_hook(task_instance: Any, dag_run: Any = None) -> None:
    """Cluster policy: refuse a run whose conf has unknown keys; size the Neuron compile / smoke task
    instances by their target's tp degree; put the recompile DAG's Neuron attest on the queue of the
    release its run aims at; at a run's first task, record the deployment state for the run-start check."""
    if dag_run is None:
        return
    from neuronforge_airflow.params import refuse_unknown_conf

    refuse_unknown_conf(task_instance, dag_run)  # a misspelt conf key: HTTP 400, no run created
    if getattr(task_instance, "task_id", None) == RECORDING_TASK and getattr(task_instance, "map_index", -1) == -1:
        record_deployment(dag_run)
    if getattr(task_instance, "dag_id", None) == RECOMPILE_DAG_ID:
        if queue := attest_queue(task_instance, dag_run):
            task_instance.queue = queue
        return
    if getattr(task_instance, "dag_id", None) != DAG_ID:
        return
    tickets = group_tickets(task_instance, dag_run)
    slots = pool_slots_for(task_instance.task_id, task_instance.map_index, getattr(dag_run, "conf", None), tickets)
    if slots is not None:
        task_instance.pool_slots = slots
