"""The recompile core: stale set, run requests, how rebuilds ended, SDK release check, the report."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest

from neuronforge import leases, recompile
from neuronforge.catalog import load_catalog
from neuronforge.cli import EXIT_OK, EXIT_STALE, main
from neuronforge.failures import read_failure, record_failure
from neuronforge.stores import open_store
from neuronforge.target import TargetSpec
from neuronforge.toolchain import detect_toolchain
from operators.compile_params import TARGET_SCHEMA
from tests.conftest import TARGET, Compiled


def _catalog(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "models.yaml"
    path.write_text(text)
    return path


def test_stale_fresh_unavailable_and_unresolved(compiled: Compiled, tmp_path: Path) -> None:
    cpu = json.dumps(TARGET)
    bigger = json.dumps({**TARGET, "batch_size": 2})
    nxdi = json.dumps({**TARGET, "backend": "nxdi"})
    path = _catalog(
        tmp_path,
        f"models:\n  - source: {compiled.checkpoint}\n    targets:\n      - {cpu}\n      - {bigger}\n      - {nxdi}\n"
        f"  - source: {tmp_path / 'gone'}\n    targets:\n      - {cpu}\n",
    )
    catalog = load_catalog(path)
    toolchains = {"cpu": detect_toolchain("cpu"), "nxdi": "not installed on the neuron workers"}
    states = recompile.find_stale(catalog, toolchains, compiled.store, tmp_path / "work")
    assert [s.status for s in states] == ["fresh", "stale", "unavailable", "unresolved"]
    assert states[0].key == compiled.first.key and states[0].detail.endswith("manifest.json")
    assert "does not exist" in states[3].detail

    runs = recompile.run_requests(states, "file:///store", "recompile__x")
    assert runs == [
        {
            "trigger_run_id": "recompile__x__00",
            "conf": {"model": states[1].pinned, "store": "file:///store", "targets": [states[1].target]},
        }
    ]
    assert states[1].run_id == "recompile__x__00" and not states[0].run_id
    # The conf is what the compile DAG's form accepts, and means the same target.
    jsonschema.validate(states[1].target, TARGET_SCHEMA)
    raw = {k: v for k, v in states[1].target.items() if k != "publish_formats"}
    assert TargetSpec.parse(raw) == TargetSpec.parse({**TARGET, "batch_size": 2})


def test_every_catalog_target_spelling_survives_the_trigger_form() -> None:
    spec = TargetSpec.parse(
        {"instance_type": "trn2.48xlarge", "tp_degree": 32, "sequence_length": 4096, "dtype": "bf16",
         "logical_nc_config": 2, "context_encoding_buckets": [1024, 4096], "token_generation_buckets": [4096],
         "quantization": "f8e4m3:per_channel_symmetric", "backend": "nxdi", "backend_options": {"fused_qkv": True}}
    )  # fmt: skip
    form = recompile.form_target(spec, ["optimum", "lmi"])
    jsonschema.validate(form, TARGET_SCHEMA)
    assert TargetSpec.parse({k: v for k, v in form.items() if k != "publish_formats"}) == spec


def _state(key: str, run_id: str = "r1") -> recompile.TargetState:
    return recompile.TargetState(0, "m", 1, "slug", {}, recompile.STALE, key=key, run_id=run_id)


def test_settle_says_how_each_rebuild_ended(compiled: Compiled, tmp_path: Path) -> None:
    store = open_store(f"file://{tmp_path / 'store'}")
    failed, stale_failure, running, queued = (_state(c * 64) for c in "abcd")
    record_failure(store, failed.key, "plan_target", ValueError("tp 3 does not divide 32 heads"), "r1")
    record_failure(store, stale_failure.key, "compile_ticket", RuntimeError("old"), "an-older-run")
    assert leases.try_acquire(store, running.key, "worker-1", ttl_s=60) is not None
    rebuilt = _state(compiled.first.key)
    states = [rebuilt, failed, stale_failure, running, queued]
    assert recompile.settle(compiled.store, [rebuilt]) is True
    assert rebuilt.outcome == "rebuilt" and rebuilt.outcome_detail.endswith("manifest.json")
    assert recompile.settle(store, states[1:]) is False  # some still pending
    assert [s.outcome for s in states] == ["rebuilt", "failed", "queued", "running", "queued"]
    assert failed.outcome_detail == "plan_target: ValueError: tp 3 does not divide 32 heads"
    assert "worker-1" in running.outcome_detail
    assert read_failure(store, "e" * 64) is None


def test_sdk_release_manifest_says_when_workers_are_behind(tmp_path: Path) -> None:
    store = open_store(f"file://{tmp_path / 'store'}")
    assert recompile.sdk_release_status(store, "2.21.33363.0") is None  # nothing mirrored
    releases = [("2.26.1", "2.21.33363.0"), ("2.27.0", "2.22.12471.0"), ("2.9.0", "2.1.0.0")]
    store.write_json(
        "sdk-releases/n2-manifest.json",
        {
            "manifest_date": "2026-11-01",
            "neuron_releases": [
                {"neuron_version": r, "packages": [{"name": "neuronx-cc", "version": cc}, {"name": "torch-neuronx"}]}
                for r, cc in releases
            ],
        },
    )
    behind = recompile.sdk_release_status(store, "2.21.33363.0")
    assert behind["latest_release"] == "2.27.0" and behind["latest_neuronx_cc"] == "2.22.12471.0"
    assert behind["installed_release"] == "2.26.1" and behind["newer_release_available"] is True
    assert recompile.sdk_release_status(store, "2.22.12471.0")["newer_release_available"] is False


def test_report_json_and_markdown(tmp_path: Path) -> None:
    store = open_store(f"file://{tmp_path / 'store'}")
    fresh = recompile.TargetState(0, "org/a", 3, "cpu-a", {}, recompile.FRESH, key="f" * 64, detail="file:///m")
    failed = _state("a" * 64)
    failed.outcome, failed.outcome_detail = recompile.FAILED, "smoke_ticket: SmokeFailed: tokens | differ"
    rep = recompile.Report("2026-11-22T00-00-00Z", "c.yaml", store.root_uri, {"cpu": "missing torch"}, [fresh, failed])
    uris = recompile.write_report(store, rep)
    assert uris["json"].endswith("reports/recompile-2026-11-22T00-00-00Z.json")
    data = store.read_json("reports/recompile-2026-11-22T00-00-00Z.json")
    assert data["counts"] == {"fresh": 1, "stale": 1, "failed": 1}
    md = store.get_bytes("reports/recompile-2026-11-22T00-00-00Z.md").decode()
    assert "**1 stale** (rebuilt 0, failed 1" in md and "cpu: unavailable (missing torch)" in md
    assert "tokens \\| differ" in md  # a pipe in an error does not break the table


def test_cli_catalog_stale(compiled: Compiled, tmp_path: Path, capsys, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NEURONFORGE_HOME", str(tmp_path / "home"))
    fresh = _catalog(
        tmp_path, f"models:\n  - source: {compiled.checkpoint}\n    targets:\n      - {json.dumps(TARGET)}\n"
    )
    assert main(["catalog", "stale", str(fresh), "--store", compiled.store.root_uri]) == EXIT_OK
    assert "0 stale of 1" in capsys.readouterr().out
    empty = f"file://{tmp_path / 'empty'}"
    assert main(["catalog", "stale", str(fresh), "--store", empty, "--json"]) == EXIT_STALE
    (state,) = json.loads(capsys.readouterr().out)
    assert state["status"] == "stale" and state["key"] == compiled.first.key
