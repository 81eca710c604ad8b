"""neuronforge_recompile_on_upgrade: keep the model catalog compiled for the toolchain the workers run.

Daily and on demand: a Neuron worker reports its toolchain, every catalog entry × target whose key
under that toolchain has no complete manifest is stale, one `neuronforge_compile_publish` run per
model rebuilds its stale targets (created in catalog order; that DAG's `max_active_runs` and the
`neuron_cores` pool bound how many build at once), and the report — stale, rebuilt, failed and why,
still running — goes to this run's last task log, `reports/recompile-<stamp>.{md,json}` in the
store, and the `neuronforge-recompile-report` Asset.

Only wiring: the tasks live in `operators/recompile.py`, the logic in `neuronforge/recompile.py`.
"""

from __future__ import annotations

import pendulum
from airflow.providers.standard.operators.trigger_dagrun import TriggerDagRunOperator
from airflow.sdk import Param, dag

from neuronforge.recompile import COMPILE_DAG
from operators.recompile import AwaitRebuildsOperator, find_stale, rebuild_runs, report, verdict, watch_toolchain


@dag(
    dag_id="neuronforge_recompile_on_upgrade",
    schedule="@daily",
    start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
    catchup=False,
    max_active_runs=1,
    tags=["neuronforge"],
    doc_md=__doc__,
    params={
        "catalog": Param(
            "",
            type="string",
            title="Catalog",
            description="path of the catalog YAML; empty: Variable neuronforge_catalog, NEURONFORGE_CATALOG, "
            "or catalog/models.yaml",
        ),
        "store": Param("", type="string", title="Store URI", description="empty: NEURONFORGE_STORE or the local store"),
        "dry_run": Param(False, type="boolean", title="Dry run", description="report the stale set, trigger nothing"),
        "wait_minutes": Param(
            720,
            type="integer",
            minimum=0,
            title="Wait for rebuilds (minutes)",
            description="how long the report waits (deferred) for the triggered runs; 0: report at once",
        ),
    },
)
def neuronforge_recompile_on_upgrade():
    plan = find_stale(watch_toolchain())
    triggered = TriggerDagRunOperator.partial(
        task_id="trigger_rebuilds",
        trigger_dag_id=COMPILE_DAG,
        wait_for_completion=False,
        skip_when_already_exists=True,  # a retried trigger does not start a second run
    ).expand_kwargs(rebuild_runs(plan))
    waited = AwaitRebuildsOperator(task_id="await_rebuilds", plan=plan, wait_minutes="{{ params.wait_minutes }}")
    triggered >> waited
    summary = report(plan)
    waited >> summary
    verdict(summary)


neuronforge_recompile_on_upgrade()
