"""The DAG for real: parsed by a DagBag, run with `dag.test()` on the SQLite metadata DB."""

from __future__ import annotations

import json
import re
import shutil
import time
from pathlib import Path

import pytest

from neuronforge.artifacts import layout
from neuronforge.spec.target import TargetSpec
from neuronforge.stores import open_store
from tests.conftest import NEURON_TARGET, TARGET, Compiled

DAG_ID = "neuronforge_compile_publish"


@pytest.fixture
def dag(airflow_db: str, neuron_deployment: None):
    """Parsed afresh for every test: `dag.test(run_conf=...)` leaves the conf in the DAG object's
    params, which would leak one test's backend into the next."""
    from airflow.dag_processing.dagbag import DagBag

    bag = DagBag(dag_folder=str(Path(__file__).resolve().parents[2] / "dags"))
    assert bag.import_errors == {}
    return bag.dags[DAG_ID]


def _conf(compiled: Compiled, store: str, targets: list[dict]) -> dict:
    return {"model": str(compiled.checkpoint), "store": store, "targets": targets, "max_new_tokens": 6}


def _states(run) -> dict[tuple[str, int], str]:
    return {(ti.task_id, ti.map_index): str(ti.state) for ti in run.get_task_instances()}


def _events(run) -> list[tuple[str, str, dict]]:
    """The run's Asset events: (producing task, asset URI, extra)."""
    from airflow.models.asset import AssetEvent
    from airflow.utils.session import create_session

    with create_session() as session:
        events = session.query(AssetEvent).filter(AssetEvent.source_run_id == run.run_id).all()
        return [(e.source_task_id, e.asset.uri, e.extra) for e in events]


def _outcome(run) -> dict:
    """What the run's first task returned (its XCom, as the REST API serves it)."""
    from airflow.models.xcom import XComModel
    from airflow.utils.session import create_session

    with create_session() as session:
        row = (
            session.query(XComModel)
            .filter_by(dag_id=DAG_ID, run_id=run.run_id, task_id="expand_targets", key="return_value")
            .one()
        )
        return XComModel.deserialize_value(row)


def test_dag_parses_with_routing_and_form(dag) -> None:
    tasks = {t.task_id: t for t in dag.tasks}
    # Toolchain detection runs where the toolchain is: on the Neuron workers for Neuron targets.
    # One group per queue a registered profile routes to; the SDK 2.26.1 profiles share one.
    assert {t.task_group.group_id for t in dag.tasks if t.task_group.group_id} == {
        "cpu_target",
        "neuron_2_21_1_target",
        "neuron_2_26_1_target",
        "neuron_2_28_0_target",
        "neuron_2_31_1_target",
        "neuron_2_32_0_target",
        "neuron_2_33_0_target",
    }
    # The vLLM Neuron plugin (SDK 2.32.0) compiles on CPU workers of its image, smoke-loads on trn2 hosts.
    native = "neuron_2_32_0_target"
    for name, queue, pool in (
        ("prepare", "neuron-compile-2.32.0", "default_pool"),
        ("compile_graphs", "neuron-compile-2.32.0", "default_pool"),
        ("smoke", "neuron-2.32.0", "neuron_cores"),
    ):
        assert (tasks[f"{native}.{name}"].queue, tasks[f"{native}.{name}"].pool) == (queue, pool)
    # transformers-neuronx (LMI, SDK 2.21.1) compiles only where it can load: on its Neuron hosts.
    lmi = "neuron_2_21_1_target"
    for name in ("compile_graphs", "smoke"):
        assert (tasks[f"{lmi}.{name}"].queue, tasks[f"{lmi}.{name}"].pool) == ("neuron-2.21.1", "neuron_cores")
    assert (tasks[f"{lmi}.prepare"].queue, tasks[f"{lmi}.prepare"].pool) == ("neuron-2.21.1", "default_pool")
    # SDK 2.26.1: toolchain detection and compiling on CPU workers of the SDK image, no NeuronCores;
    # only the smoke test on a Neuron host.
    neuron = "neuron_2_26_1_target"
    assert tasks["cpu_target.prepare"].queue == "default"
    for name in ("prepare", "compile_graphs"):
        assert (tasks[f"{neuron}.{name}"].queue, tasks[f"{neuron}.{name}"].pool) == (
            "neuron-compile-2.26.1",
            "default_pool",
        )
    assert (tasks[f"{neuron}.smoke"].queue, tasks[f"{neuron}.smoke"].pool) == ("neuron-2.26.1", "neuron_cores")
    for name in ("compile_graphs", "smoke"):
        # cpu compiles take no NeuronCores: a deployment without Neuron workers needs no pool.
        assert tasks[f"cpu_target.{name}"].queue == "default" and tasks[f"cpu_target.{name}"].pool == "default_pool"
    for name in ("fetch_checkpoint", "plan_target", "quantize_weights", "publish_artifact"):
        assert tasks[f"{neuron}.{name}"].queue == "default"  # only the toolchain stages go to the SDK's queues
    # Where a build is announced (and, with promote_to, its channel's move): the publish task, and the
    # first task for a target already published.
    for announcer in ("cpu_target.publish_artifact", "expand_targets"):
        assert [o.name for o in tasks[announcer].outlets] == ["neuronforge-artifacts", "neuronforge-channels"]
    assert set(dag.params) == {
        "model",
        "profile",
        "instance_type",
        "tp_degree",
        "batch_size",
        "sequence_length",
        "max_context_length",
        "dtype",
        "quantization",
        "targets",
        "store",
        "prompts",
        "max_new_tokens",
        "promote_to",
        "hub_registry",
    }
    # Registering in an optimum-neuron cache repository is off unless one is named (org/name, or empty).
    registry = dag.params.get_param("hub_registry")
    assert registry.value is None and "null" in registry.schema["type"]
    pattern = registry.schema["pattern"]
    assert re.fullmatch(pattern, "my-org/neuron-cache") and re.fullmatch(pattern, "")
    assert not re.fullmatch(pattern, "../x") and not re.fullmatch(pattern, "a/b/c")
    # Promotion after publishing is off unless a channel is named (a channel's name, or empty).
    promote_to = dag.params.get_param("promote_to")
    assert promote_to.value is None and "null" in promote_to.schema["type"]
    assert re.fullmatch(promote_to.schema["pattern"], "candidate") and re.fullmatch(promote_to.schema["pattern"], "")
    assert not re.fullmatch(promote_to.schema["pattern"], "Stable!")
    # The form's profile choices are the registry's.
    assert set(dag.params.get_param("profile").schema["enum"]) >= {"cpu", "optimum-neuron", "vllm-neuron"}
    assert "vllm-neuron@2.26.1" in dag.params.get_param("profile").schema["enum"]
    schema = dag.params.get_param("targets").schema
    assert "inf2.xlarge" in schema["items"]["properties"]["instance_type"]["enum"]
    assert "optimum-neuron" in schema["items"]["properties"]["profile"]["enum"]


@pytest.mark.parametrize(
    "bad",
    [
        {"targets": [{**TARGET, "tp_degree": 0}]},
        {"targets": [{**TARGET, "instance_type": "inf9.xlarge"}]},
        {"tp_degree": 0},  # a field of the form's own target
        {"instance_type": "inf9.xlarge"},
        {"targets": [{**TARGET, "colour": "red"}]},
        {"profile": "tensorrt"},
        {"profile": "tgi-neuron"},  # refused stacks are not in the form's enum either
        {"max_new_tokens": 0},
    ],
)
def test_invalid_params_are_refused_before_any_task(dag, bad: dict) -> None:
    from airflow.sdk.definitions.param import ParamValidationError

    with pytest.raises(ParamValidationError):
        dag.test(run_conf={"targets": [TARGET], **bad})


def test_a_neuron_target_without_the_pool_fails_at_the_start_with_the_fix(
    dag, compiled: Compiled, home: Path, tmp_path: Path
) -> None:
    """Without the `neuron_cores` pool the compile task would wait forever; the run fails in its
    first task instead, naming the command that fixes it, before any lease or download."""
    from airflow.models.pool import Pool

    Pool.delete_pool("neuron_cores")
    store_uri = f"file://{tmp_path / 'store'}"
    run = dag.test(run_conf=_conf(compiled, store_uri, [{**TARGET, "profile": "vllm-neuron@2.26.1", "tp_degree": 2}]))
    states = _states(run)
    assert states[("expand_targets", -1)] == "failed"
    assert open_store(store_uri).list() == []
    # (the message itself, with the `airflow pools set` command: tests/operators/test_deployment_checks.py)


def test_cold_run_publishes_then_second_run_is_a_hit(dag, compiled: Compiled, home: Path, tmp_path: Path) -> None:
    store_uri = f"file://{tmp_path / 'store'}"
    run = dag.test(run_conf=_conf(compiled, store_uri, [TARGET]))
    assert str(run.state) == "success", _states(run)
    store = open_store(store_uri)
    index = [o.key for o in store.list("index")]
    assert len(index) == 1
    key = index[0].removeprefix("index/").removesuffix(".json")
    manifest_key = store.read_json(layout.index_entry(key))["manifest"]
    manifest = store.read_json(manifest_key)
    assert manifest["smoke"]["passed"] and manifest["compile"]["compiler_invocations"] == 0  # graphs from the cache
    objects = home / "work" / "objects"
    assert objects.is_dir()  # the worker's verified cache of what the run handed between tasks
    shutil.rmtree(objects)  # a second run that fetched or built anything would recreate it

    again = dag.test(run_conf=_conf(compiled, store_uri, [TARGET]))
    assert str(again.state) == "success"
    assert not objects.exists()
    assert store.read_json(manifest_key)["published_at"] == manifest["published_at"]
    # The hit ends the run in its first task: every other task instance (tickets_*, each group) skipped.
    states = _states(again)
    assert states.pop(("expand_targets", -1)) == "success"
    assert states and set(states.values()) == {"skipped"}, states
    # ... and still emits the Asset event consumers subscribe to, the published one's but for its status.
    ((task, uri, extra),) = _events(again)
    ((_, cold_uri, cold_extra),) = _events(run)
    assert task == "expand_targets" and uri == cold_uri
    assert extra == {**cold_extra, "status": "cache-hit"} and extra["manifest_uri"] == store.uri(manifest_key)
    # The run's result says so: "cache hit" with the artifact's manifest URI.
    assert _outcome(again) == {"targets": [{"slug": compiled.target.slug, **extra}], "build": []}


def test_a_mixed_run_builds_only_its_misses_and_the_next_run_hits_all_in_its_first_task(
    dag, compiled: Compiled, home: Path, tmp_path: Path, fake_neuron: Path
) -> None:
    """A cpu target already published and a vllm-neuron target not yet built: the first task reports
    the hit and emits its Asset event, and only the Neuron group runs; its `prepare` records the SDK
    image's toolchain, with which the next run's first task finds both targets published."""
    from types import SimpleNamespace

    from airflow.models.dagrun import DagRun
    from airflow.utils.session import create_session

    from neuronforge_airflow.policies.routing import group_tickets

    store_dir = tmp_path / "store"
    shutil.copytree(compiled.store.root_uri.removeprefix("file://"), store_dir)  # TARGET published
    store_uri = f"file://{store_dir}"
    neuron = {**NEURON_TARGET, "profile": "vllm-neuron@2.26.1"}
    run = dag.test(run_conf=_conf(compiled, store_uri, [TARGET, neuron]))
    states = _states(run)
    assert str(run.state) == "success", states
    assert states[("expand_targets", -1)] == states[("tickets_neuron_2_26_1", -1)] == "success"
    assert states[("neuron_2_26_1_target.publish_artifact", 0)] == "success"
    started = {k for k, v in states.items() if v != "skipped"}
    assert {t for t, _ in started} == {"expand_targets", "tickets_neuron_2_26_1"} | {
        t for t, _ in states if t.startswith("neuron_2_26_1_target.")
    }, states  # tickets_cpu, cpu_target.* and the other SDKs' tasks: skipped
    assert sorted((task, extra["status"]) for task, _, extra in _events(run)) == [
        ("expand_targets", "cache-hit"),
        ("neuron_2_26_1_target.publish_artifact", "published"),
    ]
    hit, left = _outcome(run)["targets"]
    assert hit["status"] == "cache-hit" and hit["manifest_uri"] == compiled.first.published.manifest_uri.replace(
        compiled.store.root_uri, store_uri
    )
    assert left == {"slug": TargetSpec.parse(neuron).slug, "status": "to build", "group": "neuron_2_26_1_target"}
    assert open_store(store_uri).exists("toolchains/vllm-neuron@2.26.1.json")
    # The smoke test holds its target's tp NeuronCores: map index 0 is the group's first ticket.
    smoke = next(ti for ti in run.get_task_instances() if ti.task_id == "neuron_2_26_1_target.smoke")
    assert smoke.pool_slots == 2
    with create_session() as session:
        dag_run = session.query(DagRun).filter_by(dag_id=DAG_ID, run_id=run.run_id).one()
        tickets = group_tickets(SimpleNamespace(task_id=smoke.task_id, map_index=0), dag_run)
    assert [t["target"]["tp_degree"] for t in tickets] == [2]

    again = dag.test(run_conf=_conf(compiled, store_uri, [TARGET, neuron]))
    states = _states(again)
    assert str(again.state) == "success" and states.pop(("expand_targets", -1)) == "success"
    assert set(states.values()) == {"skipped"}, states
    assert [(task, extra["status"]) for task, _, extra in _events(again)] == [("expand_targets", "cache-hit")] * 2
    assert [t["status"] for t in _outcome(again)["targets"]] == ["cache-hit", "cache-hit"]


def test_asset_events_carry_the_manifest(dag, compiled: Compiled, home: Path, tmp_path: Path) -> None:
    from airflow.models.asset import AssetEvent
    from airflow.utils.session import create_session

    store_uri = f"file://{tmp_path / 'store'}"
    run = dag.test(run_conf=_conf(compiled, store_uri, [TARGET]))
    with create_session() as session:
        events = session.query(AssetEvent).filter(AssetEvent.source_run_id == run.run_id).all()
        extras = [e.extra for e in events]
        uris = [e.asset.uri for e in events]
    assert len(extras) == 1 and extras[0]["status"] == "published"
    assert extras[0]["manifest_uri"].startswith(store_uri) and uris[0] == extras[0]["manifest_uri"].rsplit("/", 1)[0]


def test_a_rejected_target_publishes_nothing_and_does_not_block_others(
    dag, compiled: Compiled, home: Path, tmp_path: Path
) -> None:
    store_uri = f"file://{tmp_path / 'store'}"
    bad = {**TARGET, "tp_degree": 4}  # inf2.xlarge has 2 cores
    run = dag.test(run_conf=_conf(compiled, store_uri, [bad, TARGET]))
    states = _states(run)
    # Refused by the planner's static checks in `prepare`: before any lease or download.
    assert states[("cpu_target.prepare", 0)] == "failed"
    assert states[("cpu_target.claim_build", 0)] == "upstream_failed"
    assert states[("cpu_target.publish_artifact", 1)] == "success"
    store = open_store(store_uri)
    published = [o.key for o in store.list("artifacts") if o.key.endswith("/manifest.json")]
    assert len(published) == 1 and "-tp1-" in published[0]
    assert json.loads(store.get_bytes(published[0]))["smoke"]["passed"]
    # The failure is recorded under the target's key: what failed, why, in which run.
    (record,) = store.list("failures")
    failure = store.read_json(record.key)
    assert failure["stage"] == "prepare" and failure["run_id"] == run.run_id
    assert "PlanRejected" in failure["error"] and "tp=4 is not supported" in failure["error"]
    assert len(store.list("locks")) == 1  # only the good target took a lease
    from neuronforge.artifacts import leases

    bad_key = record.key.removeprefix("failures/").removesuffix(".json")
    assert leases.current(store, bad_key) is None  # the rejected target never took a lease


def test_vllm_neuron_profile_end_to_end_with_the_fake_toolchain(
    dag, compiled: Compiled, home: Path, tmp_path: Path, fake_neuron: Path
) -> None:
    """Profile vllm-neuron through the whole DAG, the Neuron SDK replaced by tests/fakes (a test
    double of SDK 2.26.1: neuronx-cc 2.21.33363.0+82129205, NxD Inference 0.6.10598)."""
    store_uri = f"file://{tmp_path / 'store'}"
    conf = {**_conf(compiled, store_uri, [{**NEURON_TARGET}]), "profile": "vllm-neuron@2.26.1"}
    run = dag.test(run_conf=conf)
    states = _states(run)
    assert str(run.state) == "success", states
    assert states[("neuron_2_26_1_target.publish_artifact", 0)] == "success"
    store = open_store(store_uri)
    (index,) = store.list("index")
    manifest_key = store.read_json(index.key)["manifest"]
    manifest = store.read_json(manifest_key)
    paths = {f["path"] for f in manifest["files"]}
    # `neuronforge verify`: every file re-hashed, the profile's preflight passes on a downloaded copy.
    from neuronforge.farm.verify import verify_artifact

    assert verify_artifact(store, manifest_key, tmp_path / "verify").problems == []
    # An NxD Inference compile output is published as what it is (`nxdi/`), never as `optimum/`:
    # NxDI's load(dir) reads neuron_config.json, model.pt and the pre-sharded weights
    # (aws-neuron/neuronx-distributed-inference v0.6.10598, models/application_base.py).
    assert {"nxdi/model.pt", "nxdi/neuron_config.json", "nxdi/config.json", "nxdi/tokenizer.json"} <= paths
    assert {
        "nxdi/weights/tp0_sharded_checkpoint.safetensors",
        "nxdi/weights/tp1_sharded_checkpoint.safetensors",
    } <= paths
    assert not any(p.startswith(("optimum", "lmi/", "split/", "tnx/")) for p in paths)
    assert any(p.startswith("launch/") for p in paths)
    assert manifest["formats"].keys() == {"nxdi", "launch"}
    assert manifest["profile"]["ref"] == "vllm-neuron@2.26.1"
    assert manifest["toolchain"]["compiler_version"] == "2.21.33363.0+82129205"
    assert manifest["toolchain"]["packages"]["neuronx-distributed-inference"] == "0.6.10598"
    # The compile cache keeps the compiler's full version with its local label (libneuronxla's
    # `neuronxcc-<version>/`; optimum-neuron 0.4.5 cache/hub_cache.py: "extended compiler version").
    done = [o.key for o in store.list("neuron-cache/neuronxcc-2.21.33363.0+82129205/") if o.key.endswith("model.done")]
    assert len(done) == 2
    assert manifest["smoke"]["passed"] and manifest["smoke"]["prompts"][0]["matching_prefix"] == 6


def test_optimum_neuron_profile_end_to_end_with_the_fake_toolchain(
    dag, compiled: Compiled, home: Path, tmp_path: Path, fake_optimum: Path
) -> None:
    """Profile optimum-neuron through the whole DAG: the real optimum-neuron package around a FAKE
    `NeuronModelForCausalLM` and a FAKE compiler (tests/fakes), in the compile and smoke children."""
    store_uri = f"file://{tmp_path / 'store'}"
    optimum_target = {k: v for k, v in TARGET.items() if k != "max_context_length"}  # not in optimum's API
    conf = {**_conf(compiled, store_uri, [{**optimum_target, "tp_degree": 2}]), "profile": "optimum-neuron"}
    run = dag.test(run_conf=conf)
    states = _states(run)
    assert str(run.state) == "success", states
    store = open_store(store_uri)
    (index,) = store.list("index")
    manifest = store.read_json(store.read_json(index.key)["manifest"])
    paths = {f["path"] for f in manifest["files"]}
    assert {"optimum-neuron/neuron_config.json", "optimum-neuron/model.pt", "optimum-neuron/config.json"} <= paths
    assert any(p.startswith("launch/") for p in paths)
    assert manifest["toolchain"]["packages"]["optimum-neuron"] == "0.4.5"
    assert manifest["profile"]["ref"] == "optimum-neuron@2.26.1"
    assert manifest["smoke"]["passed"] and manifest["compile"]["compiler_invocations"] == 2
    assert manifest["formats"].keys() == {"optimum-neuron", "launch"}
    assert manifest["compile"]["cache_sync"]["failed"] == ["MODULE_00000000000000000bad+00000000"]


def test_a_quantized_target_through_the_dag(dag, compiled: Compiled, home: Path, tmp_path: Path, fake_neuron: Path):
    """The trigger form's quantization reaches the quantize task, the store and the NxD config."""
    store_uri = f"file://{tmp_path / 'store'}"
    target = {**NEURON_TARGET, "quantization": "int8:per_tensor_symmetric"}
    run = dag.test(run_conf={**_conf(compiled, store_uri, [target]), "profile": "vllm-neuron@2.26.1"})
    states = _states(run)
    assert str(run.state) == "success", states
    assert states[("neuron_2_26_1_target.quantize_weights", 0)] == "success"
    store = open_store(store_uri)
    (index,) = store.list("index")
    manifest = store.read_json(store.read_json(index.key)["manifest"])
    assert manifest["compile"]["quantized"]["uri"].endswith("int8_per_tensor-fp32")
    assert manifest["smoke"]["passed"] and manifest["smoke"]["unquantized_agreement"] is not None
    assert [o for o in store.list("quantized") if o.key.endswith("/MANIFEST.json")]


def test_an_lmi_target_through_the_dag_is_verified(dag, compiled: Compiled, home: Path, tmp_path: Path, fake_tnx: Path):
    """Profile lmi-neuronx end to end in Airflow with the FAKE transformers-neuronx 0.13.380: the
    target runs in the SDK 2.21.1 group (queue neuron-2.21.1), publishes the split model, the
    model.save NEFFs and serving.properties, and `neuronforge verify` passes on the result."""
    from neuronforge.interfaces.cli import main

    store_uri = f"file://{tmp_path / 'store'}"
    target = {**NEURON_TARGET, "profile": "lmi-neuronx"}
    run = dag.test(run_conf=_conf(compiled, store_uri, [target]))
    states = _states(run)
    assert str(run.state) == "success", states
    assert states[("neuron_2_21_1_target.smoke", 0)] == "success"
    assert not [k for k in states if k[0].startswith("neuron_2_26_1_target.") and k[1] >= 0]  # the other SDK's
    store = open_store(store_uri)
    (index,) = store.list("index")
    manifest_key = store.read_json(index.key)["manifest"]
    manifest = store.read_json(manifest_key)
    assert manifest["profile"]["ref"] == "lmi-neuronx@2.21.1"
    assert manifest["toolchain"]["packages"]["transformers-neuronx"] == "0.13.380"
    assert manifest["formats"].keys() == {"split", "launch", "neff_cache"}
    props = (tmp_path / "store" / manifest_key).parent.joinpath("launch/serving.properties").read_text()
    assert "option.model_loader=tnx\n" in props and "option.load_split_model=true\n" in props
    assert main(["verify", store.uri(manifest_key.rpartition("/")[0])]) == 0


def test_a_target_whose_lease_is_held_waits_deferred_then_takes_over(
    dag, compiled: Compiled, home: Path, tmp_path: Path, fake_neuron: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another worker holds the target's lease and dies: claim_build defers (no worker slot) until
    the lease lapses, then takes it over and the run builds and publishes."""
    from neuronforge.artifacts import leases
    from neuronforge.pipeline.stages.prepare import prepare
    from neuronforge.spec.target import TargetSpec

    monkeypatch.setenv("NEURONFORGE_LEASE_POLL_S", "0.5")
    store_uri = f"file://{tmp_path / 'store'}"
    target = {**NEURON_TARGET}
    spec = TargetSpec.parse({**target, "profile": "vllm-neuron@2.26.1"})
    key = prepare(str(compiled.checkpoint), spec, tmp_path / "w").key
    store = open_store(store_uri)
    dead = leases.try_acquire(store, key, "worker-that-died", ttl_s=15)  # outlives the run's start-up
    assert dead is not None
    run = dag.test(run_conf={**_conf(compiled, store_uri, [target]), "profile": "vllm-neuron@2.26.1"})
    states = _states(run)
    assert str(run.state) == "success", states
    assert states[("neuron_2_26_1_target.claim_build", 0)] == "success"
    manifest = store.read_json(store.read_json(f"index/{key}.json")["manifest"])
    published = time.mktime(time.strptime(manifest["published_at"], "%Y-%m-%dT%H:%M:%SZ")) - time.timezone
    assert published >= dead.expires - 1  # it waited the dead holder's lease out before building
    lease = leases.current(store, key)
    assert lease.holder.startswith("airflow:") and not lease.live  # taken over, then released


def test_cold_run_and_hit_against_the_s3_endpoint(dag, compiled: Compiled, home: Path, s3_bucket: str) -> None:
    store_uri = f"s3://{s3_bucket}/neuronforge"
    run = dag.test(run_conf=_conf(compiled, store_uri, [TARGET]))
    assert str(run.state) == "success", _states(run)
    store = open_store(store_uri)
    (index,) = store.list("index")
    manifest_key = store.read_json(index.key)["manifest"]
    from neuronforge.artifacts.published import verify_manifest

    assert verify_manifest(store, manifest_key) == []
    assert [o for o in store.list("neuron-cache") if o.key.endswith("model.done")]
    published_at = store.read_json(manifest_key)["published_at"]
    again = dag.test(run_conf=_conf(compiled, store_uri, [TARGET]))
    assert str(again.state) == "success" and store.read_json(manifest_key)["published_at"] == published_at


def test_a_build_registered_through_the_dag_with_the_connections_credentials(
    dag, compiled: Compiled, home: Path, tmp_path: Path, fake_optimum: Path, fake_hub, monkeypatch, request
) -> None:
    """The form's "Register in cache repository" through the whole DAG: a Hub model built for optimum-neuron,
    registered with the endpoint and token of Airflow connection `neuronforge_hub_registry` (no HF_TOKEN in the
    environment: the connection is what writes), optimum's lookup recorded in the manifest and the farm index."""
    import json

    from tests.fakes.hub import online

    online(fake_hub, monkeypatch, request)
    monkeypatch.delenv("HF_TOKEN", raising=False)
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hf-cache"))
    connection = {"conn_type": "http", "host": fake_hub.endpoint, "password": "hf_writer"}
    monkeypatch.setenv("AIRFLOW_CONN_NEURONFORGE_HUB_REGISTRY", json.dumps(connection))
    fake_hub.add_model("tiny-org/tiny-llama", compiled.checkpoint)
    store_uri = f"file://{tmp_path / 'store'}"
    optimum_target = {k: v for k, v in TARGET.items() if k != "max_context_length"}
    conf = {
        **_conf(compiled, store_uri, [{**optimum_target, "tp_degree": 2}]),
        "profile": "optimum-neuron",
        "model": "tiny-org/tiny-llama",
        "hub_registry": "my-org/neuron-cache",
    }
    run = dag.test(run_conf=conf)
    states = _states(run)
    assert str(run.state) == "success", states
    assert states[("neuron_2_26_1_target.register_hub_cache", 0)] == "success"
    store = open_store(store_uri)
    (index,) = store.list("index")
    raw = store.get_bytes(store.read_json(index.key)["manifest"]).decode()
    registry = json.loads(raw)["hub_registry"]
    assert registry["repo_id"] == "my-org/neuron-cache" and registry["lookup"]["found"] is True
    assert registry["endpoint"] == fake_hub.endpoint and "hf_writer" not in raw
    from neuronforge.farm.rows import farm_page

    (row,) = farm_page(store).rows
    assert (row.hub_registry, row.hub_registry_found) == ("my-org/neuron-cache", True)
