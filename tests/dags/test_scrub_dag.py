"""The integrity scrub's DAG for real: parsed by a DagBag (daily, one task), and run with `dag.test()` on the
SQLite metadata DB over a small store holding a damaged artifact: the run records it, its XCom carries the
counts, and the next run goes on where it stopped."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from neuronforge.artifacts import farm_index, layout
from neuronforge.stores import open_store
from tests.releases.builds import publish

SCRUB = "neuronforge_scrub"


@pytest.fixture
def dags(airflow_db: str) -> dict:
    from airflow.dag_processing.dagbag import DagBag

    bag = DagBag(dag_folder=str(Path(__file__).resolve().parents[2] / "dags"))
    assert bag.import_errors == {}
    return bag.dags


def _returned(run) -> dict:
    from airflow.models.xcom import XComModel
    from airflow.utils.session import create_session

    with create_session() as session:
        row = (
            session.query(XComModel)
            .filter_by(dag_id=SCRUB, run_id=run.run_id, task_id="scrub_store", key="return_value")
            .one()
        )
        return XComModel.deserialize_value(row)


def test_the_scrub_dag_is_daily_with_one_task_and_a_described_form(dags) -> None:
    dag = dags[SCRUB]
    assert [t.task_id for t in dag.tasks] == ["scrub_store"]
    assert type(dag.timetable).__name__ == "CronTriggerTimetable" and dag.max_active_runs == 1
    assert list(dag.params) == ["page_size", "pages", "store"]
    assert all(dag.params.get_param(name).description for name in dag.params)


def test_a_run_scrubs_a_page_records_the_damage_and_the_next_run_goes_on(dags, tmp_path: Path) -> None:
    uri = f"file://{tmp_path / 'store'}"
    store = open_store(uri)
    keys = sorted(publish(store, n) for n in range(1, 4))
    store.delete_prefix(json.loads(store.get_bytes(layout.index_entry(keys[0])))["manifest"])

    run = dags[SCRUB].test(run_conf={"store": uri, "page_size": 2, "pages": 1})
    assert run.state == "success"
    first = _returned(run)
    assert (first["checked"], first["damaged"], first["marked"], first["ok"]) == (2, 1, 1, 1)
    assert first["next_cursor"] == keys[1] and not first["done"]
    assert farm_index.read_damage(store, keys[0]).by == "scrub"
    status = {e.key: e.status_class for e in farm_index.read_window(store).entries}
    assert status[keys[0]] == "damaged"

    run = dags[SCRUB].test(run_conf={"store": uri, "page_size": 2, "pages": 1})
    second = _returned(run)
    assert (second["cursor"], second["checked"], second["ok"], second["done"]) == (keys[1], 1, 1, True)


def test_the_task_callable_runs_on_a_small_store(tmp_path: Path) -> None:
    from neuronforge_airflow.operators.scrub import run_scrub

    uri = f"file://{tmp_path / 'store'}"
    store = open_store(uri)
    publish(store, 1)
    report = run_scrub({"store": uri, "page_size": 10, "pages": 1})
    assert (report["checked"], report["ok"], report["damaged"], report["done"]) == (1, 1, 0, True)
