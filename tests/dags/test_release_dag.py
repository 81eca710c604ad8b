"""The release DAG and the compile DAG's `promote_to` for real: parsed by a DagBag, run with `dag.test()`
on the SQLite metadata DB against a copy of the session's published build. Every move is an Asset
event on its channel's Asset, and a consumer's DAG scheduled on that Asset is queued by it."""

from __future__ import annotations

import dataclasses
import shutil
from pathlib import Path

import pytest

from neuronforge.artifacts import channels, reviews
from neuronforge.farm.releases import ACTIONS, ReleaseRequest
from neuronforge.stores import open_store
from neuronforge_airflow.operators.releases import channel_asset
from tests.conftest import TARGET, Compiled

RELEASE = "neuronforge_release"
COMPILE = "neuronforge_compile_publish"
CONSUMER = "nf_test_channel_consumer"


@pytest.fixture
def dags(airflow_db: str) -> dict:
    """Parsed afresh for every test (`dag.test(run_conf=...)` leaves the conf in the DAG's params)."""
    from airflow.dag_processing.dagbag import DagBag

    bag = DagBag(dag_folder=str(Path(__file__).resolve().parents[2] / "dags"))
    assert bag.import_errors == {}
    return bag.dags


@pytest.fixture
def store_uri(compiled: Compiled, tmp_path: Path) -> str:
    """A store of its own holding the session's published cpu build (the shared one stays untouched)."""
    shutil.copytree(compiled.store.root_uri.removeprefix("file://"), tmp_path / "store")
    return f"file://{tmp_path / 'store'}"


def _key(store_uri: str) -> str:
    (entry,) = [o.key for o in open_store(store_uri).list("index")]
    return entry.removeprefix("index/").removesuffix(".json")


def _release(dags: dict, store_uri: str, **request) -> tuple:
    """A run of the release DAG, its task given retries as a deployment may (so a failure that is not
    retried is seen to be so); (the run, its task instance of `release`)."""
    from datetime import timedelta

    task = dags[RELEASE].get_task("release")
    task.retries, task.retry_delay = 2, timedelta(seconds=0)
    run = dags[RELEASE].test(run_conf={"store": store_uri, **request})
    (ti,) = run.get_task_instances()
    return run, ti


def _xcom(run, dag_id: str, task_id: str):
    from airflow.models.xcom import XComModel
    from airflow.utils.session import create_session

    with create_session() as session:
        row = (
            session.query(XComModel)
            .filter_by(dag_id=dag_id, run_id=run.run_id, task_id=task_id, key="return_value")
            .one_or_none()
        )
        return None if row is None else XComModel.deserialize_value(row)


def _channel_events(run) -> list[tuple[str, str, str, dict]]:
    """The run's events on channel Assets: (producing task, asset name, asset URI, extra)."""
    from airflow.models.asset import AssetEvent
    from airflow.utils.session import create_session

    with create_session() as session:
        events = session.query(AssetEvent).filter(AssetEvent.source_run_id == run.run_id).all()
        return [
            (e.source_task_id, e.asset.name, e.asset.uri, dict(e.extra))
            for e in events
            if e.asset.name.startswith("neuronforge/channel/")
        ]


def _said(capfd: pytest.CaptureFixture[str]) -> str:
    """What the runs logged since the last call (`dag.test` logs each task to this process's output)."""
    out, err = capfd.readouterr()
    return out + err


def test_the_form_is_the_release_requests_fields(dags) -> None:
    dag = dags[RELEASE]
    fields = [f.name for f in dataclasses.fields(ReleaseRequest)]
    assert list(dag.params) == [*fields, "store"]
    action = dag.params.get_param("action")
    # a default, or Airflow's form keeps Trigger disabled (tests/plugins/test_catalog_channels_browser.py)
    assert action.schema["enum"] == list(ACTIONS) and action.value == "promote"
    assert dag.params["steps"] == 1 and dag.params.get_param("steps").schema["type"] == "integer"
    assert all(dag.params[f] is None and "null" in dag.params.get_param(f).schema["type"] for f in fields[1:6])
    assert type(dag.timetable).__name__ == "NullTimetable"  # no schedule: triggered only
    (task,) = dag.tasks
    assert [o.name for o in task.outlets] == ["neuronforge-channels"]


def test_channel_asset_names_the_record_with_an_absolute_file_uri(tmp_path: Path, monkeypatch) -> None:
    s3 = channel_asset("s3://bucket/store/", "meta-llama/Llama-3.1-8B", "vllm-neuron@2.26.1", "stable")
    assert s3.name == "neuronforge/channel/meta-llama/Llama-3.1-8B/vllm-neuron/stable"
    assert s3.uri == "s3://bucket/store/channels/meta-llama/Llama-3.1-8B/vllm-neuron/stable/channel.json"
    monkeypatch.chdir(tmp_path)
    local = channel_asset("store", "builtin:tiny-llama", "cpu", "candidate")
    assert local.uri == f"file://{tmp_path}/store/channels/builtin/tiny-llama/cpu/candidate/channel.json"
    assert channel_asset(f"file://{tmp_path}/store", "builtin:tiny-llama", "cpu", "candidate") == local
    from neuronforge.common.errors import InvalidInput

    with pytest.raises(InvalidInput, match="channel 'Stable!'"):
        channel_asset("s3://bucket", "org/m", "cpu", "Stable!")


def _consumer(tmp_path: Path, asset) -> None:
    """A consumer's DAG scheduled on `asset`, parsed and written to the metadata DB and unpaused, as
    a deployment's dag-processor and its owner would."""
    from airflow.dag_processing.bundles.manager import DagBundlesManager
    from airflow.dag_processing.dagbag import DagBag, sync_bag_to_db
    from airflow.models.dag import DagModel
    from airflow.utils.session import create_session

    folder = tmp_path / "consumer-dags"
    folder.mkdir()
    (folder / "consumer.py").write_text(
        "import pendulum\n"
        "from airflow.sdk import Asset, dag, task\n\n"
        f"@dag(dag_id={CONSUMER!r}, schedule=[Asset(name={asset.name!r}, uri={asset.uri!r})],\n"
        "     start_date=pendulum.datetime(2026, 1, 1, tz='UTC'), catchup=False)\n"
        "def consumer():\n"
        "    @task\n"
        "    def redeploy():\n"
        "        return None\n\n"
        "    redeploy()\n\n\n"
        "consumer()\n"
    )
    with create_session() as session:
        DagBundlesManager().sync_bundles_to_db(session=session)
    bag = DagBag(dag_folder=str(folder))
    assert bag.import_errors == {}
    sync_bag_to_db(bag, "dags-folder", None)
    with create_session() as session:
        session.query(DagModel).filter(DagModel.dag_id == CONSUMER).update({"is_paused": False})


def _queued_for(dag_id: str) -> int:
    from airflow.models.asset import AssetDagRunQueue
    from airflow.utils.session import create_session

    with create_session() as session:
        return session.query(AssetDagRunQueue).filter(AssetDagRunQueue.target_dag_id == dag_id).count()


def test_approve_then_promote_to_stable_emits_the_channels_event_and_queues_its_consumer(
    dags, compiled: Compiled, store_uri: str, tmp_path: Path
) -> None:
    model = str(compiled.checkpoint)
    key = _key(store_uri)
    asset = channel_asset(store_uri, model, "cpu", "stable")
    _consumer(tmp_path, asset)
    before = _queued_for(CONSUMER)

    approved, _ = _release(dags, store_uri, action="approve", build=key[:12], reason="looked at it")
    assert str(approved.state) == "success"
    assert _xcom(approved, RELEASE, "release")["line"] == f"build {key[:12]} approved by dag_test: looked at it"
    assert reviews.state_of(open_store(store_uri), key) == "approved"
    assert _channel_events(approved) == []  # a review moves no channel

    conf = {"action": "promote", "model": model, "profile": "cpu@local", "channel": "stable", "build": key[:12]}
    promoted, _ = _release(dags, store_uri, **conf, reason="first release")
    assert str(promoted.state) == "success"
    outcome = _xcom(promoted, RELEASE, "release")
    assert outcome["changed"] and outcome["key"] == key and outcome["previous"] == ""
    assert outcome["line"].endswith(f"stable: promote to {key[:12]} (new channel)")
    record = channels.get(open_store(store_uri), channels.ChannelRef.parse(model, "cpu", "stable"))
    assert record.current.by == "dag_test" and record.current.reason == "first release"
    ((task, name, uri, extra),) = _channel_events(promoted)
    assert (task, name, uri) == ("release", asset.name, asset.uri)
    assert uri == f"{store_uri}/{record_key(model)}"
    assert extra == {
        "key": key,
        "previous": "",
        "action": "promote",
        "by": "dag_test",
        "model": model,
        "profile": "cpu",
        "channel": "stable",
    }
    assert _queued_for(CONSUMER) == before + 1  # the consumer's next run is queued by the event

    # The same request again changes nothing: the run succeeds, says so, and emits no event.
    again, _ = _release(dags, store_uri, **conf)
    assert str(again.state) == "success" and _channel_events(again) == []
    assert _xcom(again, RELEASE, "release")["changed"] is False


def record_key(model: str) -> str:
    return channels.ChannelRef.parse(model, "cpu", "stable").record_key


def test_a_refused_promotion_fails_the_run_at_once_with_its_line(
    dags, compiled: Compiled, store_uri: str, capfd: pytest.CaptureFixture[str]
) -> None:
    model = str(compiled.checkpoint)
    key = _key(store_uri)
    conf = {"action": "promote", "model": model, "profile": "cpu", "channel": "stable", "build": key}
    _said(capfd)
    run, ti = _release(dags, store_uri, **conf)
    assert str(run.state) == "failed" and str(ti.state) == "failed" and ti.try_number == 1  # no retry
    log = _said(capfd)
    assert f"AirflowFailException: refused: channel stable requires an approved build and {key[:12]} is pending" in log
    assert _channel_events(run) == []
    assert channels.read(open_store(store_uri), channels.ChannelRef.parse(model, "cpu", "stable")) == (None, "")

    # A rejected build: no channel takes it, not even one without approval.
    rejected, _ = _release(dags, store_uri, action="reject", build=key, reason="wrong tokens")
    assert str(rejected.state) == "success"
    run, ti = _release(dags, store_uri, **{**conf, "channel": "candidate"})
    assert str(run.state) == "failed"
    assert f"AirflowFailException: refused: build {key[:12]} is rejected (wrong tokens)" in _said(capfd)


@pytest.mark.parametrize(
    ("conf", "said"),
    [
        ({"action": "promote", "chanel": "stable"}, "'chanel' (did you mean 'channel'?)"),
        ({"action": "promote", "channel": "stable"}, "promote: give the model, the serving profile and the channel"),
        ({"action": "reject", "build": "0123456789ab"}, "reject: give the reason"),
    ],
)
def test_bad_input_fails_with_one_sentence(
    dags, store_uri: str, conf: dict, said: str, capfd: pytest.CaptureFixture[str]
) -> None:
    run, ti = _release(dags, store_uri, **conf)
    assert str(run.state) == "failed" and ti.try_number == 1
    assert said in _said(capfd)


def test_promote_to_after_a_cache_hit_promotes_it_and_a_refusal_keeps_the_run_green(
    dags, compiled: Compiled, store_uri: str
) -> None:
    model = str(compiled.checkpoint)
    key = _key(store_uri)
    conf = {"model": model, "store": store_uri, "targets": [TARGET], "max_new_tokens": 6}

    hit = dags[COMPILE].test(run_conf={**conf, "promote_to": "candidate"})
    assert str(hit.state) == "success"
    (reported,) = _xcom(hit, COMPILE, "expand_targets")["targets"]
    assert reported["status"] == "cache-hit"
    assert reported["promotion"]["promoted"] is True and reported["promotion"]["key"] == key
    ((task, name, _, extra),) = _channel_events(hit)
    assert task == "expand_targets" and name == channel_asset(store_uri, model, "cpu", "candidate").name
    assert (extra["key"], extra["channel"], extra["action"]) == (key, "candidate", "promote")
    record = channels.get(open_store(store_uri), channels.ChannelRef.parse(model, "cpu", "candidate"))
    assert record.current.build.key == key and record.current.build.smoke.passed is True

    # stable takes only approved builds: refused, reported, the build still published, the run green.
    refused = dags[COMPILE].test(run_conf={**conf, "promote_to": "stable"})
    assert str(refused.state) == "success"
    (reported,) = _xcom(refused, COMPILE, "expand_targets")["targets"]
    assert reported["status"] == "cache-hit" and reported["promotion"]["promoted"] is False
    assert reported["promotion"]["refused"].startswith("refused: channel stable requires an approved build")
    assert _channel_events(refused) == []


def test_a_gated_promote_logs_the_comparison_then_refuses_or_accepts_as_the_cli_does(
    dags, tmp_path: Path, capfd: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    """Hand-made builds whose smoke results carry a measurement (`tests.releases.measured`): stable serves
    one at 10 ms per token, the candidate takes 12 ms."""
    from neuronforge_airflow.operators.releases import promote_published
    from tests.releases.builds import MODEL, publish
    from tests.releases.measured import measured

    uri = f"file://{tmp_path / 'store'}"
    store = open_store(uri)
    serving, slower = publish(store, 1, smoke=measured(0.010)), publish(store, 2, smoke=measured(0.012))
    for key in (serving, slower):
        reviews.decide(store, key, "approved", "alice", "", channels.now())
    stable = channels.ChannelRef.parse(MODEL, "cpu", "stable")
    channels.promote(store, stable, build=serving)
    before = store.get_bytes(stable.record_key)
    caplog.set_level("INFO", logger="neuronforge_airflow.operators.releases")
    conf = {"action": "promote", "model": MODEL, "profile": "cpu", "channel": "stable", "build": slower[:12]}
    _said(capfd)

    run, ti = _release(dags, uri, **conf)
    assert str(run.state) == "failed" and ti.try_number == 1  # no retry: a retry cannot change it
    row = next(line for line in _task_log(caplog) if line.startswith("per output token, at the target's"))
    assert "10.00 ms" in row and "12.00 ms" in row and "+20.0 %" in row and row.endswith("worse  REGRESSION")
    log = _said(capfd)
    refused = log.index("AirflowFailException: refused: channel stable is gated")
    assert f"{slower[:12]} against {serving[:12]}: regression: per output token" in log[refused:]
    assert store.get_bytes(stable.record_key) == before and _channel_events(run) == []

    # The compile DAG's promote_to never accepts a regression by itself: not promoted, the build stays.
    said = promote_published(store, MODEL, "cpu", slower, "stable", "airflow")
    assert said["promoted"] is False and said["refused"].startswith("refused: channel stable is gated")
    assert store.get_bytes(stable.record_key) == before
    assert any(line.startswith("per output token, at the target's") for line in _task_log(caplog))  # logged too

    accepted, _ = _release(dags, uri, **conf, accept_regression="throughput matters more this week")
    assert str(accepted.state) == "success"
    logged = _task_log(caplog)  # the table, then the move's line
    table = next(i for i, line in enumerate(logged) if line.startswith("per output token, at the target's"))
    assert table < next(i for i, line in enumerate(logged) if "stable: promote to" in line)
    outcome = _xcom(accepted, RELEASE, "release")
    assert outcome["comparison"]["verdict"] == "regression" and outcome["key"] == slower
    move = channels.get(store, stable).current
    assert move.accepted_regression == "throughput matters more this week"
    assert move.comparison.startswith(f"{slower[:12]} against {serving[:12]}: regression")
    ((_, _, _, extra),) = _channel_events(accepted)
    assert (extra["key"], extra["previous"]) == (slower, serving)


def _task_log(caplog: pytest.LogCaptureFixture) -> list[str]:
    """What the release task logged since the last call, line by line."""
    said = [r.getMessage() for r in caplog.records if r.name == "neuronforge_airflow.operators.releases"]
    caplog.clear()
    return said
