"""The recompile DAG for real (`dag.test()`, SQLite): it triggers real `neuronforge_compile_publish`
runs (created in the metadata DB); the test then plays the scheduler and runs each created run's conf
through the compile DAG. The Neuron SDK is the FAKE one under tests/fakes, "upgraded" between runs."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from neuronforge.stores import open_store
from tests.conftest import NEURON_TARGET, TARGET, Compiled

RECOMPILE = "neuronforge_recompile_on_upgrade"
COMPILE = "neuronforge_compile_publish"


def _parse() -> dict:
    """The DAGs as the dag processor parses them now: they read the profile registry when parsed."""
    from airflow.dag_processing.dagbag import DagBag

    bag = DagBag(dag_folder=str(Path(__file__).resolve().parents[2] / "dags"))
    assert bag.import_errors == {}
    return bag.dags


@pytest.fixture
def dags(airflow_db: str):
    return _parse()


def _register_release(monkeypatch: pytest.MonkeyPatch, sdk_release: str, compiler_version: str):
    """A new SDK release as a deployment adds it: a new version of the vllm-neuron profile in the
    registry (and so a choice of the compile DAG's form). Returns the profile."""
    from neuronforge.profiles import registry
    from neuronforge.profiles.base import Pins
    from neuronforge.profiles.vllm_neuron import PROFILE, VllmNeuronProfile
    from neuronforge_airflow.params import TARGET_SCHEMA

    class Release(VllmNeuronProfile):
        pins = Pins(sdk_release, compiler_version, dict(PROFILE.pins.packages))

    profile = Release()
    registered = registry.all_profiles()
    monkeypatch.setattr(registry, "all_profiles", lambda: (*registered, profile))
    choices = TARGET_SCHEMA["properties"]["profile"]
    monkeypatch.setitem(choices, "enum", [*choices["enum"], profile.ref])
    return profile


def test_dag_parses_daily_with_the_toolchain_watch_on_neuron_workers(dags) -> None:
    from neuronforge.profiles import neuron_queues

    dag = dags[RECOMPILE]
    tasks = {t.task_id: t for t in dag.tasks}
    # One watch per toolchain queue, on that queue (CPU workers of the SDK image).
    assert "neuron-compile-2.26.1" in neuron_queues()
    watches = {f"watch_toolchain_{q.replace('-', '_').replace('.', '_')}": q for q in neuron_queues()}
    assert {t for t in tasks if t.startswith("watch_toolchain")} == set(watches)
    watch = tasks["watch_toolchain_neuron_compile_2_26_1"]
    assert watch.queue == "neuron-compile-2.26.1" and tasks["find_stale"].queue == "default"
    assert all(tasks[t].queue == q for t, q in watches.items())
    # The worker check runs first, on the default queue, and gates the Neuron watches.
    assert tasks["check_workers"].queue == "default" and not tasks["check_workers"].upstream_task_ids
    assert tasks["check_workers"].downstream_task_ids == {*watches, "find_stale"}
    assert tasks["find_stale"].upstream_task_ids == {*watches, "check_workers", "sync_releases"}
    assert not tasks["sync_releases"].upstream_task_ids and tasks["sync_releases"].queue == "default"
    assert watch.retries == 0 and watch.execution_timeout.total_seconds() <= 600
    assert [o.name for o in tasks["report"].outlets] == ["neuronforge-recompile-report"]
    assert tasks["report"].trigger_rule == "all_done" and tasks["find_stale"].trigger_rule == "all_done"
    trigger = tasks["trigger_rebuilds"].partial_kwargs
    assert trigger["trigger_dag_id"] == COMPILE
    # Throttled rebuilds: deferred waits, at most 2 in flight, a failed rebuild ends its wait too.
    assert trigger["deferrable"] is True and trigger["max_active_tis_per_dagrun"] == 2
    assert trigger["failed_states"] == [] and set(trigger["allowed_states"]) == {"success", "failed"}
    assert set(dag.params) == {"catalog", "store", "sdk", "migrate", "dry_run", "wait_minutes", "throttle_rebuilds"}
    assert dag.max_active_runs == 1 and dag.timetable.expression == "0 0 * * *"
    assert dag.params["catalog"] is None and dag.params["store"] is None  # the form's defaults trigger
    # Two attests whatever releases are registered: the cpu builds' on the default queue, and the Neuron
    # hosts' of the run's release, mapped over what route_attests returns (the cluster policy routes each).
    assert {t for t in tasks if t.startswith("attest_kept")} == {"attest_kept_default", "attest_kept_neuron"}
    assert tasks["attest_kept_default"].queue == "default"
    neuron = tasks["attest_kept_neuron"]
    assert neuron.partial_kwargs["queue"] == "neuron-unrouted" and neuron.upstream_task_ids >= {"route_attests"}
    assert tasks["route_attests"].queue == "default" and tasks["route_attests"].upstream_task_ids == {"find_stale"}
    assert {"attest_kept_default", "attest_kept_neuron"} <= tasks["report"].upstream_task_ids


def _catalog(tmp_path: Path, model_a: Path, model_b: Path) -> Path:
    target = json.dumps(TARGET)
    # bare: the newest version for the family, up to the run's `sdk` (the tests aim at 2.26.1, then 2.27.0)
    nxdi = json.dumps({**NEURON_TARGET, "profile": "vllm-neuron"})
    path = tmp_path / "models.yaml"
    path.write_text(
        f"models:\n  - source: {model_a}\n    targets:\n      - {target}\n"
        f"  - source: {model_b}\n    targets:\n      - {nxdi}\n"
    )
    return path


def _created_runs(seen: set[str]) -> list:
    """compile runs the recompile DAG created (queued in the metadata DB) since `seen`."""
    from airflow.models.dagrun import DagRun
    from airflow.utils.session import create_session
    from sqlalchemy import select

    with create_session() as session:
        runs = session.scalars(select(DagRun).where(DagRun.dag_id == COMPILE)).all()
        new = [(r.run_id, dict(r.conf or {})) for r in runs if r.run_id.startswith("recompile__")]
    out = sorted((r for r in new if r[0] not in seen), key=lambda r: r[0])
    seen.update(r[0] for r in out)
    return out


def _report(store_uri: str, run) -> dict:
    store = open_store(store_uri)
    (ti,) = [ti for ti in run.get_task_instances() if ti.task_id == "report"]
    assert str(ti.state) == "success"
    return store.read_json(report_key_of(store_uri, "json"))


def _play_scheduler(dags, runs: list) -> None:
    for _, conf in runs:
        done = dags[COMPILE].test(run_conf={**conf, "max_new_tokens": 6})
        assert str(done.state) == "success"


def test_an_sdk_upgrade_rebuilds_exactly_the_stale_targets(
    dags,
    compiled: Compiled,
    home: Path,
    tmp_path: Path,
    fake_neuron: Path,
    upgrade_fake_neuron,
    neuron_deployment,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    model_b = tmp_path / "model-b"
    shutil.copytree(compiled.checkpoint, model_b)
    catalog = _catalog(tmp_path, compiled.checkpoint, model_b)
    store_uri = f"file://{tmp_path / 'store'}"
    # Unthrottled: dag.test has no scheduler to run the compile runs a throttled trigger would wait for.
    conf = {"catalog": str(catalog), "store": store_uri, "wait_minutes": 0, "throttle_rebuilds": False}
    # The upgrade as it was played before 2.28.0 existed: first the catalog on SDK 2.26.1, then on 2.27.0.
    conf["sdk"] = "2.26.1"
    seen: set[str] = set()

    # 1. Nothing published yet: both targets stale, one compile run per model, in catalog order.
    first = dags[RECOMPILE].test(run_conf=conf)
    assert str(first.state) == "success"
    created = _created_runs(seen)
    assert [c["model"] for _, c in created] == [str(compiled.checkpoint), str(model_b)]
    assert [t["profile"] for _, c in created for t in c["targets"]] == ["cpu@local", "vllm-neuron@2.26.1"]
    assert {c["promote_to"] for _, c in created} == {"candidate"}  # what a rebuild publishes goes to candidate
    report = _report(store_uri, first)
    assert report["counts"]["stale"] == 2 and report["counts"]["queued"] == 2
    assert report["toolchains"]["vllm-neuron@2.26.1"]["compiler_version"] == "2.21.33363.0+82129205"
    _play_scheduler(dags, created)
    compiles_v1 = fake_neuron.read_text().count("\n")
    assert compiles_v1 >= 1

    # 2. SDK 2.27.0 is released: a new version of the vllm-neuron profile, whose worker image (queue
    # neuron-compile-2.27.0) has its toolchain. The catalog's bare `vllm-neuron` follows it: only that target
    # is stale, for 2.27.0 (published for 2.26.1); the cpu one is skipped.
    # Airflow rewrites a serialized DAG at most every [core] min_serialized_dag_update_interval (30 s):
    # the compile DAG was just written by step 1's runs, and its form must now accept the new version.
    monkeypatch.setenv("AIRFLOW__CORE__MIN_SERIALIZED_DAG_UPDATE_INTERVAL", "0")
    v2 = _register_release(monkeypatch, "2.27.0", "2.22.12471.0+b4a00d10")
    upgrade_fake_neuron("2.22.12471.0+b4a00d10", release="2.27.0")  # its image: neuronx-cc 2.22.12471.0+b4a00d10
    dags = _parse()  # re-parsed: a toolchain watch and a compile task group for queue neuron-compile-2.27.0
    conf["sdk"] = "2.27.0"
    second = dags[RECOMPILE].test(run_conf=conf)
    tis = {ti.task_id: str(ti.state) for ti in second.get_task_instances()}
    # Only the queue the catalog's profile versions need is watched.
    assert (
        tis["watch_toolchain_neuron_compile_2_27_0"] == "success"
        and tis["watch_toolchain_neuron_compile_2_26_1"] == "skipped"
    )
    created = _created_runs(seen)
    assert len(created) == 1
    ((_, rebuild),) = created
    assert rebuild["model"] == str(model_b)
    assert [t["profile"] for t in rebuild["targets"]] == [v2.ref] == ["vllm-neuron@2.27.0"]
    report = _report(store_uri, second)
    by_slug = {t["slug"]: t for t in report["targets"]}
    assert [t["status"] for t in report["targets"]] == ["fresh", "stale"]
    assert report["toolchains"]["vllm-neuron@2.27.0"]["compiler_version"] == "2.22.12471.0+b4a00d10"
    assert set(report["profiles"]) == {"cpu@local", "vllm-neuron@2.26.1", "vllm-neuron@2.27.0"}
    stale = next(t for t in by_slug.values() if t["status"] == "stale")
    assert stale["run_id"] == created[0][0] and stale["outcome"] == "queued"
    assert stale["published_for"] == ["vllm-neuron@2.26.1"] and stale["stale_for"] == ["vllm-neuron@2.27.0"]
    md = open_store(store_uri).get_bytes(report_key_of(store_uri, "md")).decode()
    assert "**1 stale**" in md and stale["slug"] in md
    assert "| vllm-neuron@2.27.0 | stale | queued | vllm-neuron@2.26.1 | vllm-neuron@2.27.0 |" in md
    _play_scheduler(dags, created)
    assert fake_neuron.read_text().count("\n") > compiles_v1  # the rebuild compiled again
    store = open_store(store_uri)
    manifests = [o.key for o in store.list("artifacts") if o.key.endswith("/manifest.json")]
    refs = sorted(store.read_json(key)["profile"]["ref"] for key in manifests)
    assert refs == ["cpu@local", "vllm-neuron@2.26.1", "vllm-neuron@2.27.0"]  # the old version's artifact stays
    neffs = {o.key.split("/")[1] for o in open_store(store_uri).list("neuron-cache") if o.key.endswith("model.done")}
    # the compiler's own folder names, full versions: nothing old deleted
    assert {"neuronxcc-2.21.33363.0+82129205", "neuronxcc-2.22.12471.0+b4a00d10"} <= neffs

    # Consumers subscribed to the report's Asset get the report's URIs and counts.
    from airflow.models.asset import AssetEvent
    from airflow.utils.session import create_session

    with create_session() as session:
        (event,) = session.query(AssetEvent).filter(AssetEvent.source_run_id == second.run_id).all()
        assert event.asset.name == "neuronforge-recompile-report"
        extra = dict(event.extra)
    assert extra["json"] == f"{store_uri}/{report_key_of(store_uri, 'json')}" and extra["counts"]["stale"] == 1
    assert extra["runs"] == [created[0][0]]
    # The rebuild went to candidate (the 2.26.1 build it replaced is the channel's history); stable, read
    # for each model and profile line, was never moved: the report says so.
    from neuronforge.artifacts import channels

    candidate = channels.get(store, channels.ChannelRef.parse(str(model_b), "vllm-neuron", "candidate"))
    assert [m.build.profile for m in candidate.moves] == ["vllm-neuron@2.27.0", "vllm-neuron@2.26.1"]
    assert candidate.current.build.key == stale["key"]
    assert extra["stable"] == [
        {"model": str(compiled.checkpoint), "profile": "cpu", "channel": "stable", "key": None},
        {"model": str(model_b), "profile": "vllm-neuron", "channel": "stable", "key": None},
    ]

    # 3. Everything is current: nothing stale, nothing triggered.
    third = dags[RECOMPILE].test(run_conf=conf)
    assert _created_runs(seen) == []
    report = _report(store_uri, third)
    assert report["counts"] == {"fresh": 2} and report["runs"] == []
    assert [t["published_for"] for t in report["targets"]] == [
        ["cpu@local"],
        ["vllm-neuron@2.26.1", "vllm-neuron@2.27.0"],
    ]


def report_key_of(store_uri: str, suffix: str) -> str:
    keys = sorted(o.key for o in open_store(store_uri).list("reports") if o.key.endswith(f".{suffix}"))
    return keys[-1]


def test_a_bad_catalog_schedules_nothing(dags, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NEURONFORGE_HOME", str(tmp_path / "home"))
    catalog = tmp_path / "models.yaml"
    catalog.write_text(
        "models:\n  - source: org/model\n    targets:\n      - {instance_type: inf9.huge, tp_degree: 2}\n"
    )
    store_uri = f"file://{tmp_path / 'store'}"
    run = dags[RECOMPILE].test(run_conf={"catalog": str(catalog), "store": store_uri, "wait_minutes": 0})
    states = {ti.task_id: str(ti.state) for ti in run.get_task_instances()}
    assert states["find_stale"] == "failed" and states["trigger_rebuilds"] == "upstream_failed"
    assert states["report"] == "skipped" and not open_store(store_uri).list("reports")


def test_without_a_neuron_worker_the_cpu_targets_are_still_checked(
    dags, compiled: Compiled, home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from neuronforge.profiles.vllm_neuron import PROFILE

    def detect(self, *args):  # the queue's watch fails, as at the scheduler's queued-task timeout
        raise RuntimeError("no worker on queue neuron-2.26.1")

    monkeypatch.setattr(type(PROFILE.backend), "detect_toolchain", detect)
    catalog = _catalog(tmp_path, compiled.checkpoint, compiled.checkpoint)
    shutil.copytree(compiled.store.root_uri.removeprefix("file://"), tmp_path / "store")  # not the shared one
    store_uri = f"file://{tmp_path / 'store'}"
    conf = {"catalog": str(catalog), "store": store_uri, "dry_run": True, "sdk": "2.26.1"}
    run = dags[RECOMPILE].test(run_conf=conf)
    states = {ti.task_id: str(ti.state) for ti in run.get_task_instances()}
    assert states["watch_toolchain_neuron_compile_2_26_1"] == "failed" and states["find_stale"] == "success"
    report = _report(store_uri, run)
    assert [(t["profile"], t["status"]) for t in report["targets"]] == [
        ("cpu@local", "fresh"),
        ("vllm-neuron@2.26.1", "unavailable"),
    ]
    assert report["runs"] == [] and report["targets"][1]["detail"] == (
        "no worker of queue 'neuron-compile-2.26.1' reported the toolchain of vllm-neuron@2.26.1: "
        "watch_toolchain_neuron_compile_2_26_1 did not succeed"
    )
    assert report["toolchains"]["vllm-neuron@2.26.1"] == report["targets"][1]["detail"]


def test_without_a_celery_worker_on_queue_neuron_the_watch_is_skipped_not_queued(
    dags, compiled: Compiled, home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """CeleryExecutor with workers on the default queue only: `check_workers` decides at once, the
    watch of queue neuron-compile-2.26.1 is never queued (skipped), the Neuron target is unavailable with the
    reason naming the queue."""
    import neuronforge_airflow.operators.recompile

    asked: list[float] = []

    def active_queues(timeout: float = 5.0):
        asked.append(timeout)
        return {"celery@cpu-1": [{"name": "default", "exchange": {"name": "default"}}]}

    monkeypatch.setattr(neuronforge_airflow.operators.recompile, "default_executor", lambda: "CeleryExecutor")
    monkeypatch.setattr(neuronforge_airflow.operators.recompile, "celery_active_queues", active_queues)
    catalog = _catalog(tmp_path, compiled.checkpoint, compiled.checkpoint)
    shutil.copytree(compiled.store.root_uri.removeprefix("file://"), tmp_path / "store")
    store_uri = f"file://{tmp_path / 'store'}"
    conf = {"catalog": str(catalog), "store": store_uri, "dry_run": True, "sdk": "2.26.1"}
    run = dags[RECOMPILE].test(run_conf=conf)
    tis = {ti.task_id: ti for ti in run.get_task_instances()}
    assert asked and str(tis["check_workers"].state) == "success"
    watch = tis["watch_toolchain_neuron_compile_2_26_1"]
    assert str(watch.state) == "skipped" and watch.try_number == 0
    assert str(tis["find_stale"].state) == "success" and str(run.state) == "success"
    report = _report(store_uri, run)
    (neuron,) = [t for t in report["targets"] if t["profile"] == "vllm-neuron@2.26.1"]
    assert neuron["status"] == "unavailable"
    assert neuron["detail"] == (
        "no worker of queue 'neuron-compile-2.26.1' reported the toolchain of vllm-neuron@2.26.1: no Celery worker "
        "consumes queue 'neuron-compile-2.26.1' (workers and their queues: celery@cpu-1: default)"
    )
    assert [t["status"] for t in report["targets"] if t["profile"] == "cpu@local"] == ["fresh"]


def test_an_unknown_conf_key_fails_the_first_task_and_schedules_nothing(dags, tmp_path: Path) -> None:
    """Without the cluster policy (which refuses the trigger itself, tests/dags/test_params.py)."""
    store_uri = f"file://{tmp_path / 'store'}"
    run = dags[RECOMPILE].test(run_conf={"store": store_uri, "wait_minute": 0})
    states = {ti.task_id: str(ti.state) for ti in run.get_task_instances()}
    assert states["check_workers"] == "failed" and states["watch_toolchain_neuron_compile_2_26_1"] == "upstream_failed"
    assert states["find_stale"] == "failed" and states["trigger_rebuilds"] == "upstream_failed"
    assert states["report"] == "skipped" and not open_store(store_uri).list("reports")


def test_past_max_map_length_rebuilds_wait_and_a_kept_build_is_attested_by_the_run(
    dags, compiled: Compiled, home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A catalog of 3 cpu models under `[core] max_map_length` 1: one rebuild run is triggered (more mapped
    triggers than that fail the run), the other stale model waits for the next run; the published one,
    decided `re-smoke` (as `upgrades.decide` decides a build kept at a runtime-only patch release), is
    smoked and attested by the run's attest task on the default queue, never rebuilt. The report leads
    with the summary naming both."""
    from neuronforge.artifacts import attestations
    from neuronforge.farm import upgrades

    monkeypatch.setenv("AIRFLOW__CORE__MAX_MAP_LENGTH", "1")
    kept = upgrades.Upgrade(release="2.33.1", action=upgrades.RESMOKE, line="cpu", family="inf2", decision="re-smoke")
    monkeypatch.setattr(upgrades, "decide", lambda *a, **k: kept)
    models = [compiled.checkpoint, tmp_path / "model-b", tmp_path / "model-c"]
    for model in models[1:]:
        shutil.copytree(compiled.checkpoint, model)
    unbuilt = {**TARGET, "sequence_length": 32}  # the session's build is of TARGET: these are stale
    catalog = tmp_path / "models.yaml"
    catalog.write_text(
        "models:\n"
        + "".join(
            f"  - source: {m}\n    targets:\n      - {json.dumps(TARGET if i == 0 else unbuilt)}\n"
            for i, m in enumerate(models)
        )
    )
    shutil.copytree(compiled.store.root_uri.removeprefix("file://"), tmp_path / "store")  # not the shared one
    store_uri = f"file://{tmp_path / 'store'}"
    conf = {"catalog": str(catalog), "store": store_uri, "wait_minutes": 0, "throttle_rebuilds": False, "sdk": "2.33.1"}
    run = dags[RECOMPILE].test(run_conf=conf)
    tis = {ti.task_id: str(ti.state) for ti in run.get_task_instances()}
    # Without the limit `rebuild_runs` fails: the API server refuses an XCom of 2 items to map over
    # ("unmappable_return_value_length"), and the run's leaf `verdict` still succeeds.
    assert tis["rebuild_runs"] == "success" and tis["trigger_rebuilds"] == "success"
    assert str(run.state) == "success" and tis["attest_kept_default"] == "success"
    assert {s for t, s in tis.items() if t.startswith("attest_kept_neuron")} == {"skipped"}  # nothing there
    report = _report(store_uri, run)
    ((_, rebuild),) = [r for r in _created_runs(set()) if r[0] in report["runs"]]  # the DB holds earlier tests' runs
    assert rebuild["model"] == str(models[1]) and len(report["runs"]) == 1
    assert [(t["status"], t["outcome"]) for t in report["targets"]] == [
        ("fresh", "attested"),
        ("stale", "queued"),
        ("stale", "waiting"),
    ]
    assert "re-smoke passed" in report["targets"][0]["outcome_detail"]
    assert attestations.attested_for(open_store(store_uri), compiled.first.key, "2.33.1", "none")
    md = open_store(store_uri).get_bytes(report_key_of(store_uri, "md")).decode()
    summary = (
        "Neuron SDK 2.33.1: 3 target(s): 3 re-smoke; by line: cpu 3 re-smoke; 1 attested, "
        "1 waiting for the next recompile run"
    )
    assert md.index(summary) < md.index("## Targets")


@pytest.mark.parametrize("worker_queues", [["default", "neuron-2.33.1"], ["default"]], ids=["served", "unserved"])
def test_a_run_at_a_release_without_a_profile_attests_on_its_neuron_hosts_queue(
    dags, policy, compiled: Compiled, home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, worker_queues
) -> None:
    """A run at SDK 2.33.1 — known to the release table, no profile registered for it: a kept build of a
    Neuron profile is smoked on the Neuron hosts of 2.33.1's image. `route_attests` returns queue
    `neuron-2.33.1` when a Celery worker consumes it, and the cluster policy puts the Neuron attest's
    instance there as the scheduler expands it; when none does, the attest is skipped (never queued) and
    the build is reported to attest by hand, the queue and the command said. (The session's cpu build stands
    for a Neuron one: `attest_queue` is what places a Neuron profile's build, tests/test_recompile.py.)"""
    import neuronforge_airflow.operators.recompile as ops
    from neuronforge.artifacts import attestations
    from neuronforge.farm import recompile, upgrades
    from neuronforge.profiles import device_queues
    from neuronforge.profiles.base import neuron_host_queue

    assert "neuron-2.33.1" not in device_queues()  # no registered profile, so no worker image it names
    kept = upgrades.Upgrade(release="2.33.1", action=upgrades.RESMOKE, line="cpu", family="inf2", decision="re-smoke")
    monkeypatch.setattr(upgrades, "decide", lambda *a, **k: kept)
    monkeypatch.setattr(recompile, "attest_queue", lambda s, release: neuron_host_queue(release))
    monkeypatch.setattr(ops, "default_executor", lambda: "CeleryExecutor")
    answer = {"celery@host": [{"name": q} for q in worker_queues]}
    monkeypatch.setattr(ops, "celery_active_queues", lambda timeout=5.0: answer)
    catalog = tmp_path / "models.yaml"
    catalog.write_text(f"models:\n  - source: {compiled.checkpoint}\n    targets:\n      - {json.dumps(TARGET)}\n")
    shutil.copytree(compiled.store.root_uri.removeprefix("file://"), tmp_path / "store")  # not the shared one
    store_uri = f"file://{tmp_path / 'store'}"
    conf = {"catalog": str(catalog), "store": store_uri, "wait_minutes": 0, "sdk": "2.33.1"}
    run = dags[RECOMPILE].test(run_conf=conf)
    tis = {(ti.task_id, ti.map_index): ti for ti in run.get_task_instances()}
    ((target,),) = [_report(store_uri, run)["targets"]]
    assert str(tis[("attest_kept_default", -1)].state) == "skipped"  # no build of its own to attest
    attested = attestations.attested_for(open_store(store_uri), compiled.first.key, "2.33.1", "none")
    if "neuron-2.33.1" in worker_queues:
        neuron = tis[("attest_kept_neuron", 0)]
        assert str(neuron.state) == "success" and neuron.queue == "neuron-2.33.1"  # as the policy routed it
        assert target["outcome"] == "attested" and "re-smoke passed" in target["outcome_detail"] and attested
    else:
        assert str(tis[("attest_kept_neuron", -1)].state) == "skipped" and not attested
        assert target["outcome"] == "to-attest" and target["outcome_detail"] == (
            "no Celery worker consumes queue 'neuron-2.33.1' (workers and their queues: celery@host: default); "
            f"on a Neuron host of SDK 2.33.1: neuronforge attest {compiled.first.key[:12]} --sdk 2.33.1 "
            f"--store {store_uri}"
        )
