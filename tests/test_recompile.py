"""The recompile core: stale set, run requests, how rebuilds ended, SDK release check, the report."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest

from neuronforge.artifacts import leases
from neuronforge.artifacts.failures import read_failure
from neuronforge.artifacts.farm_index import record_failure
from neuronforge.farm import recompile
from neuronforge.farm.catalog import load_catalog
from neuronforge.farm.form_targets import form_target
from neuronforge.interfaces.cli import EXIT_OK, EXIT_STALE, main
from neuronforge.profiles import parse_target
from neuronforge.profiles.registry import detect_toolchain
from neuronforge.spec.target import TargetSpec
from neuronforge.stores import open_store
from neuronforge_airflow.params import TARGET_SCHEMA
from tests.conftest import NEURON_TARGET, TARGET, Compiled


def _catalog(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "models.yaml"
    path.write_text(text)
    return path


def test_stale_fresh_unavailable_and_unresolved(compiled: Compiled, tmp_path: Path) -> None:
    cpu = json.dumps(TARGET)
    bigger = json.dumps({**TARGET, "batch_size": 2})
    nxdi = json.dumps({**TARGET, "profile": "vllm-neuron@2.26.1"})
    path = _catalog(
        tmp_path,
        f"models:\n  - source: {compiled.checkpoint}\n    targets:\n      - {cpu}\n      - {bigger}\n      - {nxdi}\n"
        f"  - source: {tmp_path / 'gone'}\n    targets:\n      - {cpu}\n",
    )
    catalog = load_catalog(path)
    assert [p.ref for p in recompile.profiles_of(catalog)] == ["cpu@local", "vllm-neuron@2.26.1"]
    assert recompile.queues_of(catalog) == ["neuron-compile-2.26.1"]
    toolchains = {"cpu@local": detect_toolchain("cpu")}  # no worker of queue neuron-compile-2.26.1 reported
    states = recompile.find_stale(catalog, toolchains, compiled.store, tmp_path / "work")
    assert [s.status for s in states] == ["fresh", "stale", "unavailable", "unresolved"]
    assert states[0].key == compiled.first.key and states[0].detail.endswith("manifest.json")
    assert [(s.profile, s.published_for, s.stale_for) for s in states] == [
        ("cpu@local", ["cpu@local"], []),
        ("cpu@local", [], ["cpu@local"]),
        ("vllm-neuron@2.26.1", [], []),
        ("cpu@local", [], []),
    ]
    assert states[2].detail == "no worker of queue 'neuron-compile-2.26.1' reported the toolchain of vllm-neuron@2.26.1"
    assert states[2].target["profile"] == "vllm-neuron@2.26.1"  # pinned to the version it was checked for
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
    assert "publish_formats" not in states[1].target and states[1].target["profile"] == "cpu@local"
    assert parse_target(states[1].target).normalized() == parse_target({**TARGET, "batch_size": 2}).normalized()


def test_every_catalog_target_spelling_survives_the_trigger_form() -> None:
    spec = TargetSpec.parse(
        {"instance_type": "trn2.48xlarge", "tp_degree": 32, "sequence_length": 4096, "dtype": "bf16",
         "logical_nc_config": 2, "context_encoding_buckets": [1024, 4096], "token_generation_buckets": [4096],
         "quantization": "f8e4m3:per_channel_symmetric", "modules_to_not_convert": ["model.layers.0.mlp"],
         "profile": "vllm-neuron@2.26.1", "backend_options": {"fused_qkv": True}}
    )  # fmt: skip
    form = form_target(spec)
    jsonschema.validate(form, TARGET_SCHEMA)
    assert form["profile"] == "vllm-neuron@2.26.1" and "publish_formats" not in form and "backend" not in form
    assert TargetSpec.parse(form) == spec


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
                {
                    "neuron_version": r,
                    "packages": [{"name": "neuronx-cc", "version": cc}, {"name": "torch-neuronx", "version": "2.9.0"}],
                }
                for r, cc in releases
            ],
        },
    )
    behind = recompile.sdk_release_status(store, "2.21.33363.0")
    assert behind["latest_release"] == "2.27.0" and behind["latest_neuronx_cc"] == "2.22.12471.0"
    assert behind["installed_release"] == "2.26.1" and behind["newer_release_available"] is True
    assert recompile.sdk_release_status(store, "2.22.12471.0")["newer_release_available"] is False
    # Workers and pins carry the compiler's local label; the release manifest may not.
    labelled = recompile.sdk_release_status(store, "2.21.33363.0+82129205")
    assert labelled["installed_release"] == "2.26.1" and labelled["newer_release_available"] is True
    reported = {"a@1": {"compiler": "neuronxcc", "compiler_version": "2.21.33363.0+82129205"}, "cpu@local": "x"}
    assert recompile.newest_compiler(reported) == "2.21.33363.0+82129205"


def test_report_json_and_markdown(tmp_path: Path) -> None:
    store = open_store(f"file://{tmp_path / 'store'}")
    fresh = recompile.TargetState(0, "org/a", 3, "cpu-a", {}, recompile.FRESH, key="f" * 64, detail="file:///m")
    failed = _state("a" * 64)
    failed.outcome, failed.outcome_detail = recompile.FAILED, "smoke_ticket: SmokeFailed: tokens | differ"
    fresh.profile, fresh.published_for = "cpu@local", ["cpu@local"]
    failed.profile, failed.stale_for = "vllm-neuron@2.26.1", ["vllm-neuron@2.26.1"]
    failed.published_for = ["vllm-neuron@2.0"]  # a version no longer registered
    toolchains = {"cpu@local": "missing torch"}
    rep = recompile.Report("2026-11-22T00-00-00Z", "c.yaml", store.root_uri, toolchains, [fresh, failed])
    uris = recompile.write_report(store, rep)
    assert uris["json"].endswith("reports/recompile-2026-11-22T00-00-00Z.json")
    data = store.read_json("reports/recompile-2026-11-22T00-00-00Z.json")
    assert data["counts"] == {"fresh": 1, "stale": 1, "failed": 1}
    assert data["schema_version"] == 4 and data["targets"][1]["stale_for"] == ["vllm-neuron@2.26.1"]
    assert data["profiles"]["vllm-neuron@2.26.1"]["queue"] == "neuron-compile-2.26.1"
    assert data["profiles"]["vllm-neuron@2.0"] == {"ref": "vllm-neuron@2.0", "registered": False}
    md = store.get_bytes("reports/recompile-2026-11-22T00-00-00Z.md").decode()
    assert "**1 stale** (rebuilt 0, failed 1" in md and "cpu@local (queue default): unavailable (missing torch)" in md
    assert "| vllm-neuron@2.26.1 | stale | failed | vllm-neuron@2.0 | vllm-neuron@2.26.1 |" in md
    assert "tokens \\| differ" in md  # a pipe in an error does not break the table


def test_cli_catalog_stale(compiled: Compiled, tmp_path: Path, capsys, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NEURONFORGE_HOME", str(tmp_path / "home"))
    fresh = _catalog(
        tmp_path, f"models:\n  - source: {compiled.checkpoint}\n    targets:\n      - {json.dumps(TARGET)}\n"
    )
    assert main(["catalog", "stale", str(fresh), "--store", compiled.store.root_uri]) == EXIT_OK
    assert "0 stale of 1" in capsys.readouterr().out
    (tmp_path / "empty").mkdir()  # an empty store (a path that does not exist is refused: tests/reliability)
    empty = f"file://{tmp_path / 'empty'}"
    assert main(["catalog", "stale", str(fresh), "--store", empty, "--json"]) == EXIT_STALE
    (state,) = json.loads(capsys.readouterr().out)
    assert state["status"] == "stale" and state["key"] == compiled.first.key


def test_a_new_profile_version_makes_the_catalog_stale_until_rebuilt(
    compiled: Compiled, upgrade_fake_neuron, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A new SDK release is a new profile version: a catalog target naming the bare profile follows
    it, is stale for it until rebuilt (with the toolchain of that version's queue), and the report
    names the version it is published for and the one it is stale for; a pinned `name@version`
    target stays fresh."""
    from neuronforge.pipeline.runner import run_target
    from neuronforge.profiles import registry
    from neuronforge.profiles.base import Pins
    from neuronforge.profiles.vllm_neuron import PROFILE as V1
    from neuronforge.profiles.vllm_neuron import VllmNeuronProfile
    from neuronforge.spec.toolchain import Toolchain

    assert V1.pins.compiler_version == "2.21.33363.0+82129205"
    # The registry as it was when 2.26.1 was the line's newest release (2.28.0 and 2.31.1 came later).
    registered = tuple(p for p in registry.all_profiles() if p.name != V1.name or p.ref == V1.ref)
    monkeypatch.setattr(registry, "all_profiles", lambda: registered)
    upgrade_fake_neuron(V1.pins.compiler_version)  # the SDK 2.26.1 worker image
    store, work = open_store(f"file://{tmp_path / 'store'}"), tmp_path / "work"
    target = {**NEURON_TARGET, "profile": "vllm-neuron"}
    follows = load_catalog(
        _catalog(tmp_path, f"models:\n  - source: {compiled.checkpoint}\n    targets:\n      - {json.dumps(target)}\n")
    )
    pinned_path = tmp_path / "pinned" / "models.yaml"
    pinned_path.parent.mkdir()
    pinned_path.write_text(
        f"models:\n  - source: {compiled.checkpoint}\n    targets:\n"
        f"      - {json.dumps({**target, 'profile': 'vllm-neuron@2.26.1'})}\n"
    )
    pinned = load_catalog(pinned_path)
    first = run_target(str(compiled.checkpoint), TargetSpec.parse(target), store, work)
    assert first.published.manifest.profile.ref == "vllm-neuron@2.26.1"
    v1_toolchains = recompile.detect_toolchains([V1])
    assert isinstance(v1_toolchains[V1.ref], Toolchain)
    (before,) = recompile.find_stale(follows, v1_toolchains, store, work)
    assert (before.status, before.key, before.published_for, before.stale_for) == (
        "fresh",
        first.key,
        ["vllm-neuron@2.26.1"],
        [],
    )

    class Release2270(VllmNeuronProfile):
        pins = Pins("2.27.0", "2.22.12471.0+f00dcafe", {"neuronx-distributed-inference": "0.6.10598"})

    v2 = Release2270()
    monkeypatch.setattr(registry, "all_profiles", lambda: (*registered, v2))
    assert [p.ref for p in recompile.profiles_of(follows)] == ["vllm-neuron@2.27.0"]
    assert recompile.queues_of(follows) == ["neuron-compile-2.27.0"]
    assert recompile.queues_of(pinned) == ["neuron-compile-2.26.1"]

    # No worker of queue neuron-compile-2.27.0 yet: unavailable, naming the queue; still published for 2.26.1.
    (waiting,) = recompile.find_stale(follows, v1_toolchains, store, work)
    assert (waiting.status, waiting.profile, waiting.published_for) == (
        "unavailable",
        "vllm-neuron@2.27.0",
        ["vllm-neuron@2.26.1"],
    )
    assert waiting.detail == "no worker of queue 'neuron-compile-2.27.0' reported the toolchain of vllm-neuron@2.27.0"
    # A 2.26.1 toolchain reported for the 2.27.0 profile is not its pins: no key is computed with it.
    (wrong,) = recompile.find_stale(follows, {v2.ref: v1_toolchains[V1.ref]}, store, work)
    assert wrong.status == "unavailable" and not wrong.key
    assert "needs neuronx-cc 2.22.12471.0+f00dcafe; the worker has 2.21.33363.0+82129205" in wrong.detail
    # The pinned target stays on 2.26.1: fresh.
    (kept,) = recompile.find_stale(pinned, v1_toolchains, store, work)
    assert (kept.status, kept.key, kept.profile) == ("fresh", first.key, "vllm-neuron@2.26.1")

    # The 2.27.0 worker image reports its toolchain: stale for 2.27.0, published for 2.26.1.
    upgrade_fake_neuron(v2.pins.compiler_version, release="2.27.0")
    v2_toolchains = recompile.detect_toolchains([v2], "on the workers of queue 'neuron-compile-2.27.0'")
    assert isinstance(v2_toolchains[v2.ref], Toolchain)
    (stale,) = recompile.find_stale(follows, v2_toolchains, store, work)
    assert (stale.status, stale.published_for, stale.stale_for) == (
        "stale",
        ["vllm-neuron@2.26.1"],
        ["vllm-neuron@2.27.0"],
    )
    assert stale.key != first.key and stale.target["profile"] == "vllm-neuron@2.27.0"
    (run,) = recompile.run_requests([stale], store.root_uri, "recompile__x")
    assert run["conf"]["targets"] == [stale.target]
    reported = {ref: tc.to_json() for ref, tc in v2_toolchains.items()}
    rep = recompile.Report("2026-11-23T00-00-00Z", "models.yaml", store.root_uri, reported, [stale])
    data = rep.to_json()
    assert set(data["profiles"]) == {"vllm-neuron@2.26.1", "vllm-neuron@2.27.0"}
    assert data["profiles"]["vllm-neuron@2.27.0"]["queue"] == "neuron-compile-2.27.0"
    (row,) = data["targets"]
    assert row["published_for"] == ["vllm-neuron@2.26.1"] and row["stale_for"] == ["vllm-neuron@2.27.0"]
    md = rep.to_markdown()
    assert "| vllm-neuron@2.27.0 | stale | - | vllm-neuron@2.26.1 | vllm-neuron@2.27.0 |" in md
    assert "- vllm-neuron@2.27.0 (queue neuron-compile-2.27.0): nxdi" in md and "2.22.12471.0+f00dcafe" in md

    # Rebuilt as the run asks: fresh for 2.27.0, published for both versions.
    rebuilt = run_target(str(compiled.checkpoint), TargetSpec.parse(stale.target), store, work)
    assert rebuilt.key == stale.key and rebuilt.published.manifest.profile.ref == "vllm-neuron@2.27.0"
    (now,) = recompile.find_stale(follows, v2_toolchains, store, work)
    assert (now.status, now.published_for, now.stale_for) == (
        "fresh",
        ["vllm-neuron@2.26.1", "vllm-neuron@2.27.0"],
        [],
    )
    # Retiring 2.26.1 from the registry does not hide what is published for it.
    monkeypatch.setattr(registry, "all_profiles", lambda: (*(p for p in registered if p is not V1), v2))
    (retired,) = recompile.find_stale(follows, v2_toolchains, store, work)
    assert retired.status == "fresh" and retired.published_for == ["vllm-neuron@2.26.1", "vllm-neuron@2.27.0"]
    rep = recompile.Report("2026-11-24T00-00-00Z", "models.yaml", store.root_uri, reported, [retired])
    assert rep.to_json()["profiles"]["vllm-neuron@2.26.1"] == {"ref": "vllm-neuron@2.26.1", "registered": False}


def _decided(order: int, model: str, line: str, decision: str, status: str = recompile.STALE) -> recompile.TargetState:
    """A row as `find_stale` leaves it: `line`'s target of `model`, decided `decision`."""
    state = recompile.TargetState(order, model, order + 1, f"{line}-{order}", {"n": order}, status, key=f"{order:064x}")
    state.pinned, state.profile = f"{model}@rev", f"{line}@local" if line == "cpu" else f"{line}@2.33.0"
    state.upgrade = {"action": decision, "decision": decision, "line": line}
    return state


def test_rebuild_runs_stop_at_the_limit_and_the_rest_wait_for_the_next_run(tmp_path: Path) -> None:
    """2 000 models would be 2 000 mapped triggers; Airflow fails a run of more than `[core] max_map_length`
    (1 024 by default). The runs are cut at the limit by model, in catalog order: every target of a model
    past it waits (no run id), is counted in the summary the report leads with, and is still stale."""
    states = [_decided(i, f"org/m{i // 2}", "vllm-neuron", "rebuild") for i in range(6)]  # 3 models x 2 targets
    runs = recompile.run_requests(states, "file:///s", "recompile__x", limit=2)
    assert [r["conf"]["model"] for r in runs] == ["org/m0@rev", "org/m1@rev"]
    assert [len(r["conf"]["targets"]) for r in runs] == [2, 2]
    assert [s.outcome for s in states] == ["", "", "", "", "waiting", "waiting"]
    assert states[4].run_id == "" and "[core] max_map_length" in states[4].outcome_detail
    many = [_decided(i, f"org/m{i}", "vllm-neuron", "rebuild") for i in range(101)]  # ids sort as the catalog
    assert [r["trigger_run_id"] for r in recompile.run_requests(many, "file:///s", "r")][-2:] == ["r__099", "r__100"]
    # Settling keeps them waiting (not "no run was triggered", not an older run's failure), and not pending.
    store = open_store(f"file://{tmp_path / 'store'}")
    record_failure(store, states[4].key, "compile_ticket", RuntimeError("old"), "an-older-run")
    assert recompile.settle(store, states[4:]) is True and states[4].outcome == "waiting"
    line = recompile.summary_line("2.33.0", states)
    assert line == (
        "Neuron SDK 2.33.0: 6 target(s): 6 rebuild; by line: vllm-neuron 6 rebuild; "
        "2 waiting for the next recompile run"
    )
    md = recompile.Report("2026-11-29T00-00-00Z", "c.yaml", store.root_uri, {}, states, release="2.33.0").to_markdown()
    summary, rows = md.index(line), md.index("| 0 | org/m0 |")
    assert "waiting for the next run 2)" in md[:summary] and summary < md.index("## Upgrade to Neuron SDK") < rows
    assert md.count(line) == 1 and "| stale | waiting |" in md


def test_kept_builds_are_attested_on_the_neuron_hosts_of_the_release_whatever_it_is(tmp_path: Path) -> None:
    """Where a `re-smoke` build is smoked, or a `re-verify` build re-traced and smoked: the Neuron hosts of
    the release aimed at (`neuron-<release>`), whether a profile is registered for it (2.33.0) or not
    (2.33.1: known to the release table only — a worker of its image proves the build there all the same),
    the default queue for the cpu profile (no Neuron SDK). Whether a worker consumes the queue is the DAG's
    question (tests/operators)."""
    from neuronforge.profiles import device_queues

    cpu = _decided(0, "org/a", "cpu", "re-smoke", recompile.FRESH)
    native = _decided(1, "org/b", "vllm-neuron-native", "re-smoke", recompile.FRESH)
    stale = _decided(2, "org/c", "vllm-neuron-native", "re-smoke")  # not built yet: rebuilt, not attested
    verify = _decided(3, "org/d", "vllm-neuron-native", "re-verify", recompile.FRESH)
    states = [cpu, native, stale, verify]
    assert "neuron-2.33.0" in device_queues() and "neuron-2.33.1" not in device_queues()
    assert recompile.attest_plan(states, "2.33.0") == {"default": [0], "neuron-2.33.0": [1, 3]}
    assert recompile.attest_plan(states, "2.33.1") == {"default": [0], "neuron-2.33.1": [1, 3]}
    assert [s.outcome for s in states] == ["", "", "", ""]  # placed, not decided: the DAG asks for a worker
    for s in (native, verify):
        recompile.leave_to_attest(s, "2.33.1", "file:///s", "no Celery worker consumes queue 'neuron-2.33.1'")
    assert native.outcome == verify.outcome == "to-attest" and native.outcome_detail == (
        "no Celery worker consumes queue 'neuron-2.33.1'; on a Neuron "
        f"host of SDK 2.33.1: neuronforge attest {native.key[:12]} --sdk 2.33.1 --store file:///s"
    )
    assert recompile.summary_line("2.33.1", states).endswith("; 2 to attest on a Neuron host of the release")


def test_a_re_verify_that_missed_keys_is_decided_rebuild_waiting_for_a_profile_version(tmp_path: Path) -> None:
    """The recompile DAG's attest task returns only the outcome: its report reads the failed re-verify's keys
    from the attestation (the row's decision `rebuild`, the keys named). The rebuild needs a profile version
    of the line for the release (its image): none is registered for 2.33.1, so the row is not rebuildable,
    its summary says so, and nothing is marked stale."""
    from neuronforge.artifacts import attestations
    from neuronforge.farm import upgrades
    from neuronforge.records.attestation import Attestation

    store = open_store(f"file://{tmp_path / 'store'}")
    row = _decided(0, "org/a", "vllm-neuron-native", "re-verify", recompile.FRESH)
    row.upgrade = upgrades.Upgrade("2.33.1", "re-verify", "vllm-neuron-native", "trn2", decision="re-verify").to_json()
    row.outcome = recompile.NOT_ATTESTED
    untouched = _decided(1, "org/b", "vllm-neuron-native", "re-verify", recompile.FRESH)
    untouched.upgrade, untouched.outcome = dict(row.upgrade), recompile.NOT_ATTESTED
    missed = "ab" * 16
    failed = Attestation(release="2.33.1", run="re-verify", passed=False, keys_found=[], keys_missing=[missed])
    attestations.attest(store, row.key, failed)
    recompile.reverify_outcomes(store, [row, untouched], "2.33.1")
    assert row.upgrade["decision"] == "rebuild" and row.upgrade["keys_missing"] == [missed]
    assert missed in row.upgrade["sentence"] and row.status == recompile.FRESH  # this run rebuilt nothing
    assert "register one (lines.vllm-neuron-native.profile and its image" in row.upgrade["sentence"]
    assert not recompile.rebuildable(row)
    assert untouched.upgrade["decision"] == "re-verify"  # no failed re-verify recorded for it
    line = recompile.summary_line("2.33.1", [row, untouched])
    assert "2 target(s): 1 re-verify, 1 rebuild (no profile version for the release);" in line, line
