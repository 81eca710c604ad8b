"""Issue 11's proof: the pipeline under a real deployment (PostgreSQL, redis, an S3 endpoint,
api-server + scheduler + dag-processor + triggerer with CeleryExecutor, two Celery workers that share
nothing but the store), driven through the REST API only.

The scenarios run in file order against one deployment (tests/deployment/conftest.py): a cold run,
its repeat, the trigger form's conf checks, an s3:// model with two targets, two identical runs at
once, the recompile DAG, Neuron profiles, and release channels (issue 36: approve, promote, a serving
host started from the channel, rollback, a rejected build, concurrent promotions). Task logs of a
failed run are printed with the failure.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from neuronforge.common.settings import DEFAULT_TARGET
from tests.deployment import stage_times
from tests.deployment.airflow_deploy import (
    BASELINE_RUN,
    CHANNEL_CONSUMER,
    COMPILE_DAG,
    COMPILE_WORKER,
    NEURON_WORKER,
    PATCH_RELEASE,
    RECOMPILE_DAG,
    RELEASE_DAG,
    REPO,
    WORKERS,
    Deployment,
)
from tests.deployment.services import note
from tests.deployment.stage_times import RunTimes, StageTime, StageTimes

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


def _upload_model(dep: Deployment, tmp: Path, seed: int, **config: Any) -> str:
    """A tiny Llama (own seed: own revision, same graphs; `config`: config.json fields changed)
    uploaded to the bucket; its s3:// URI. Its size in bytes is kept in `state["model_bytes"][uri]`."""
    from tests.checkpoints import make_tiny_llama

    folder = make_tiny_llama(tmp / f"tiny-llama-{seed}", seed=seed, tokenizer=True)
    if config:
        path = folder / "config.json"
        path.write_text(json.dumps({**json.loads(path.read_text()), **config}, indent=2))
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
    # Each worker works in its own home: whoever fetched or compiled wrote there (the checkpoint, the
    # build dir). Which worker gets which task is the scheduler's choice: the other may have run only
    # tasks that hand store references on (claim, publish) and write nothing locally.
    local = {ti["hostname"] for ti in tis if ti["task_id"].rpartition(".")[2] in ("fetch_checkpoint", "compile_graphs")}
    assert local, f"no fetch or compile task succeeded: {sorted(ti['task_id'] for ti in tis)}"
    for w in (w for w in dep.workers if w.name in local):
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
    for profile in ("optimum-neuron", "vllm-neuron@2.26.1")
]
LMI_TARGET = {
    "instance_type": "inf2.xlarge",
    "tp_degree": 2,
    "sequence_length": 64,
    "dtype": "bf16",
    "profile": "lmi-neuronx",
}


def _times(dep: Deployment, label: str, run: dict[str, Any], targets: Sequence[dict[str, Any]] = ()) -> RunTimes:
    """Where each task of a compile run ran and for how long, as Airflow recorded it."""
    builds = tuple(t["profile"] for t in targets)
    return RunTimes.from_api(label, run, dep.task_instances(COMPILE_DAG, run["dag_run_id"]), builds)


def _hosts(dep: Deployment, run_id: str, group: str) -> dict[tuple[str, int], str]:
    """(stage, map index) -> the worker that ran it, for a Neuron group's tasks."""
    times = _times(dep, "", dep.run(COMPILE_DAG, run_id))
    return {key: t.hostname for key, t in times.hosts(group).items()}


NEURON_GROUP = "neuron_2_26_1_target"
TOOLCHAIN_STAGES = ("prepare", "compile_graphs")


def _placed(times: RunTimes, compile_on: tuple[str, str]) -> dict[tuple[str, int], StageTime]:
    """Check where the Neuron group's builds ran: each toolchain stage on `compile_on` (queue,
    worker), the smoke test on the Neuron host's queue and worker, and nothing else of the build on
    the Neuron host. Returns the group's records."""
    placed = times.hosts(NEURON_GROUP)
    where = {key: (t.queue, t.hostname) for key, t in placed.items()}
    for i in range(len(NEURON_TARGETS)):
        for stage in TOOLCHAIN_STAGES:
            assert where[(stage, i)] == compile_on, (times.run_id, stage, i, where)
        assert where[("smoke", i)] == ("neuron-2.26.1", NEURON_WORKER), (times.run_id, where)
        on_neuron = {s for (s, j), (_, host) in where.items() if j == i and host == NEURON_WORKER}
        if compile_on[1] != NEURON_WORKER:  # placed: only the smoke test on the Neuron host
            assert on_neuron == {"smoke"}, (times.run_id, i, where)
        else:  # the baseline: no task left on a CPU compile queue
            assert not any(q.startswith("neuron-compile-") for q, _ in where.values()), (times.run_id, where)
        assert all(t.duration_s > 0 for (_, j), t in placed.items() if j == i), (times.run_id, placed)
    return placed


def _placed_and_baseline(dep: Deployment, tmp_path: Path) -> list[RunTimes]:
    """bench/neuron_host_time.py's measurement: the same two Neuron builds as placed by their profiles,
    then with every toolchain stage on the Neuron host (a run id starting BASELINE_RUN: the deployment's
    policy re-routes it). Each run builds a model of its own whose config differs only in
    max_position_embeddings, so both compile cold (no compile-cache entry shared) the same work."""
    out = []
    for seed, label, compile_on in (
        (21, "placed", ("neuron-compile-2.26.1", COMPILE_WORKER)),
        (22, "baseline", ("neuron-2.26.1", NEURON_WORKER)),
    ):
        model = _upload_model(dep, tmp_path, seed=seed, max_position_embeddings=256 + seed)
        run = _run(dep, COMPILE_DAG, {"model": model, "targets": NEURON_TARGETS}, label, timeout=900)
        _succeeded(dep, COMPILE_DAG, run)
        assert run["dag_run_id"].startswith(BASELINE_RUN) == (label == "baseline"), run["dag_run_id"]
        times = _times(dep, label, run, NEURON_TARGETS)
        _placed(times, compile_on)
        out.append(times)
    return out


def _on(times: RunTimes, worker: str) -> float:
    return sum(t.duration_s for t in times.tasks if t.group == NEURON_GROUP and t.hostname == worker)


def test_neuron_builds_compile_on_a_cpu_worker_and_load_on_a_neuron_host(
    deployment: Deployment, tmp_path: Path
) -> None:
    dep = deployment
    t0 = time.time()
    run = _run(dep, COMPILE_DAG, {"targets": NEURON_TARGETS}, "neuron", timeout=600)
    _succeeded(dep, COMPILE_DAG, run)
    end = time.time()
    run_id = run["dag_run_id"]
    # Where each task ran, from Airflow's own task instances (queue, worker, seconds): the toolchain
    # stages on the SDK image's CPU compile worker, the load on the Neuron host, nothing else there.
    recorded = [_times(dep, "neuron", run, NEURON_TARGETS)]
    _placed(recorded[0], ("neuron-compile-2.26.1", COMPILE_WORKER))
    published = [dep.xcom(COMPILE_DAG, run_id, "neuron_2_26_1_target.publish_artifact", i) for i in range(2)]
    assert [p["status"] for p in published] == ["published", "published"], published
    state["neuron"] = dict(zip((t["profile"] for t in NEURON_TARGETS), published, strict=True))
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
        + f"; task seconds on {NEURON_WORKER} {_on(recorded[0], NEURON_WORKER):.1f}s, on {COMPILE_WORKER} "
        f"{_on(recorded[0], COMPILE_WORKER):.1f}s; {end - t0:.0f}s"
    )

    # transformers-neuronx (LMI) compiles only where it can load: its whole toolchain side on the Neuron host.
    t1 = time.time()
    lmi = _run(dep, COMPILE_DAG, {"targets": [LMI_TARGET]}, "lmi", timeout=600)
    _succeeded(dep, COMPILE_DAG, lmi)
    recorded.append(_times(dep, "lmi", lmi, [LMI_TARGET]))
    hosts = {key: t.hostname for key, t in recorded[-1].hosts("neuron_2_21_1_target").items()}
    assert {hosts[(stage, 0)] for stage in ("prepare", "compile_graphs", "smoke")} == {NEURON_WORKER}, hosts
    assert dep.xcom(COMPILE_DAG, lmi["dag_run_id"], "neuron_2_21_1_target.publish_artifact", 0)["status"] == "published"
    note(f"(7) lmi-neuronx: prepare, compile and smoke on {NEURON_WORKER}; {time.time() - t1:.0f}s")

    out = stage_times.requested()  # bench/neuron_host_time.py asks; CI does not
    if out is not None:
        t2 = time.time()
        recorded += _placed_and_baseline(dep, tmp_path)
        stage_times.write(out, StageTimes(tuple(recorded), (NEURON_WORKER,)))
        note(
            f"(7) stage times of {len(recorded)} runs written to {out} ({stage_times.ENV}); placed and baseline "
            f"runs {time.time() - t2:.0f}s"
        )


# -- (8) the vLLM Neuron plugin (SDK 2.32/2.33): compile on CPU, publish the plugin's cache, serve with no compile
NATIVE_TARGET = {"instance_type": "trn2.3xlarge", "tp_degree": 2, "batch_size": 2, "sequence_length": 256}


def _native_model(dep: Deployment, tmp: Path, name: str, model_type: str) -> str:
    """A tiny model of `model_type` (seed 11) at models/native-<name> in the bucket, uploaded the first time
    it is asked for (scenario 8's, which the release-day rehearsal builds on again); its s3:// URI."""
    from neuronforge.spec.tinymodel import make_tiny_llama

    client, prefix = _s3(dep), f"models/native-{name}"
    if not client.list_objects_v2(Bucket=dep.bucket, Prefix=f"{prefix}/").get("KeyCount"):
        folder = make_tiny_llama(tmp / name, seed=11, tokenizer=True, model_type=model_type)
        for path in sorted(p for p in folder.rglob("*") if p.is_file()):
            client.upload_file(str(path), dep.bucket, f"{prefix}/{path.relative_to(folder)}")
    return f"s3://{dep.bucket}/{prefix}"


def test_vllm_neuron_native_builds_publish_a_cache_a_fresh_server_hits(deployment: Deployment, tmp_path: Path) -> None:
    """A Llama on SDK 2.32.0 and a Qwen3 on SDK 2.33.0, through the DAG: the plugin's CPU-compile mode on
    the SDK image's CPU worker, the smoke test on the Neuron host; then a fresh serving host runs the
    published sync.sh + `vllm serve` (fake plugin) with compiling forbidden and hits every graph."""
    from neuronforge.records.local import read_local
    from neuronforge.records.vllm_cache import CacheManifest
    from tests.vllm_serving import serve, serving_host

    dep = deployment
    client = _s3(dep)
    for name, model_type, release in (("llama", "llama", "2.32.0"), ("qwen3", "qwen3", "2.33.0")):
        model = _native_model(dep, tmp_path, name, model_type)
        target = {**NATIVE_TARGET, "profile": f"vllm-neuron-native@{release}"}
        t0 = time.time()
        run = _run(dep, COMPILE_DAG, {"model": model, "targets": [target]}, f"native-{name}")
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


# -- (9) release channels: approve, promote, serve from the channel, roll back, reject, race ------------
MODEL = "builtin:tiny-llama"  # what a conf without `model` builds
REBUILT_TARGET = {**DEFAULT_TARGET, "batch_size": 2}


def _release(dep: Deployment, tag: str, **request: Any) -> dict[str, Any]:
    """A run of the release DAG to its end (the run, as the REST API gives it)."""
    return _run(dep, RELEASE_DAG, request, tag)


def _released(dep: Deployment, tag: str, **request: Any) -> dict[str, Any]:
    """A release run that must succeed; what its task returned (`ReleaseOutcome`)."""
    run = _release(dep, tag, **request)
    _succeeded(dep, RELEASE_DAG, run)
    return dep.xcom(RELEASE_DAG, run["dag_run_id"], "release")


def _stable(**request: Any) -> dict[str, Any]:
    """A move of the stable channel of the embedded model's cpu line (a promotion unless told)."""
    return {"action": "promote", "model": MODEL, "profile": "cpu", "channel": "stable", **request}


def _serving_host(dep: Deployment, host: Path) -> dict[str, str]:
    """A fresh host's environment: the AWS CLI and Python of this venv, the S3 endpoint and a reader's
    credentials, its own HOME; nothing of the deployment's (no NEURONFORGE_*, no Airflow)."""
    host.mkdir(parents=True, exist_ok=True)
    return {
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}/usr/bin:/bin",
        "HOME": str(host),
        "TMPDIR": str(host),
        "AWS_ENDPOINT_URL": dep.s3.endpoint,
        "AWS_ACCESS_KEY_ID": "testing-serving-host",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",
        "PYTHONPATH": str(REPO),  # the cpu profile's load.py imports neuronforge's CpuModel
    }


def _start(dep: Deployment, host: Path, channel_prefix: str) -> dict[str, Any]:
    """What a serving host does at every start: fetch the channel's launch files (as a deployment would
    keep them: once, from the store), `resolve.sh --all DEST`, then load the build in a fresh process
    (the cpu profile: `python DEST/launch/load.py DEST/cpu-aoti`). Returns the key it loaded, the
    batch size of the graphs it loaded and the tokens load.py printed."""
    env = _serving_host(dep, host)
    launch = host / "channel-launch"
    if not launch.exists():
        client = _s3(dep)
        prefix = f"{dep.store.split('/', 3)[3]}/{channel_prefix}/launch/"
        for obj in client.list_objects_v2(Bucket=dep.bucket, Prefix=prefix)["Contents"]:
            dest = launch / obj["Key"][len(prefix) :]
            dest.parent.mkdir(parents=True, exist_ok=True)
            client.download_file(dep.bucket, obj["Key"], str(dest))
    dest = host / "model"
    resolved = subprocess.run(
        ["bash", str(launch / "resolve.sh"), "--all", str(dest)], env=env, capture_output=True, text=True, timeout=300
    )
    assert resolved.returncode == 0, f"resolve.sh failed:\n{resolved.stdout}\n{resolved.stderr}"
    assert resolved.stdout.strip() == str(dest), resolved.stdout
    loaded = subprocess.run(
        [sys.executable, str(dest / "launch" / "load.py"), str(dest / "cpu-aoti")],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert loaded.returncode == 0, f"load.py failed:\n{loaded.stdout}\n{loaded.stderr[-3000:]}"
    tokens = json.loads(loaded.stdout.strip().splitlines()[-1])
    assert isinstance(tokens, list) and tokens, loaded.stdout
    return {
        "key": json.loads((dest / "channel.json").read_text())["current"]["build"]["key"],
        "batch_size": json.loads((dest / "cpu-aoti" / "compiled.json").read_text())["batch_size"],
        "tokens": tokens,
        "said": resolved.stderr.strip(),
    }


def _channel(dep: Deployment, channel: str) -> dict[str, Any]:
    client = _s3(dep)
    key = f"{dep.store.split('/', 3)[3]}/channels/builtin/tiny-llama/cpu/{channel}/channel.json"
    return json.loads(client.get_object(Bucket=dep.bucket, Key=key)["Body"].read())


def _consumer_queued(dep: Deployment) -> list[int]:
    """The Assets whose events queued a run of the consumer DAG (its asset-triggered run waits there)."""
    queued = dep.get(f"/api/v2/dags/{CHANNEL_CONSUMER}/assets/queuedEvents")["queued_events"]
    return [q["asset_id"] for q in queued]


def _epoch(stamp: str) -> float:
    from datetime import datetime

    return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()


def _requests(dep: Deployment, start: float, end: float) -> tuple[int, int]:
    """S3 requests the workers made between two times, and the bytes of object data they wrote
    (a move writes one small record; nothing is copied)."""
    workers = {w.access_key for w in dep.workers}
    seen = [r for r in dep.s3.between(start, end) if r.access_key in workers]
    return len(seen), sum(1 for r in seen if r.method in ("PUT", "POST", "COPY"))


def test_release_channels_promote_serve_rollback_reject_and_race(deployment: Deployment, tmp_path: Path) -> None:
    """Issue 36's "Done when" through the release DAG: a published build approved and promoted to
    stable; a fresh serving host starts from the channel's launch files and loads it; a rebuilt target
    (batch size 2, promoted to candidate by its compile run) goes to stable from candidate and the
    host's next start loads it; one rollback run returns the host to the first; a rejected build
    cannot be promoted; two promotions at once leave one result and a complete history."""
    dep = deployment
    t0 = time.time()
    wait_for_consumer = time.monotonic() + 120
    while dep.request("GET", f"/api/v2/dags/{CHANNEL_CONSUMER}").status_code != 200:
        assert time.monotonic() < wait_for_consumer, f"{CHANNEL_CONSUMER} was not parsed"
        time.sleep(2)
    dep.unpause(CHANNEL_CONSUMER)
    assert _consumer_queued(dep) == []

    # A published build: the cold run's (a cache hit when scenario 1 ran), approved, promoted to stable.
    first_run = _run(dep, COMPILE_DAG, {"targets": [DEFAULT_TARGET]}, "release-first")
    _succeeded(dep, COMPILE_DAG, first_run)
    (first,) = _published(dep, first_run["dag_run_id"])
    a = first["cache_key"]
    approved = _released(dep, "approve-a", action="approve", build=a[:12], reason="smoke passed")
    assert approved["line"] == f"build {a[:12]} approved by admin: smoke passed", approved
    promote = _release(dep, "promote-a", **_stable(build=a[:12], reason="first release"))
    _succeeded(dep, RELEASE_DAG, promote)
    outcome = dep.xcom(RELEASE_DAG, promote["dag_run_id"], "release")
    assert outcome["changed"] and outcome["key"] == a and outcome["previous"] == "", outcome
    (event,) = dep.get("/api/v2/assets/events", source_run_id=promote["dag_run_id"])["asset_events"]
    assert event["name"] == "neuronforge/channel/builtin/tiny-llama/cpu/stable", event
    assert event["uri"] == f"{dep.store}/channels/builtin/tiny-llama/cpu/stable/channel.json", event
    assert {k: event["extra"][k] for k in ("key", "previous", "action", "by")} == {
        "key": a,
        "previous": "",
        "action": "promote",
        "by": "admin",
    }
    assert _consumer_queued(dep) == [event["asset_id"]]  # the consumer scheduled on that Asset is queued
    t1 = time.time()

    host = tmp_path / "serving-host"
    started = _start(dep, host, "channels/builtin/tiny-llama/cpu/stable")
    assert (started["key"], started["batch_size"]) == (a, 1), started
    t2 = time.time()

    # A rebuilt target: its compile run promotes it to candidate (promote_to); approved, it goes to
    # stable from candidate, and the host's next start loads it.
    rebuilt = _run(dep, COMPILE_DAG, {"targets": [REBUILT_TARGET], "promote_to": "candidate"}, "release-rebuilt")
    _succeeded(dep, COMPILE_DAG, rebuilt)
    (second,) = _published(dep, rebuilt["dag_run_id"])
    b = second["cache_key"]
    assert b != a and second["promotion"]["promoted"] is True and second["promotion"]["key"] == b, second
    assert _channel(dep, "candidate")["current"]["build"]["key"] == b
    _released(dep, "approve-b", action="approve", build=b, reason="batch 2 reviewed")
    # stable is gated (issue 53): whatever this machine measures of twice the batch, the move accepts it
    moved = _released(
        dep, "promote-b", **_stable(from_channel="candidate", reason="batch 2", accept_regression="twice the batch")
    )
    assert _channel(dep, "stable")["current"]["comparison"].startswith(f"{b[:12]} against {a[:12]}: "), moved
    assert (moved["key"], moved["previous"]) == (b, a), moved
    again = _start(dep, host, "channels/builtin/tiny-llama/cpu/stable")
    assert (again["key"], again["batch_size"]) == (b, 2), again
    t3 = time.time()

    # Rollback: one run, one small write; the host's next start loads the first build again.
    rollback = _release(dep, "rollback", **_stable(action="rollback", reason="p99 latency"))
    _succeeded(dep, RELEASE_DAG, rollback)
    back = dep.xcom(RELEASE_DAG, rollback["dag_run_id"], "release")
    assert (back["action"], back["key"], back["previous"]) == ("rollback", a, b), back
    (task,) = dep.task_instances(RELEASE_DAG, rollback["dag_run_id"])
    requests, writes = _requests(dep, _epoch(task["start_date"]), _epoch(task["end_date"]))
    history = _channel(dep, "stable")
    assert [(m["action"], m["build"]["key"]) for m in [history["current"], *history["history"]]] == [
        ("rollback", a),
        ("promote", b),
        ("promote", a),
    ]
    restarted = _start(dep, host, "channels/builtin/tiny-llama/cpu/stable")
    assert (restarted["key"], restarted["batch_size"]) == (a, 1), restarted
    t4 = time.time()

    # Two promotions of one channel at once (two runs, two workers): one result, a complete history.
    runs = []
    for tag, key in (("race-a", a), ("race-b", b)):
        run_id = _run_id(tag)
        r = dep.trigger(RELEASE_DAG, {"action": "promote", "model": MODEL, "profile": "cpu", "channel": "canary",
                                      "build": key}, run_id)  # fmt: skip
        assert r.status_code in (200, 201), r.text
        runs.append((run_id, key))
    ended, _ = _watch(dep, RELEASE_DAG, [r for r, _ in runs], RUN_TIMEOUT)
    won = [(r, k) for r, k in runs if ended[r]["state"] == "success"]
    lost = [(r, k) for r, k in runs if ended[r]["state"] != "success"]
    assert won, ended
    for run_id, _ in lost:  # the loser wrote nothing and says who moved the channel, to what
        log = dep.task_log(RELEASE_DAG, run_id, "release")
        assert "was moved by admin" in log and "nothing was written" in log, log
    canary = _channel(dep, "canary")
    moves = [canary["current"], *canary["history"]]
    assert sorted(m["build"]["key"] for m in moves) == sorted(k for _, k in won), (moves, won)
    assert canary["current"]["previous"] == (moves[1]["build"]["key"] if len(moves) > 1 else "")
    raced = _race_in_threads(dep, a, b)

    # A rejected build cannot be promoted: the run fails at once with the refusal.
    _released(dep, "reject-b", action="reject", build=b, reason="p99 latency regressed")
    refused = _release(dep, "promote-rejected", **_stable(build=b))
    assert refused["state"] == "failed", refused
    (ti,) = dep.task_instances(RELEASE_DAG, refused["dag_run_id"])
    log = dep.task_log(RELEASE_DAG, refused["dag_run_id"], "release")
    assert f"refused: build {b[:12]} is rejected (p99 latency regressed)" in log and ti["try_number"] == 1, log
    assert _channel(dep, "stable")["current"]["build"]["key"] == a
    state["stable"] = (a, b)
    note(
        f"(9) release channels: promote to stable {t1 - t0:.0f}s (its event queued the consumer's DAG); "
        f"a serving host resolved and loaded it in {t2 - t1:.0f}s; rebuilt (batch 2) -> candidate -> stable and "
        f"restarted {t3 - t2:.0f}s; rollback run {t4 - t3:.0f}s incl. restart, its task made {requests} S3 "
        f"requests ({writes} writes); two runs at once: {len(won)} won, {len(lost)} lost "
        f"({'raced' if lost else 'one after the other'}); threads: {raced}; total {time.time() - t0:.0f}s"
    )


def _operator(dep: Deployment, *argv: str, check: bool = True) -> subprocess.CompletedProcess:
    """`neuronforge ARGV` as an operator runs it on a host of their own, against the S3 endpoint; with
    `check`, one that does not exit 0 fails the test with what it said."""
    env = {**_serving_host(dep, dep.root / "operator"), "AWS_ACCESS_KEY_ID": "testing-operator"}
    cli = str(Path(sys.executable).parent / "neuronforge")
    done = subprocess.run([cli, *argv], env=env, capture_output=True, text=True, timeout=300)
    if check and done.returncode != 0:
        pytest.fail(f"neuronforge {' '.join(argv)} exited {done.returncode}:\n{done.stdout}\n{done.stderr}", False)
    return done


def _gc(dep: Deployment, *flags: str) -> subprocess.CompletedProcess:
    """`neuronforge gc STORE --keep-compilers 1 --dry-run` as an operator runs it, against the S3 endpoint."""
    return _operator(dep, "gc", dep.store, "--keep-compilers", "1", "--dry-run", *flags, check=False)


# -- (10) gc keeps what channels need ------------------------------------------------------------------
def test_gc_keeps_the_builds_channels_hold(deployment: Deployment) -> None:
    """With scenario 7's Neuron builds (SDK 2.26.1) older than scenario 8's (SDK 2.33.0), `gc
    --keep-compilers 1` would delete both of 7's; once its vllm-neuron build is promoted to candidate,
    gc keeps that one, saying which channel keeps it, and still collects its optimum-neuron sibling.
    The stable channel's builds (scenario 9) are never collected."""
    dep = deployment
    if "neuron" not in state or "stable" not in state:
        pytest.skip("needs the Neuron builds of scenario 7 and the channels of scenario 9")
    held, free = state["neuron"]["vllm-neuron@2.26.1"]["cache_key"], state["neuron"]["optimum-neuron"]["cache_key"]
    before = _gc(dep, "--json")
    assert before.returncode == 0, before.stderr
    doomed = {d["key"] for d in json.loads(before.stdout)["deleted"]}
    if held not in doomed:
        pytest.skip(f"no newer Neuron compiler in the store than {held[:12]}'s (scenario 8 did not publish)")
    assert free in doomed and not doomed & set(state["stable"]), doomed
    t0 = time.time()
    _released(dep, "promote-neuron", action="promote", model=MODEL, profile="vllm-neuron", channel="candidate",
              build=held)  # fmt: skip
    after = _gc(dep, "--json")
    assert after.returncode == 0, after.stderr
    report = json.loads(after.stdout)
    deleted = {d["key"] for d in report["deleted"]}
    assert held not in deleted and free in deleted and not deleted & set(state["stable"]), report
    (kept,) = [c for c in report["channel_kept"] if c["key"] == held]
    assert kept["channels"] == [f"{MODEL} · vllm-neuron · candidate"], kept
    text = _gc(dep)
    assert f"kept by channels {held[:12]}: {MODEL} · vllm-neuron · candidate" in text.stdout, text.stdout
    note(
        f"(10) gc --dry-run --keep-compilers 1: {len(deleted)} build(s) would go; {held[:12]} kept by its channel "
        f"(before the promotion it would have gone); {time.time() - t0:.0f}s"
    )


def _race_in_threads(dep: Deployment, a: str, b: str) -> str:
    """Two promoters of one channel against the S3 endpoint, both writing only after both have read
    (their conditional writes held at a barrier): on a new channel (`If-None-Match: *`: a and b), then
    on one that points to a (`If-Match`: b twice, from the same version). Each round exactly one
    wins; the other wrote nothing and is told who moved the channel, and to what."""
    from neuronforge.artifacts import channels
    from neuronforge.farm import releases
    from neuronforge.stores import open_store

    old = os.environ.get("AWS_ENDPOINT_URL")
    os.environ["AWS_ENDPOINT_URL"] = dep.s3.endpoint
    try:
        said = []
        for channel, start, keys in (("race-new", None, (a, b)), ("race-moved", a, (b, b))):
            if start is not None:
                request = releases.ReleaseRequest("promote", MODEL, "cpu", channel, build=start)
                releases.run(open_store(dep.store), request, "setup")
            results = _held_at_the_write(open_store(dep.store), channel, keys)
            wins = [who for who, r in results.items() if isinstance(r, releases.ReleaseOutcome)]
            losses = [r for r in results.values() if isinstance(r, channels.ChannelMoved)]
            assert len(wins) == 1 and len(losses) == 1, results
            assert f"was moved by {wins[0]}" in str(losses[0]) and "nothing was written" in str(losses[0]), losses
            record = channels.get(open_store(dep.store), channels.ChannelRef.parse(MODEL, "cpu", channel))
            assert record.current.by == wins[0] and len(record.moves) == (1 if start is None else 2), record
            said.append(f"{channel} 1 of 2 won")
        return ", ".join(said)
    finally:
        if old is None:
            os.environ.pop("AWS_ENDPOINT_URL", None)
        else:
            os.environ["AWS_ENDPOINT_URL"] = old


def _held_at_the_write(store: Any, channel: str, keys: tuple[str, str]) -> dict[str, Any]:
    """Promote `keys` to `channel` from two threads whose channel writes wait for each other (so both
    have read the channel first); who -> its outcome or the error it raised."""
    from neuronforge.farm import releases

    barrier = threading.Barrier(2, timeout=60)
    for name in ("put_if_absent", "replace_if_version"):
        real = getattr(store, name)

        def held(*args: Any, _real: Any = real, **kwargs: Any) -> Any:
            if str(args[1]).endswith("/channel.json"):  # (data, key[, version]): the channel's record
                barrier.wait()
            return _real(*args, **kwargs)

        setattr(store, name, held)
    results: dict[str, Any] = {}

    def promote(who: str, key: str) -> None:
        request = releases.ReleaseRequest("promote", MODEL, "cpu", channel, build=key)
        try:
            results[who] = releases.run(store, request, who)
        except Exception as exc:  # the loser's ChannelMoved, or what went wrong
            results[who] = exc

    threads = [threading.Thread(target=promote, args=(f"mover-{i}", k)) for i, k in enumerate(keys)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    return results


# -- (11) an SDK upgrade rehearsal: each family rebuilt on the last release that serves it ------------------
def _family_target(instance: str) -> dict[str, Any]:
    return {"instance_type": instance, "tp_degree": 2, "sequence_length": 64, "dtype": "fp32", "profile": "vllm-neuron"}


UPGRADE_TARGETS = [_family_target(i) for i in ("inf2.xlarge", "trn1.2xlarge", "trn2.3xlarge")]


def _recompile_run(dep: Deployment, catalog: Path, tag: str, **conf: Any) -> tuple[str, dict, dict]:
    """One recompile run to its end (rebuilds unthrottled, the report waiting for them): its run id, its
    plan (`find_stale`'s result) and its summary (`report`'s)."""
    conf = {"catalog": str(catalog), "store": dep.store, "wait_minutes": 10, "throttle_rebuilds": False, **conf}
    run = _run(dep, RECOMPILE_DAG, conf, tag, timeout=900)
    _succeeded(dep, RECOMPILE_DAG, run)
    run_id = run["dag_run_id"]
    return run_id, dep.xcom(RECOMPILE_DAG, run_id, "find_stale"), dep.xcom(RECOMPILE_DAG, run_id, "report")


def _recompile(dep: Deployment, catalog: Path, tag: str, **conf: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    """`_recompile_run`'s plan and summary."""
    return _recompile_run(dep, catalog, tag, **conf)[1:]


def _object(dep: Deployment, uri: str) -> bytes:
    return _s3(dep).get_object(Bucket=dep.bucket, Key=uri.split("/", 3)[3])["Body"].read()


def test_an_sdk_upgrade_rebuilds_each_family_on_its_last_release_and_proposes_migration(
    deployment: Deployment, tmp_path: Path
) -> None:
    """A catalog of inf2, trn1 and trn2 targets on the bare `vllm-neuron` line, built as SDK 2.26.1
    served it (the recompile DAG aimed at 2.26.1); then the DAG aimed at 2.33: inf2 and trn1 are
    rebuilt on 2.28.0 (the last release that serves them, then frozen), trn2 on 2.31.1 with a
    migration to vllm-neuron-native@2.33.0 proposed, not built; the report says so target by target;
    the 2.26.1 artifacts are untouched. A third run, asked to migrate, builds only the migration."""
    dep = deployment
    t0 = time.time()
    model = _upload_model(dep, tmp_path, seed=11)  # its own model: its own artifacts
    catalog = dep.root / "upgrade-catalog.yaml"
    # The model's config.json beside the catalog (`config:`), so the migration is planned offline.
    config = dep.root / "upgrade-config.json"
    config.write_bytes((tmp_path / "tiny-llama-11" / "config.json").read_bytes())
    catalog.write_text(f"models:\n  - source: {model}\n    config: {config.name}\n    targets:\n" + "".join(
        f"      - {json.dumps(t)}\n" for t in UPGRADE_TARGETS
    ))  # fmt: skip

    plan, summary = _recompile(dep, catalog, "upgrade-2-26", sdk="2.26.1")
    assert [s["profile"] for s in plan["states"]] == ["vllm-neuron@2.26.1"] * 3, plan["states"]
    assert summary["counts"].get("rebuilt") == 3, summary
    report = json.loads(_object(dep, summary["json"]))
    old = {t["slug"]: t["outcome_detail"] for t in report["targets"]}  # slug -> the 2.26.1 manifest URI
    old_bytes = {uri: _object(dep, uri) for uri in old.values()}
    t1 = time.time()

    plan, summary = _recompile(dep, catalog, "upgrade-2-33", sdk="2.33")
    assert plan["release"] == "2.33"
    rows = {s["slug"]: s for s in plan["states"]}
    assert len(rows) == 3 and not any(s["migrated_from"] for s in rows.values()), rows  # proposed, not built
    by_family = {s["upgrade"]["family"]: s for s in rows.values()}
    for family in ("inf2", "trn1"):
        up = by_family[family]["upgrade"]
        assert (up["action"], up["rebuild_on"], up["then"]) == ("rebuild", "vllm-neuron@2.28.0", "frozen"), up
        assert up["sentence"].startswith("rebuild on 2.28.0, then frozen"), up
        assert up["migration"] is None and up["current"] == "vllm-neuron@2.26.1", up
    trn2 = by_family["trn2"]["upgrade"]
    assert (trn2["action"], trn2["rebuild_on"]) == ("rebuild", "vllm-neuron@2.31.1"), trn2
    assert trn2["migration"]["profile"] == "vllm-neuron-native@2.33.0" and trn2["migration"]["ok"] is True, trn2
    assert trn2["sentence"].startswith("rebuild on 2.31.1 or migrate to vllm-neuron-native@2.33.0 (changes: "), trn2
    assert summary["counts"].get("stale") == 3 and summary["counts"].get("rebuilt") == 3, summary
    report = json.loads(_object(dep, summary["json"]))
    assert report["schema_version"] == 4 and report["release"] == "2.33"
    new = {t["slug"]: (t["profile"], t["outcome_detail"]) for t in report["targets"]}
    assert sorted(p for p, _ in new.values()) == ["vllm-neuron@2.28.0", "vllm-neuron@2.28.0", "vllm-neuron@2.31.1"]
    markdown = _object(dep, summary["markdown"]).decode()
    assert "## Upgrade to Neuron SDK 2.33" in markdown
    for s in rows.values():
        assert f"{s['slug']} ({s['upgrade']['family']}, {s['profile']}): {s['upgrade']['sentence']}" in markdown
    # Where each rebuild ran: its release's CPU compile worker, then the Neuron host.
    for run_id in summary["runs"]:
        groups = {ti["task_id"].split(".")[0] for ti in dep.task_instances(COMPILE_DAG, run_id)}
        for group in groups & {"neuron_2_28_0_target", "neuron_2_31_1_target"}:
            hosts = _hosts(dep, run_id, group)
            assert {h for (stage, _), h in hosts.items() if stage == "compile_graphs"} == {COMPILE_WORKER}, hosts
            assert {h for (stage, _), h in hosts.items() if stage == "smoke"} == {NEURON_WORKER}, hosts
    # Nothing already published was touched: each 2.26.1 manifest is byte for byte what it was.
    assert {uri: _object(dep, uri) for uri in old_bytes} == old_bytes
    assert not set(old.values()) & {uri for _, uri in new.values()}
    t2 = time.time()

    plan, summary = _recompile(dep, catalog, "upgrade-migrate", sdk="2.33", migrate=True)
    rows = plan["states"]
    stays = [s["upgrade"]["sentence"] for s in rows if not s["migrated_from"] and s["upgrade"]["family"] != "trn2"]
    assert all(s.startswith("stays on 2.28.0: vllm-neuron is frozen for") for s in stays), stays
    (moved,) = [s for s in rows if s["migrated_from"]]
    assert moved["profile"] == "vllm-neuron-native@2.33.0" and moved["status"] == "stale", moved
    assert summary["counts"].get("stale") == 1 and summary["counts"].get("rebuilt") == 1, summary
    assert {uri: _object(dep, uri) for uri in old_bytes} == old_bytes
    note(
        f"(11) SDK upgrade rehearsal: 3 targets built on 2.26.1 in {t1 - t0:.0f}s; upgrade to 2.33: inf2/trn1 -> "
        f"2.28.0 (then frozen), trn2 -> 2.31.1 with migration proposed, in {t2 - t1:.0f}s; the migration to "
        f"vllm-neuron-native@2.33.0 built on request in {time.time() - t2:.0f}s; 2.26.1 manifests untouched"
    )


# -- (12) release day: a runtime-only patch fed from AWS's manifest, attested without compiling ----------------
# Last in the file: it leaves 2.33.2 and 2.33.3 accepted in the store, and a recompile run without `sdk` aims
# at the newest release in effect.
LINE = "vllm-neuron-native"
DAY_TARGETS = [{**NATIVE_TARGET, "profile": LINE}, {**NATIVE_TARGET, "batch_size": 1, "profile": LINE}]
RUNTIME_PATCH = {"aws-neuronx-runtime-lib": "2.35.41.0", "aws-neuronx-collectives": "2.35.55.0"}  # role `load`
COMPILER_RELEASE, COMPILER = "2.33.3", "2.28.8000.0"  # 2.33.0's neuronx-cc is 2.28.7631.0
AWS_MANIFEST = REPO / "tests" / "data" / "release-manifests" / "adds-2.33.9.json"


def _aws_manifest(path: Path, adds: dict[str, dict[str, str]]) -> str:
    """A release manifest in AWS's format (src/helperscripts/n2-manifest.json of aws-neuron/aws-neuron-sdk;
    tests/data/release-manifests holds a copy): the releases the table knows, plus each of `adds` — its
    version -> the packages it changes from 2.33.0's, every other package 2.33.0's (and, as AWS's never
    does, no `vllm`); the last added is every instance's latest release. Its path."""
    data = json.loads(AWS_MANIFEST.read_text())
    known = [r for r in data["neuron_releases"] if r["neuron_version"] != "2.33.9"]  # the copy's own addition
    (base,) = [r for r in known if r["neuron_version"] == "2.33.0"]

    def release(version: str, changes: dict[str, str]) -> dict[str, Any]:
        packages = [{**p, "version": changes.get(p["name"], p["version"])} for p in base["packages"]]
        return {**base, "neuron_version": version, "packages": packages}

    added = [release(v, c) for v, c in adds.items()]
    newest = list(adds)[-1]
    data |= {
        "manifest_version": newest,
        "neuron_releases": added[::-1] + known,
        "latest_release": [{**x, "version": newest} for x in data["latest_release"]],
    }
    path.write_text(json.dumps(data, indent=1))
    return str(path)


def _compile_runs(dep: Deployment) -> int:
    return dep.get(f"/api/v2/dags/{COMPILE_DAG}/dagRuns", limit=1)["total_entries"]


def test_release_day_a_runtime_patch_is_attested_without_compiling_and_a_compiler_change_rebuilds(
    deployment: Deployment,
) -> None:
    """A release day as an operator lives it, through the deployment. (1) A catalog of two trn2 targets on
    the bare vllm-neuron-native line built by the recompile DAG on 2.33.0, the line's last registered release
    (scenario 8 published the first: only the second compiles when it ran), approved, the first promoted to
    stable. (2) AWS ships 2.33.2, a runtime-only patch (runtime and collectives, what a load reads): fed with
    `releases sync --manifest` from a manifest in AWS's format and accepted with the fields AWS's manifest
    lacks (its `vllm`) taken from 2.33.0, as decided by the release manager; `stable` now requires 2.33.2 and
    refuses the second build. The recompile DAG at `sdk` 2.33.2 — no profile is registered for it — compiles
    nothing (no compile run), smokes each kept build once on the Neuron host, on queue neuron-2.33.2 (the
    cluster policy's routing), and records the attestations, which `ls`, `show` and `channels` show; then
    `stable` takes the second build. (3) 2.33.3 changes the compiler: fed and accepted the same way, a dry run
    of the DAG decides, for each build, that the compiler changed what it reads — a rebuild, which needs a
    profile version registered for 2.33.3 first (a dry run: building on an unregistered release is refused,
    and a rebuild is scenario 11's)."""
    dep = deployment
    store = ("--store", dep.store)
    t0 = time.time()
    model = _native_model(dep, dep.root, "qwen3", "qwen3")
    catalog = dep.root / "release-day-catalog.yaml"
    catalog.write_text(f"models:\n  - source: {model}\n    targets:\n" + "".join(
        f"      - {json.dumps(t)}\n" for t in DAY_TARGETS
    ))  # fmt: skip

    # 1. The catalog on 2.33.0; its builds approved, the first on stable.
    compiled_before = _compile_runs(dep)
    plan, summary = _recompile(dep, catalog, "day-2-33-0", sdk="2.33.0")
    assert [s["profile"] for s in plan["states"]] == [f"{LINE}@2.33.0"] * 2, plan["states"]
    keys = [s["key"] for s in plan["states"]]
    built = len(summary["runs"])
    for key in keys:
        _operator(dep, "approve", key[:12], "--reason", "release-day rehearsal", *store)
    _operator(dep, "promote", model, "--profile", LINE, "--channel", "stable", "--build", keys[0][:12], *store)
    t1 = time.time()
    note(
        f"(12) release day 1/3: {len(keys)} targets on {LINE}@2.33.0 ({built} rebuild run(s), of the "
        f"{_compile_runs(dep) - compiled_before} compile run(s) started meanwhile), approved, one on stable: "
        f"{t1 - t0:.0f}s"
    )

    # 2. The runtime-only patch: fed, accepted, required by stable, attested by the DAG without compiling.
    feed = _aws_manifest(dep.root / f"n2-manifest-{PATCH_RELEASE}.json", {PATCH_RELEASE: RUNTIME_PATCH})
    synced = _operator(dep, "releases", "sync", "--manifest", feed, *store).stdout
    assert f"Neuron {PATCH_RELEASE}: proposed" in synced, synced
    _operator(dep, "releases", "accept", PATCH_RELEASE, "--same-as", "2.33.0", "--by", "release-manager", *store)
    _operator(
        dep, "require-release", model, "--channel", "stable", "--profile", LINE, "--release", PATCH_RELEASE, *store
    )
    # stable is gated: two fake builds' synthetic timings may differ either way; the move accepts it
    promote = ("promote", model, "--profile", LINE, "--channel", "stable", "--build", keys[1][:12], *store)
    promote += ("--accept-regression", "synthetic timings of the fake plugin")
    refused = _operator(dep, *promote, check=False)
    said = refused.stdout + refused.stderr
    assert refused.returncode == 3 and f"requires a build attested for Neuron SDK {PATCH_RELEASE}" in said, said
    compiled_before = _compile_runs(dep)
    run_id, plan, summary = _recompile_run(dep, catalog, "day-2-33-2", sdk=PATCH_RELEASE)
    assert plan["release"] == PATCH_RELEASE and summary["runs"] == [], summary
    assert _compile_runs(dep) == compiled_before  # 0 compiles: no compile run at all
    for s in plan["states"]:
        assert (s["status"], s["upgrade"]["decision"], set(s["upgrade"]["changed"])) == (
            "fresh",
            "re-smoke",
            {"load"},
        ), s
    assert plan["attests"] == {f"neuron-{PATCH_RELEASE}": [0, 1]}, plan["attests"]
    tis = {(t["task_id"], t["map_index"]): t for t in dep.task_instances(RECOMPILE_DAG, run_id)}
    smoke = tis[("attest_kept_neuron", 0)]  # one attest task: its queue as the cluster policy set it
    assert (smoke["state"], smoke["queue"], smoke["hostname"]) == ("success", f"neuron-{PATCH_RELEASE}", NEURON_WORKER)
    assert tis[("attest_kept_default", -1)]["state"] == "skipped" and ("attest_kept_neuron", 1) not in tis
    smoked = dep.xcom(RECOMPILE_DAG, run_id, "attest_kept_neuron", 0)  # row -> [outcome, detail]: one smoke each
    assert sorted(smoked) == ["0", "1"] and {o for o, _ in smoked.values()} == {"attested"}, smoked
    assert all(f"at SDK {PATCH_RELEASE}: re-smoke passed" in detail for _, detail in smoked.values()), smoked
    listed = {r["cache_key"]: r for r in json.loads(_operator(dep, "ls", "--json", *store).stdout)}
    assert all(PATCH_RELEASE in listed[key]["attested"] for key in keys), [listed[k] for k in keys]
    shown = _operator(dep, "show", keys[1], *store).stdout
    assert f"attested   SDK {PATCH_RELEASE}: re-smoke passed" in shown, shown
    (stable,) = [
        c for c in json.loads(_operator(dep, "channels", model, "--json", *store).stdout) if c["channel"] == "stable"
    ]
    assert (stable["requires_release"], stable["attested"]) == (PATCH_RELEASE, True), stable
    moved = json.loads(_operator(dep, *promote, "--json").stdout)
    assert moved["key"] == keys[1], moved
    t2 = time.time()
    note(
        f"(12) release day 2/3: {PATCH_RELEASE} (runtime only) fed from AWS's manifest and accepted; the DAG at "
        f"{PATCH_RELEASE}: 0 compiles, {len(smoked)} smokes on {NEURON_WORKER} (queue neuron-{PATCH_RELEASE}), "
        f"attested; stable requires {PATCH_RELEASE} and took the second build: {t2 - t1:.0f}s"
    )

    # 3. A release whose compiler changed: the plan decides a rebuild of every build (a dry run).
    compiler = {**RUNTIME_PATCH, "neuronx-cc": COMPILER}
    feed = _aws_manifest(
        dep.root / f"n2-manifest-{COMPILER_RELEASE}.json", {PATCH_RELEASE: RUNTIME_PATCH, COMPILER_RELEASE: compiler}
    )
    synced = _operator(dep, "releases", "sync", "--manifest", feed, *store).stdout
    assert f"Neuron {COMPILER_RELEASE}: proposed" in synced and f"~ neuronx-cc 2.28.7631.0 -> {COMPILER}" in synced, (
        synced
    )
    _operator(dep, "releases", "accept", COMPILER_RELEASE, "--same-as", "2.33.0", "--by", "release-manager", *store)
    plan, summary = _recompile(dep, catalog, "day-2-33-3", sdk=COMPILER_RELEASE, dry_run=True)
    for s in plan["states"]:
        up = s["upgrade"]
        assert up["changed"]["build"] == [f"neuronx-cc 2.28.7631.0 -> {COMPILER}"], up
        assert up["decision"] == "rebuild" and "to rebuild" in up["sentence"] and s["status"] == "fresh", up
    note(
        f"(12) release day 3/3: {COMPILER_RELEASE} (neuronx-cc {COMPILER}) fed and accepted; the plan: "
        f"{', '.join(s['upgrade']['decision'] for s in plan['states'])} ({plan['states'][0]['upgrade']['sentence']}); "
        f"{time.time() - t2:.0f}s"
    )
