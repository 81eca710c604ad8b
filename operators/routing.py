"""Per-target pool slots for the Neuron compile and smoke tasks: `pool_slots = tp`.

Airflow fixes a mapped task's `pool_slots` in `partial()`, the same for every mapped instance, but a
run's targets have different tensor-parallel degrees. Airflow's documented way to adjust a task
instance from the run's configuration is the `task_instance_mutation_hook` cluster policy, which the
scheduler calls as it creates each mapped instance, with the `dag_run` (and so `dag_run.conf`).
`docker/airflow_local_settings.py` installs `task_instance_mutation_hook` below; copy it to
`$AIRFLOW_HOME/config/` (the images and `make demo` do).

Map index i of the `neuron_target` group is the run's i-th target of a Neuron backend:
`neuron_tickets` keeps the order of `conf["targets"]` and drops the cpu ones (a target's own
`backend`, else the run's, else the form's default `cpu`).
"""

from __future__ import annotations

from typing import Any

DAG_ID = "neuronforge_compile_publish"
SIZED_TASKS = ("neuron_target.compile_graphs", "neuron_target.smoke")


def pool_slots_for(task_id: str, map_index: int, conf: dict[str, Any] | None) -> int | None:
    """The pool slots a task instance needs, or None to leave it as declared."""
    if task_id not in SIZED_TASKS or map_index is None or map_index < 0:
        return None
    conf = conf or {}
    targets = conf.get("targets")
    if not isinstance(targets, list):
        return None
    neuron = [t for t in targets if isinstance(t, dict) and (t.get("backend") or conf.get("backend") or "cpu") != "cpu"]
    if map_index >= len(neuron):
        return None
    tp = neuron[map_index].get("tp_degree")
    return tp if isinstance(tp, int) and tp >= 1 else None


def task_instance_mutation_hook(task_instance: Any, dag_run: Any = None) -> None:
    """Cluster policy: size the Neuron compile / smoke task instances by their target's tp degree."""
    if getattr(task_instance, "dag_id", None) != DAG_ID or dag_run is None:
        return
    slots = pool_slots_for(task_instance.task_id, task_instance.map_index, getattr(dag_run, "conf", None))
    if slots is not None:
        task_instance.pool_slots = slots
