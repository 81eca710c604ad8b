"""neuronforge_recompile_on_upgrade: keep the model catalog compiled for the toolchain the workers run.

Daily and on demand: `check_workers` (default queue) refuses a conf with unknown keys and asks
whether any worker consumes the `neuron` queue (Celery only; other executors serve every queue);
if one does, a Neuron worker reports its toolchain, otherwise that watch is skipped at once and the
Neuron targets are reported unavailable. Every catalog entry × target whose key under the toolchain
has no complete manifest is stale; one `neuronforge_compile_publish` run per model rebuilds its
stale targets (in catalog order; throttled by default: at most 2 rebuild runs in flight, each
trigger waiting deferred for its run, so the compile DAG keeps run slots for manual runs), and the
report — stale, rebuilt, failed and why,
still running — goes to this run's last task log, `reports/recompile-<stamp>.{md,json}` in the
store, and the `neuronforge-recompile-report` Asset.

Only wiring: the tasks live in `operators/recompile.py`, the logic in `neuronforge/recompile.py`.
"""

from __future__ import annotations

import pendulum
from airflow.providers.standard.operators.trigger_dagrun import TriggerDagRunOperator
from airflow.sdk import dag

from neuronforge.recompile import COMPILE_DAG
from operators.compile_params import RECOMPILE_PARAMS
from operators.recompile import (
    REBUILD_SLOTS,
    AwaitRebuildsOperator,
    check_workers,
    find_stale,
    rebuild_runs,
    report,
    verdict,
    watch_toolchain,
)


@dag(
    dag_id="neuronforge_recompile_on_upgrade",
    schedule="@daily",
    start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
    catchup=False,
    max_active_runs=1,
    tags=["neuronforge"],
    doc_md=__doc__,
    params=RECOMPILE_PARAMS,
)
def neuronforge_recompile_on_upgrade():
    workers = check_workers()
    toolchains = watch_toolchain()
    workers >> toolchains
    plan = find_stale(toolchains)
    workers >> plan
    triggered = TriggerDagRunOperator.partial(
        task_id="trigger_rebuilds",
        trigger_dag_id=COMPILE_DAG,
        skip_when_already_exists=True,  # a retried trigger does not start a second run
        # Throttled rebuilds (rebuild_runs sets wait_for_completion): each trigger waits, deferred
        # (no worker slot), until its run ends either way, and at most REBUILD_SLOTS wait at once.
        deferrable=True,
        poke_interval=60,
        allowed_states=["success", "failed"],
        failed_states=[],
        max_active_tis_per_dagrun=REBUILD_SLOTS,
    ).expand_kwargs(rebuild_runs(plan))
    waited = AwaitRebuildsOperator(task_id="await_rebuilds", plan=plan, wait_minutes="{{ params.wait_minutes }}")
    triggered >> waited
    summary = report(plan)
    waited >> summary
    verdict(summary)


neuronforge_recompile_on_upgrade()
