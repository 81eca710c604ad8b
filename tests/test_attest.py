"""`neuronforge attest KEY --sdk R`: a published build proven at a newer SDK release without compiling —
its own smoke test run against the artifact as stored (downloaded, checked, loaded as its consumer
loads it, compiling forbidden), the attestation recorded beside it; refused where the release asks a
rebuild. The session's real cpu build (`compiled`, in a copy of its store: the session's is read only)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from neuronforge.artifacts import attestations, layout
from neuronforge.farm import attest, upgrade_decisions
from neuronforge.interfaces.cli import main
from neuronforge.profiles import release_table
from neuronforge.records.artifact_manifest import ArtifactManifest
from neuronforge.records.smoke import FIGURES
from neuronforge.stores import open_store


def test_a_published_build_is_smoked_and_attested_without_compiling(
    compiled, tmp_path: Path, capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = Path(compiled.store.root_uri.removeprefix("file://"))
    shutil.copytree(root, tmp_path / "store")
    store = open_store(f"file://{tmp_path / 'store'}")
    key = compiled.first.key
    compiles = []
    from neuronforge.pipeline.stages import compile as compile_stage

    monkeypatch.setattr(compile_stage, "run", lambda *a, **k: compiles.append(a))  # never called
    argv = ["attest", key[:12], "--sdk", "2.33.1", "--store", store.root_uri, "--work-dir", str(tmp_path / "work")]
    assert main([*argv, "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["decision"] == "re-smoke" and out["attestation"]["run"] == "re-smoke"
    assert out["attestation"]["passed"] is True and "tokens match" in out["attestation"]["detail"]
    figures = out["attestation"]["measurement"]["figures"]  # the re-smoke's, for the upgrade report to compare
    assert set(figures) == set(FIGURES) and out["attestation"]["measurement"]["host"]["instance_type"] == "cpu"
    assert compiles == []
    assert attestations.attested_for(store, key, "2.33.1", "none")
    record = attestations.attestations_of(store, key)
    assert record is not None and record.passing() == ["2.33.1"]
    # the artifact as stored, not this host's copy: a file changed in the store fails the download
    manifest = ArtifactManifest.read(store, json.loads(store.get_bytes(layout.index_entry(key)))["manifest"])
    prefix = json.loads(store.get_bytes(layout.index_entry(key)))["prefix"]
    victim = next(f for f in manifest.files if f.path.startswith("launch/"))
    store.put_bytes(b"x" * victim.size, f"{prefix}/{victim.path}")
    assert main(argv) != 0
    assert "does not match its manifest" in capsys.readouterr().err


def test_what_the_release_asks_decides_what_is_run() -> None:
    table = release_table.load()
    cpu = ArtifactManifest.model_construct(profile=None, cache_key="c" * 64)
    with pytest.raises(attest.NotAttestable, match=r"does not say what 2\.33\.1 changes"):
        attest.decision_for(cpu, "2.33.1")
    native = table.entry("2.33.0")
    assert native is not None
    decided = upgrade_decisions.decide_packages(native, table.entry("2.33.1"), table.lines["vllm-neuron-native"].reads)
    assert decided.decision == "re-verify"  # the key library changed: the consumer's re-trace (tests/test_reverify.py)


def test_recompile_attests_a_kept_build_instead_of_compiling_it(
    compiled, tmp_path: Path, capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The wiring of `recompile --sdk R` (not a dry run): a target whose decision is `re-smoke` is smoked
    and attested, never built. The session's build is a cpu one, whose line the release table does not
    hold, so the decision is given (`upgrades.decide` as it decides a vllm-neuron-native build kept at a
    runtime-only patch release)."""
    from neuronforge.farm import upgrades
    from neuronforge.pipeline import runner
    from tests.conftest import TARGET

    root = Path(compiled.store.root_uri.removeprefix("file://"))
    shutil.copytree(root, tmp_path / "store")
    store = open_store(f"file://{tmp_path / 'store'}")
    monkeypatch.setenv("NEURONFORGE_HOME", str(tmp_path / "home"))
    catalog = tmp_path / "models.yaml"
    catalog.write_text(f"models:\n  - source: {compiled.checkpoint}\n    targets:\n      - {json.dumps(TARGET)}\n")
    kept = upgrades.Upgrade(release="2.33.1", action=upgrades.RESMOKE, line="cpu", family="inf2", decision="re-smoke")
    monkeypatch.setattr(upgrades, "decide", lambda *a, **k: kept)
    builds: list[object] = []
    monkeypatch.setattr(runner, "run_target", lambda *a, **k: builds.append(a))
    assert main(["recompile", str(catalog), "--sdk", "2.33.1", "--store", store.root_uri, "--json"]) == 0
    [row] = json.loads(capsys.readouterr().out)["targets"]
    assert row["outcome"] == "attested" and "re-smoke passed" in row["outcome_detail"]
    assert builds == []  # no compile: the published build was smoked
    assert attestations.attested_for(store, compiled.first.key, "2.33.1", "none")


def test_a_release_the_store_accepted_is_one_attest_knows(
    compiled, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    """2.33.9 is known only from the store's feed (`releases sync --accept`): attest reads it, as recompile does."""
    root = Path(compiled.store.root_uri.removeprefix("file://"))
    shutil.copytree(root, tmp_path / "store")
    store = f"file://{tmp_path / 'store'}"
    argv = ["attest", compiled.first.key[:12], "--sdk", "2.33.9", "--store", store, "--work-dir", str(tmp_path / "w")]
    assert main(argv) == 2
    assert "releases ls" in capsys.readouterr().err
    feed = Path(__file__).parent / "data" / "release-manifests" / "adds-2.33.9.json"
    assert main(["releases", "sync", "--manifest", str(feed), "--accept", "2.33.9", "--store", store]) == 0
    capsys.readouterr()
    assert main([*argv, "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["release"] == "2.33.9" and out["attestation"]["passed"] is True


def test_a_kept_neuron_build_is_smoked_in_the_interpreter_of_the_release_it_is_proven_at(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A re-smoke proves the build against R's runtime, so it loads in R's image: the interpreter the host
    names for R (`NEURONFORGE_TOOLCHAIN_PYTHON_<R>`), not the one of the release the build was made on; a
    profile without a Neuron SDK loads in its own."""
    from neuronforge.records.artifact_manifest import ProfileRef

    monkeypatch.setenv("NEURONFORGE_TOOLCHAIN_PYTHON_2_33_0", "/images/2.33.0/python")
    monkeypatch.setenv("NEURONFORGE_TOOLCHAIN_PYTHON_2_33_2", "/images/2.33.2/python")
    neuron = ArtifactManifest.model_construct(profile=ProfileRef.model_construct(ref="vllm-neuron-native@2.33.0"))
    assert attest.serving_python(neuron, "2.33.2").path == "/images/2.33.2/python"
    cpu = ArtifactManifest.model_construct(profile=ProfileRef.model_construct(ref="cpu@local"))
    assert attest.serving_python(cpu, "2.33.2") is None
