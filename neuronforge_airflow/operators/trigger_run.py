"""`TriggerRunOperator`: trigger a run of another DAG (and optionally wait for it, deferred) with the
Task SDK alone.

Why not the standard provider's `TriggerDagRunOperator`: its module imports the scheduler's models
(`airflow.models.dagrun`, `taskinstance`, `serialized_dag`, the API's `trigger_dag`: ~200 modules,
0.3-0.8 s) when the DAG file is parsed — by the dag-processor every loop and by every task of the DAG
before it runs — although in Airflow 3 it uses none of them to trigger: its `execute` raises the Task
SDK's `DagRunTriggerException`, and the task runner creates the run through the execution API and,
with `wait_for_completion` and `deferrable`, defers on `DagStateTrigger` (resumed in
`execute_complete`). This operator raises the same exception with the same fields, so the triggered
run, `skip_when_already_exists`, the deferred wait and the `trigger_run_id` XCom are the task
runner's, as before; the "Triggered DAG" link is computed on the worker from the run id.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any, ClassVar

from airflow.sdk import BaseOperator, BaseOperatorLink

log = logging.getLogger(__name__)

# The DagRunState values a wait can end on.
FINISHED_STATES = ("success", "failed")


class TriggeredRunLink(BaseOperatorLink):
    """The triggered run's page ("Triggered DAG", as the standard operator's link is named). Airflow 3
    stores a link's URL in an XCom when the task ends (the task runner's `finalize` calls `get_link`),
    so the API server needs no class of ours to show it."""

    name = "Triggered DAG"

    def get_link(self, operator: Any, *, ti_key: Any) -> str:
        from urllib.parse import quote

        from airflow.sdk.configuration import conf

        base = conf.get("api", "base_url", fallback="/").rstrip("/")
        return f"{base}/dags/{operator.trigger_dag_id}/runs/{quote(str(operator.trigger_run_id), safe='')}"


class TriggerRunOperator(BaseOperator):
    """Create run `trigger_run_id` of `trigger_dag_id` with `conf`; with `wait_for_completion`, wait until
    it is in one of `allowed_states` or `failed_states` (deferred when `deferrable`: no worker slot held,
    polled every `poke_interval` s) and fail on a `failed_states` one. A run that already exists skips
    the task with `skip_when_already_exists` (a retried trigger does not start a second run), else
    fails it."""

    template_fields: Sequence[str] = (
        "trigger_dag_id",
        "trigger_run_id",
        "conf",
        "wait_for_completion",
        "skip_when_already_exists",
    )
    template_fields_renderers: ClassVar[dict[str, str]] = {"conf": "py"}
    ui_color = "#ffefeb"
    operator_extra_links = (TriggeredRunLink(),)

    def __init__(
        self,
        *,
        trigger_dag_id: str,
        trigger_run_id: str,
        conf: dict[str, Any] | None = None,
        wait_for_completion: bool = False,
        deferrable: bool = False,
        poke_interval: int = 60,
        allowed_states: Sequence[str] = ("success",),
        failed_states: Sequence[str] = ("failed",),
        skip_when_already_exists: bool = False,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        unknown = sorted({str(s) for s in (*allowed_states, *failed_states)} - set(FINISHED_STATES))
        if unknown:
            raise ValueError(f"{self.task_id}: a run cannot end in {unknown}; wait for {list(FINISHED_STATES)}")
        self.trigger_dag_id, self.trigger_run_id, self.conf = trigger_dag_id, trigger_run_id, conf
        self.wait_for_completion, self.deferrable, self.poke_interval = wait_for_completion, deferrable, poke_interval
        self.allowed_states, self.failed_states = [str(s) for s in allowed_states], [str(s) for s in failed_states]
        self.skip_when_already_exists = skip_when_already_exists

    def execute(self, context: Any) -> None:
        from airflow.sdk.exceptions import DagRunTriggerException

        # The task runner creates the run (execution API), then skips, waits or defers as the fields say.
        raise DagRunTriggerException(
            trigger_dag_id=self.trigger_dag_id,
            dag_run_id=str(self.trigger_run_id),
            conf=self.conf,
            logical_date=datetime.now(tz=UTC),  # as TriggerDagRunOperator without a logical_date
            reset_dag_run=False,
            skip_when_already_exists=self.skip_when_already_exists,
            wait_for_completion=self.wait_for_completion,
            allowed_states=self.allowed_states,
            failed_states=self.failed_states,
            poke_interval=self.poke_interval,
            deferrable=self.deferrable,
        )

    def execute_complete(self, context: Any, event: tuple[str, dict[str, Any]]) -> None:
        """Resumed from the deferred wait: `event` is DagStateTrigger's (its fields, and each run id's state)."""
        from airflow.sdk.exceptions import AirflowException

        _, data = event
        failed = [run_id for run_id in data.get("run_ids") or [] if data.get(run_id) in self.failed_states]
        if failed:
            raise AirflowException(f"{self.trigger_dag_id} run(s) {failed} ended in {self.failed_states}")
        for run_id in data.get("run_ids") or []:
            log.info("%s run %s ended %s", self.trigger_dag_id, run_id, data.get(run_id))
