"""The `neuronforge_scrub` DAG's task: one bounded, resumable call of the integrity scrub
(`neuronforge.farm.scrub`) — the same as `neuronforge verify --store URI --repair --pages N` — logged in
one line and returned as JSON (the run's XCom). A damaged artifact it finds does not fail the task: it
is recorded in the farm index, where the catalog and `ls` show it; the line names how many."""

from __future__ import annotations

import logging
from typing import Any

from airflow.sdk import get_current_context, task

from neuronforge_airflow.operators.error_policy import by_policy

log = logging.getLogger(__name__)


def run_scrub(params: dict[str, Any]) -> dict[str, Any]:
    """Scrub `params`' store (empty: the deployment's, `NeuronforgeStoreHook`) for `pages` pages of
    `page_size` pointers, after where the last scrub stopped."""
    from neuronforge.farm.scrub import PAGE_SIZE, scrub
    from neuronforge_airflow.hooks.store import open_store

    store = open_store(params.get("store") or None, must_exist=True)
    report = scrub(
        store, None, page_size=int(params.get("page_size") or PAGE_SIZE), pages=int(params.get("pages") or 1)
    )
    (log.warning if report.damaged else log.info)("%s", report.line())
    return report.to_json()


@task
def scrub_store(params: dict[str, Any] | None = None) -> dict[str, Any]:
    """The run's scrub; an error fails the task in its one line (retried only when it may pass)."""
    from neuronforge.common.deployment_names import SCRUB_DAG
    from neuronforge_airflow.params import SCRUB_PARAMS, refuse_unknown_keys

    context = get_current_context()
    params = params or context["params"]
    with by_policy():
        refuse_unknown_keys(context["dag_run"].conf or {}, frozenset(SCRUB_PARAMS), SCRUB_DAG)
        return run_scrub(params)
