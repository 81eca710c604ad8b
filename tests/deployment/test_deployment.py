"""Issue 11's proof: the pipeline under a real deployment (PostgreSQL, redis, an S3 endpoint,
api-server + scheduler + dag-processor + triggerer with CeleryExecutor, two Celery workers that share
nothing but the store), driven through the REST API only.

The scenarios run in file order against one deployment (tests/deployment/conftest.py): a cold run,
its repeat, the trigger form's conf checks, an s3:// model with two targets, two identical runs at
once, and the recompile DAG. Task logs of a failed run are printed with the failure.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from neuronforge.common.settings import DEFAULT_TARGET
from tests.deployment.airflow_deploy import (
    COMPILE_DAG,
    COMPILE_WORKER,
    NEURON_WORKER,
    RECOMPILE_DAG,
    WORKERS,
    Deployment,
)
from tests.deployment.services import note

pytestmark = pytest.mark.slow

FIRST = "expand_targets"
PUBLISH = "cpu_target.publish_artifact"
CLAIM = "cpu_target.claim_build"
# The tasks that do build work (after the claim); a refused conf must not reach any of them.
BUILD_TASKS = (
    "cpu_target.claim_build",
    "cpu_target.fetch_checkpoint",
    "cpu_target.plan_target",
    "cpu_target.quantize_weights",
    "cpu_target.compile_graphs",
    "cpu_target.smoke",
    "cpu_target.publish_artifact",
)
# Object data a cache hit must not download (metadata such as index entries, leases and manifests
# may be read).
DATA_PREFIXES = ("checkpoints/", "quantized/", "builds/", "neuron-cache/", "artifacts/", "models/")
METADATA_NAMES = ("manifest.json", "MANIFEST.json")
# Another decode graph (a longer KV cache), the same prefill bucket (the smoke prompts need 17 tokens).
SECOND_TARGET = {**DEFAULT_TARGET, "sequence_length": 48}
RUN_TIMEOUT = 420

# What one scenario leaves for the next (they run in file order on one deployment).
state: dict[str, Any] = {}


def _run_id(tag: str) -> str:
    return f"deploy-{tag}-{int(time.time() * 1000)}"


def _fail(dep: Deployment, dag_id: str, run_id: str, message: str) -> None:
    pytest.fail(f"{message}\n{dep.describe(dag_id, run_id)}", pytrace=False)


def _run(dep: Deployment, dag_id: str, conf: dict[str, Any], tag: str, timeout: float = RUN_TIMEOUT) -> dict:
    run_id = _run_id(tag)
    r = dep.trigger(dag_id, conf, run_id)
    assert r.status_code in (200, 201), f"trigger {dag_id} {conf} answered {r.status_code}: {r.text}"
    return dep.wait_run(dag_id, run_id, timeout)


def _succeeded(dep: Deployment, dag_id: str, run: dict[str, Any]) -> None:
    if run["state"] != "success":
        _fail(dep, dag_id, run["dag_run_id"], f"{dag_id} {run['dag_run_id']} ended {run['state']}")


def _published(dep: Deployment, run_id: str, targets: int = 1) -> list[dict[str, Any]]:
    """Each (cpu) target's artifact as the run reports it, in the conf's order: a cache hit in the
    first task's result (the run ends there for it), a build in its publish task's."""
    outcome = dep.xcom(COMPILE_DAG, run_id, FIRST)
    assert isinstance(outcome, dict) and len(outcome["targets"]) == targets, f"{FIRST} of {run_id}: {outcome!r}"
    out, built = [], 0
    for entry in outcome["targets"]:
        if entry["status"] == "to build":
            entry = dep.xcom(COMPILE_DAG, run_id, PUBLISH, built)
            assert isinstance(entry, dict), f"{PUBLISH}[{built}] of {run_id} returned {entry!r}"
            built += 1
        out.append(entry)
    return out


def _data_downloads(dep: Deployment, start: float, end: float) -> list[tuple[str, int]]:
    prefix = dep.store.split("/", 3)[3] + "/"
    out = []
    for r in dep.s3.between(start, end):
        if r.method != "GET" or r.status >= 300 or not r.key:
            continue
        key = r.key[len(prefix) :] if r.key.startswith(prefix) else r.key
        if key.startswith(DATA_PREFIXES) and key.rsplit("/", 1)[-1] not in METADATA_NAMES:
            out.append((r.key, r.bytes))
    return out


def _s3(dep: Deployment):
    import boto3

    return boto3.client(
        "s3",
        endpoint_url=dep.s3.endpoint,
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
        region_name="us-east-1",
    )


def _upload_model(dep: Deployment, tmp: Path, seed: int) -> str:
    """A tiny Llama (own seed: own revision, same graphs) uploaded to the bucket; its s3:// URI.
    Its size in bytes is kept in `state["model_bytes"][uri]`."""
    from tests.checkpoints import make_tiny_llama

    folder = make_tiny_llama(tmp / f"tiny-llama-{seed}", seed=seed, tokenizer=True)
    client = _s3(dep)
    prefix = f"models/tiny-llama-seed{seed}"
    files = [p for p in sorted(folder.rglob("*")) if p.is_file()]
    for path in files:
        client.upload_file(str(path), dep.bucket, f"{prefix}/{path.relative_to(folder)}")
    uri = f"s3://{dep.bucket}/{prefix}"
    state.setdefault("model_bytes", {})[uri] = sum(p.stat().st_size for p in files)
    return uri


def _watch(dep: Deployment, dag_id: str, run_ids: list[str], timeout: float) -> tuple[dict, dict]:
    """Poll runs to their end, recording every state each task instance was seen in."""
    seen: dict[tuple[str, str, int], set[str]] = {}
    deadline = time.monotonic() + timeout
    runs: dict[str, dict] = {}
    while time.monotonic() < deadline:
        for run_id in run_ids:
            for ti in dep.task_instances(dag_id, run_id):
                seen.setdefault((run_id, ti["task_id"], ti["map_index"]), set()).add(ti["state"] or "none")
            runs[run_id] = dep.run(dag_id, run_id)
        if all(r["state"] in ("success", "failed") for r in runs.values()):
            return runs, seen
        time.sleep(1)
    pending = [r for r, v in runs.items() if v["state"] not in ("success", "failed")]
    _fail(dep, dag_id, pending[0], f"{pending} still running after {timeout:.0f}s")
    raise AssertionError("unreachable")


# -- (1) cold run -------------------------------------------------------------------------------------
def test_cold_run_with_form_defaults_publishes_on_both_workers(deployment: Deployment) -> None:
    dep = deployment
    t0 = time.time()
    run = _run(dep, COMPILE_DAG, {}, "cold")
    _succeeded(dep, COMPILE_DAG, run)
    run_id = run["dag_run_id"]
    (published,) = _published(dep, run_id)
    assert published["status"] == "published", published
    tis = dep.task_instances(COMPILE_DAG, run_id)
    hosts = {ti["hostname"] for ti in tis if ti["state"] == "success"}
    assert hosts == set(WORKERS), f"tasks ran on {hosts}, expected both workers {WORKERS} ({dep.isolation})"
    for w in (w for w in dep.workers if w.name in WORKERS):  # each worker worked in its own home
        assert any(w.home.iterdir()), f"{w.name} wrote nothing under its NEURONFORGE_HOME {w.home}"
    state["cold"] = published
    note(f"(1) cold run {time.time() - t0:.0f}s, hosts {sorted(hosts)}, isolation {dep.isolation}")


# -- (2) repeat: a hit that downloads nothing, triggered with the form's defaults ----------------------
def test_repeat_with_form_defaults_is_a_hit_that_downloads_nothing(deployment: Deployment) -> None:
    dep = deployment
    if "cold" not in state:
        pytest.skip("needs the cold run's artifact (scenario 1 failed)")
    details = dep.get(f"/api/v2/dags/{COMPILE_DAG}/details")
    conf = {name: spec.get("value") for name, spec in details["params"].items()}  # what the form submits
    t0 = time.time()
    run = _run(dep, COMPILE_DAG, conf, "hit")
    _succeeded(dep, COMPILE_DAG, run)
    (published,) = _published(dep, run["dag_run_id"])
    assert published["status"] == "cache-hit", published
    assert published["cache_key"] == state["cold"]["cache_key"]
    assert published["manifest_uri"] == state["cold"]["manifest_uri"]
    tis = dep.task_instances(COMPILE_DAG, run["dag_run_id"])
    ran = sorted(ti["task_id"] for ti in tis if ti["state"] != "skipped")
    assert ran == [FIRST], f"a hit ran {ran}; every task after {FIRST} should be skipped"
    end = time.time()
    downloads = _data_downloads(dep, t0, end)
    assert downloads == [], f"the hit downloaded {sum(b for _, b in downloads)} bytes: {downloads}"
    note(f"(2) hit {end - t0:.0f}s with the form's defaults {json.dumps(conf)}; data downloaded: 0 bytes")


# -- (6) the trigger's conf checks ------------------------------------------------------------------
def test_unknown_top_level_conf_key_is_refused(deployment: Deployment) -> None:
    dep = deployment
    run_id = _run_id("unknown-key")
    t0 = time.time()
    r = dep.trigger(COMPILE_DAG, {"target": [DEFAULT_TARGET]}, run_id)
    if 400 <= r.status_code < 500:
        assert "target" in r.text, r.text
        note(f"(6) unknown key refused at trigger time: HTTP {r.status_code} {r.text[:300]}")
        return
    assert r.status_code in (200, 201), r.text
    run = dep.wait_run(COMPILE_DAG, run_id, RUN_TIMEOUT)
    ran = [
        f"{ti['task_id']}[{ti['map_index']}]"
        for ti in dep.task_instances(COMPILE_DAG, run_id)
        if ti["task_id"] in BUILD_TASKS and ti["state"] not in (None, "skipped", "upstream_failed", "removed")
    ]
    if run["state"] != "failed" or ran:
        _fail(
            dep,
            COMPILE_DAG,
            run_id,
            f"a conf with the unknown key 'target' was accepted (HTTP {r.status_code}) and the run ended "
            f"{run['state']} with build tasks {ran}; expected a 4xx at trigger time or a failure before any build task",
        )
    note(f"(6) unknown key accepted at trigger time but the run failed before any build task ({time.time() - t0:.0f}s)")


# -- (3) an s3:// model, two targets ------------------------------------------------------------------
def test_s3_model_with_two_targets(deployment: Deployment, tmp_path: Path) -> None:
    dep = deployment
    model = _upload_model(dep, tmp_path, seed=1)
    t0 = time.time()
    run = _run(dep, COMPILE_DAG, {"model": model, "targets": [DEFAULT_TARGET, SECOND_TARGET]}, "s3-two")
    _succeeded(dep, COMPILE_DAG, run)
    published = _published(dep, run["dag_run_id"], targets=2)
    assert [p["status"] for p in published] == ["published", "published"], published
    assert len({p["cache_key"] for p in published}) == 2
    downloads = _data_downloads(dep, t0, time.time())
    size = state["model_bytes"][model]
    source_bytes = sum(b for k, b in downloads if k.startswith("models/tiny-llama-seed1/"))
    fetch_hosts = {
        ti["hostname"]
        for ti in dep.task_instances(COMPILE_DAG, run["dag_run_id"])
        if ti["task_id"] == "cpu_target.fetch_checkpoint"
    }
    # Pinning the source reads its listing (and config.json, for the static plan), not the weights;
    # the checkpoint is downloaded at most once per host that fetches it.
    allowed = len(fetch_hosts) * size + 64 * 1024
    assert source_bytes <= allowed, (
        f"read {source_bytes} bytes of a {size}-byte checkpoint fetched on {sorted(fetch_hosts)}: "
        + ", ".join(f"{k} {b}" for k, b in downloads if k.startswith("models/"))
    )
    note(
        f"(3) s3:// model, two targets: {time.time() - t0:.0f}s; read {source_bytes} bytes of the source "
        f"({source_bytes / size:.2f}x its {size} bytes; fetched on {len(fetch_hosts)} host(s))"
    )


# -- (4) two identical runs at once compile once -------------------------------------------------------
def test_two_identical_runs_compile_once(deployment: Deployment, tmp_path: Path) -> None:
    dep = deployment
    model = _upload_model(dep, tmp_path, seed=2)
    conf = {"model": model, "targets": [DEFAULT_TARGET]}
    t0 = time.time()
    run_ids = []
    for tag in ("pair-a", "pair-b"):
        run_id = _run_id(tag)
        r = dep.trigger(COMPILE_DAG, conf, run_id)
        assert r.status_code in (200, 201), r.text
        run_ids.append(run_id)
    runs, seen = _watch(dep, COMPILE_DAG, run_ids, RUN_TIMEOUT)
    for run in runs.values():
        _succeeded(dep, COMPILE_DAG, run)
    results = {run_id: _published(dep, run_id)[0] for run_id in run_ids}
    statuses = sorted(p["status"] for p in results.values())
    assert statuses == ["cache-hit", "published"], results
    waiter = next(r for r, p in results.items() if p["status"] == "cache-hit")
    claim_states = seen.get((waiter, CLAIM, 0), set())
    log = dep.task_log(COMPILE_DAG, waiter, CLAIM, 0)
    assert "deferred" in claim_states or "waiting (deferred)" in log, (claim_states, log)
    (key,) = {p["cache_key"] for p in results.values()}
    # Every compile stages its build as builds/<key>/<digest>/ (deleted once published): count them.
    staged = {
        r.key.split("/")[3]
        for r in dep.s3.between(t0, time.time())
        if r.method == "PUT" and r.key.startswith(f"store/builds/{key}/") and r.key.endswith("/MANIFEST.json")
    }
    assert len(staged) == 1, f"{len(staged)} builds staged for {key[:12]}: {staged}"
    note(f"(4) two identical runs: one built, one waited {sorted(claim_states)}; {time.time() - t0:.0f}s")


# -- (5) the recompile DAG -----------------------------------------------------------------------------
def test_recompile_dag_rebuilds_and_its_wait_is_resumed_by_the_triggerer(
    deployment: Deployment, tmp_path: Path
) -> None:
    dep = deployment
    stale_model = _upload_model(dep, tmp_path, seed=3)
    catalog = dep.root / "catalog.yaml"  # on the disk every worker sees (not under a worker's home)
    entries = [f"  - source: {stale_model}\n    targets:\n      - {json.dumps(DEFAULT_TARGET)}\n"]
    if "cold" in state:  # the cold run's model and target: published, so fresh
        entries.append(f"  - source: builtin:tiny-llama\n    targets:\n      - {json.dumps(DEFAULT_TARGET)}\n")
    catalog.write_text("models:\n" + "".join(entries))
    t0 = time.time()
    run_id = _run_id("recompile")
    conf = {"catalog": str(catalog), "store": dep.store, "dry_run": False, "wait_minutes": 10}
    r = dep.trigger(RECOMPILE_DAG, conf, run_id)
    assert r.status_code in (200, 201), r.text
    runs, seen = _watch(dep, RECOMPILE_DAG, [run_id], RUN_TIMEOUT)
    _succeeded(dep, RECOMPILE_DAG, runs[run_id])
    # The wait for the rebuilds is deferred (no worker slot held) and resumed by the triggerer.
    deferred = sorted(f"{t}[{m}]" for (r, t, m), states in seen.items() if r == run_id and "deferred" in states)
    assert deferred, f"no task of {run_id} was seen deferred: {seen}"
    fired = [
        p
        for p in (dep.airflow_home / "logs" / f"dag_id={RECOMPILE_DAG}" / f"run_id={run_id}").rglob("*.trigger.*.log")
        if "Trigger fired event" in p.read_text(errors="replace")
    ]
    assert fired, f"{deferred} deferred, but no trigger log of {run_id} says its trigger fired"
    summary = dep.xcom(RECOMPILE_DAG, run_id, "report")
    assert summary["counts"].get("stale") == 1 and summary["counts"].get("rebuilt") == 1, summary
    if "cold" in state:
        assert summary["counts"].get("fresh") == 1, summary
    (rebuild,) = summary["runs"]
    rebuilt = dep.run(COMPILE_DAG, rebuild)
    _succeeded(dep, COMPILE_DAG, rebuilt)
    (published,) = _published(dep, rebuild)
    assert published["status"] == "published", published
    note(
        f"(5) recompile: rebuilt via {rebuild}; {deferred} deferred, resumed by the triggerer; {time.time() - t0:.0f}s"
    )


# -- (7) Neuron profiles: compiled on a CPU worker of the SDK image, loaded on a Neuron host ---------------
# The FAKE SDKs (tests/fakes) are the workers' toolchain interpreters; the embedded tiny Llama at tp 2.
NEURON_TARGETS = [
    {"instance_type": "inf2.xlarge", "tp_degree": 2, "sequence_length": 64, "dtype": "fp32", "profile": profile}
    for profile in ("optimum-neuron", "vllm-neuron")
]
LMI_TARGET = {
    "instance_type": "inf2.xlarge",
    "tp_degree": 2,
    "sequence_length": 64,
    "dtype": "bf16",
    "profile": "lmi-neuronx",
}


def _hosts(dep: Deployment, run_id: str, group: str) -> dict[tuple[str, int], str]:
    """(stage, map index) -> the worker that ran it, for a Neuron group's tasks."""
    return {
        (ti["task_id"].removeprefix(f"{group}."), ti["map_index"]): ti["hostname"]
        for ti in dep.task_instances(COMPILE_DAG, run_id)
        if ti["task_id"].startswith(f"{group}.") and ti["state"] == "success"
    }


def test_neuron_builds_compile_on_a_cpu_worker_and_load_on_a_neuron_host(deployment: Deployment) -> None:
    dep = deployment
    t0 = time.time()
    run = _run(dep, COMPILE_DAG, {"targets": NEURON_TARGETS}, "neuron", timeout=600)
    _succeeded(dep, COMPILE_DAG, run)
    end = time.time()
    run_id = run["dag_run_id"]
    hosts = _hosts(dep, run_id, "neuron_2_26_1_target")
    for i in range(len(NEURON_TARGETS)):
        # The toolchain stages on the SDK image's CPU worker, the load on the Neuron host.
        assert (hosts[("prepare", i)], hosts[("compile_graphs", i)]) == (COMPILE_WORKER, COMPILE_WORKER), hosts
        assert hosts[("smoke", i)] == NEURON_WORKER, hosts
    published = [dep.xcom(COMPILE_DAG, run_id, "neuron_2_26_1_target.publish_artifact", i) for i in range(2)]
    assert [p["status"] for p in published] == ["published", "published"], published
    store = _s3(dep)
    prefix = dep.store.split("/", 3)[3] + "/"
    manifests = [
        json.loads(store.get_object(Bucket=dep.bucket, Key=p["manifest_uri"].split("/", 3)[3])["Body"].read())
        for p in published
    ]
    for m in manifests:
        by_stage = {r["stage"]: r for r in m["hosts"]["stages"]}
        assert by_stage["compile_graphs"]["host"] == "cpu" and by_stage["smoke"]["host"] == "neuron", m["hosts"]
        assert m["hosts"]["neuron_seconds"] == by_stage["smoke"]["seconds"]
    # What the Neuron host downloaded: the staged payloads, each file of which is published (same path,
    # same size) — nothing else (no checkpoint, no compile cache, no other build's files).
    neuron = next(w for w in dep.workers if w.name == NEURON_WORKER)
    published_files = {(m["cache_key"], f["path"]): f["size"] for m in manifests for f in m["files"]}
    downloads = [
        (r.key.removeprefix(prefix), r.bytes)
        for r in dep.s3.between(t0, end)
        if r.access_key == neuron.access_key and r.method == "GET" and r.status < 300 and r.key
    ]
    data = [
        (k, b)
        for k, b in downloads
        if not k.startswith(("index/", "locks/", "failures/")) and not k.endswith("/MANIFEST.json")
    ]
    assert data, "the Neuron host downloaded nothing: did the smoke test read the payload?"
    for key, size in data:
        kind, cache_key, _digest, rel = [*key.split("/", 3), "", "", ""][:4]
        assert kind == "builds" and published_files.get((cache_key, rel)) == size, (
            f"{key} ({size} bytes) is not published"
        )
    note(
        f"(7) Neuron builds: compile on {COMPILE_WORKER} (no device), smoke on {NEURON_WORKER}; the Neuron host "
        f"downloaded {len(data)} objects, {sum(b for _, b in data)} bytes, all published; "
        + ", ".join(
            f"{m['profile']['ref']}: Neuron {m['hosts']['neuron_seconds']:.1f}s of "
            f"{m['hosts']['cpu_seconds'] + m['hosts']['neuron_seconds']:.1f}s"
            for m in manifests
        )
        + f"; {end - t0:.0f}s"
    )

    # transformers-neuronx (LMI) compiles only where it can load: its whole toolchain side on the Neuron host.
    t1 = time.time()
    lmi = _run(dep, COMPILE_DAG, {"targets": [LMI_TARGET]}, "lmi", timeout=600)
    _succeeded(dep, COMPILE_DAG, lmi)
    hosts = _hosts(dep, lmi["dag_run_id"], "neuron_2_21_1_target")
    assert {hosts[(stage, 0)] for stage in ("prepare", "compile_graphs", "smoke")} == {NEURON_WORKER}, hosts
    assert dep.xcom(COMPILE_DAG, lmi["dag_run_id"], "neuron_2_21_1_target.publish_artifact", 0)["status"] == "published"
    note(f"(7) lmi-neuronx: prepare, compile and smoke on {NEURON_WORKER}; {time.time() - t1:.0f}s")


# -- (8) the vLLM Neuron plugin (SDK 2.32/2.33): compile on CPU, publish the plugin's cache, serve with no compile
NATIVE_TARGET = {"instance_type": "trn2.3xlarge", "tp_degree": 2, "batch_size": 2, "sequence_length": 256}


def test_vllm_neuron_native_builds_publish_a_cache_a_fresh_server_hits(deployment: Deployment, tmp_path: Path) -> None:
    """A Llama on SDK 2.32.0 and a Qwen3 on SDK 2.33.0, through the DAG: the plugin's CPU-compile mode on
    the SDK image's CPU worker, the smoke test on the Neuron host; then a fresh serving host runs the
    published sync.sh + `vllm serve` (fake plugin) with compiling forbidden and hits every graph."""
    from neuronforge.records.local import read_local
    from neuronforge.records.vllm_cache import CacheManifest
    from neuronforge.spec.tinymodel import make_tiny_llama
    from tests.vllm_serving import serve, serving_host

    dep = deployment
    client = _s3(dep)
    for name, model_type, release in (("llama", "llama", "2.32.0"), ("qwen3", "qwen3", "2.33.0")):
        folder = make_tiny_llama(tmp_path / name, seed=11, tokenizer=True, model_type=model_type)
        prefix = f"models/native-{name}"
        for path in sorted(p for p in folder.rglob("*") if p.is_file()):
            client.upload_file(str(path), dep.bucket, f"{prefix}/{path.relative_to(folder)}")
        target = {**NATIVE_TARGET, "profile": f"vllm-neuron-native@{release}"}
        t0 = time.time()
        run = _run(dep, COMPILE_DAG, {"model": f"s3://{dep.bucket}/{prefix}", "targets": [target]}, f"native-{name}")
        _succeeded(dep, COMPILE_DAG, run)
        group = f"neuron_{release.replace('.', '_')}_target"
        hosts = _hosts(dep, run["dag_run_id"], group)
        assert (hosts[("prepare", 0)], hosts[("compile_graphs", 0)], hosts[("smoke", 0)]) == (
            COMPILE_WORKER,
            COMPILE_WORKER,
            NEURON_WORKER,
        ), hosts
        published = dep.xcom(COMPILE_DAG, run["dag_run_id"], f"{group}.publish_artifact", 0)
        assert published["status"] == "published", published
        artifact = published["manifest_uri"].split("/", 3)[3].rsplit("/", 1)[0]
        launch = tmp_path / f"{name}-launch"
        for obj in client.list_objects_v2(Bucket=dep.bucket, Prefix=f"{artifact}/launch/")["Contents"]:
            dest = launch / obj["Key"].rsplit("/", 1)[1]
            dest.parent.mkdir(parents=True, exist_ok=True)
            client.download_file(dep.bucket, obj["Key"], str(dest))
        host = tmp_path / f"{name}-host"
        env = serving_host(
            host,
            release,
            dep.s3.endpoint,
            AWS_ACCESS_KEY_ID="testing",
            AWS_SECRET_ACCESS_KEY="testing",
            AWS_DEFAULT_REGION="us-east-1",
        )
        started, lines = serve(launch, env)
        assert started, "\n".join(lines[-15:])
        assert not any("Compiling graph" in line for line in lines)
        manifest = read_local(CacheManifest, launch / "vllm-cache.json")
        cache = Path(env["VLLM_CACHE_ROOT"]) / "neuron" / "compile_cache"
        assert all((cache / r.key / ".cache_accessed").exists() for r in manifest.entries)
        note(
            f"(8) vllm-neuron-native@{release} {name}: compiled on {COMPILE_WORKER}, smoke on {NEURON_WORKER}, "
            f"{len(manifest.entries)} graphs published; a fresh server synced them and hit every one; "
            f"{time.time() - t0:.0f}s"
        )
