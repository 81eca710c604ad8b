"""neuronforge_scrub: the store's integrity scrub, daily.

One task, `scrub_store`, checks the next `pages` × `page_size` index pointers of the store after where
the last scrub stopped (`scrub/state.json`; `neuronforge verify --store URI --repair` continues the same
pass): each artifact's pointer, manifest and file sizes, as the pipeline's lookup checks them. What is
damaged (manifest gone, a file missing or of another size) is recorded in the farm index, so the catalog,
`neuronforge ls` and `neuronforge channels` show it damaged with the reason, and no channel takes it;
what is published but missing from the index is indexed again; a recorded damage whose artifact checks
whole again is cleared. The counts (checked, ok, damaged, re-indexed, cleared) are the task's log line
and XCom.

Only wiring: the task lives in `neuronforge_airflow/operators/scrub.py`, the logic in
`neuronforge/farm/scrub.py`.
"""

from __future__ import annotations

import pendulum
from airflow.sdk import dag

from neuronforge.common.deployment_names import SCRUB_DAG
from neuronforge_airflow.operators.scrub import scrub_store
from neuronforge_airflow.params import SCRUB_PARAMS, with_form


@dag(
    dag_id=SCRUB_DAG,
    schedule="@daily",
    start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
    catchup=False,
    max_active_runs=1,
    tags=["neuronforge"],
    doc_md=__doc__,
)
def neuronforge_scrub():
    scrub_store()


with_form(neuronforge_scrub(), SCRUB_PARAMS)  # the form: on the DAG, not copied into its tasks
