"""An SDK upgrade decided per catalog target (neuronforge/farm/upgrades.py) and `neuronforge recompile`:
rebuild on the last release of the line that serves the family, stay frozen, migrate (proposed, built
only when asked), unknown for a release the profile data does not know."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from neuronforge.common.errors import InvalidInput
from neuronforge.farm import upgrades
from neuronforge.interfaces.cli import main
from neuronforge.profiles.registry import parse_target, pin
from neuronforge.spec.modelconfig import ModelArch
from neuronforge.spec.target import TargetSpec

LLAMA = Path("tests/data/model-configs/meta-llama--Llama-3.1-8B.json")


def target(instance: str, tp: int = 2, **kw) -> TargetSpec:
    """A catalog target as written: `profile` a bare name."""
    spec = {"instance_type": instance, "tp_degree": tp, "sequence_length": 4096, "profile": "vllm-neuron", **kw}
    return TargetSpec.parse(spec)


def arch() -> ModelArch:
    return ModelArch.from_config(json.loads(LLAMA.read_text()))


def test_a_bare_name_resolves_to_the_newest_release_that_serves_the_family() -> None:
    assert pin(target("inf2.xlarge")).profile == "vllm-neuron@2.28.0"
    assert pin(target("trn1.32xlarge", 8)).profile == "vllm-neuron@2.28.0"
    assert pin(target("trn2.48xlarge", 8)).profile == "vllm-neuron@2.31.1"
    assert pin(target("trn2.48xlarge", 8), "2.26.1").profile == "vllm-neuron@2.26.1"  # bounded by the release
    assert pin(target("inf2.xlarge", profile="vllm-neuron@2.26.1")).profile == "vllm-neuron@2.26.1"


def test_inf2_is_rebuilt_on_its_last_release_then_frozen() -> None:
    up = upgrades.decide(target("inf2.xlarge"), "2.33", ["vllm-neuron@2.26.1"])
    assert (up.action, up.rebuild_on, up.then, up.status) == ("rebuild", "vllm-neuron@2.28.0", "frozen", "frozen")
    assert up.sentence.startswith("rebuild on 2.28.0, then frozen (the last release of vllm-neuron that serves inf2)")
    assert up.migration is None  # no line of ours serves inf2 after it
    assert up.sources and "v2.29.1/release-notes/components/nxd-inference" in up.sources[0]


def test_trn2_is_rebuilt_on_2_31_or_migrated_to_the_native_line_with_the_changes_and_the_verdict() -> None:
    spec = target("trn2.48xlarge", 8, quantization="int8:per_channel", context_encoding_buckets=[1024, 4096])
    up = upgrades.decide(spec, "2.33", ["vllm-neuron@2.26.1"], arch())
    assert (up.action, up.rebuild_on) == ("rebuild", "vllm-neuron@2.31.1")
    m = up.migration
    assert m is not None and m.profile == "vllm-neuron-native@2.33.0" and m.ok is True
    assert any(c.startswith("quantization int8_per_channel -> none") for c in m.changes)
    assert any("buckets -> unset" in c for c in m.changes)
    assert m.target["quantization"] == "none" and "context_encoding_buckets" not in m.target
    assert m.verdict.startswith("fits: needs")
    assert up.sentence.startswith("rebuild on 2.31.1 or migrate to vllm-neuron-native@2.33.0 (changes: quantization")
    assert "planner: fits" in up.sentence


def test_a_migration_the_planner_rejects_says_why() -> None:
    # Llama-3.1-8B at tp 1, batch 16 on trn2.3xlarge fits int8-quantized (8.5 GiB of weights); the migration
    # drops the quantization (the plugin's line takes none) and bf16 weights no longer fit: the verdict says so
    spec = target("trn2.3xlarge", 1, batch_size=16, quantization="int8:per_channel")
    up = upgrades.decide(spec, "2.33", [], arch())
    m = up.migration
    assert m is not None and m.ok is False
    assert m.verdict.startswith("rejected: ") and "does not fit: needs 30.5 GiB per core of " in m.verdict
    assert "planner: rejected: " in up.sentence


def test_published_on_the_last_release_stays_and_a_pinned_target_is_kept() -> None:
    up = upgrades.decide(target("inf2.xlarge"), "2.33", ["vllm-neuron@2.26.1", "vllm-neuron@2.28.0"])
    assert up.action == "stay" and up.sentence.startswith("stays on 2.28.0: vllm-neuron is frozen for inf2")
    pinned = upgrades.decide(target("trn2.48xlarge", 8, profile="vllm-neuron@2.26.1"), "2.33", [])
    assert pinned.action == "pinned" and pinned.rebuild_on == "vllm-neuron@2.26.1"
    assert pinned.sentence.startswith(
        "kept on vllm-neuron@2.26.1: the catalog pins it (unpinned: rebuild on 2.31.1 or migrate to "
        "vllm-neuron-native@2.33.0 (changes: "
    )
    assert pinned.migration is not None and pinned.migration.profile == "vllm-neuron-native@2.33.0"


def test_an_upgrade_to_an_older_release_stays_within_it() -> None:
    up = upgrades.decide(target("trn2.48xlarge", 8), "2.28.0", ["vllm-neuron@2.26.1"])
    assert (up.action, up.rebuild_on, up.then, up.migration) == ("rebuild", "vllm-neuron@2.28.0", "", None)
    assert up.sentence == "rebuild on 2.28.0"


def test_an_unknown_release_is_reported_with_what_is_known_of_it_and_a_malformed_one_refused() -> None:
    up = upgrades.decide(target("trn2.48xlarge", 8), "2.34", ["vllm-neuron@2.26.1"])
    assert up.action == "unknown" and not up.rebuild_on and up.migration is None
    assert up.sentence.startswith("SDK 2.34 is not in neuronforge's profile data (the newest known release is 2.33.1)")
    assert "neuron-ls" in up.sentence and "end support on Trn2/Trn3" in up.sentence
    assert upgrades.decide(target("inf2.xlarge"), "2.40.0", []).action == "unknown"
    for bad in ("latest", "2", "2.33.0.1", "2.x"):
        with pytest.raises(InvalidInput, match=r"give it as 2\.33 or 2\.33\.0"):
            upgrades.target_release(bad)
    assert upgrades.target_release(None) == "2.33.1"


def test_a_patch_release_the_table_knows_is_decided_on_the_registered_versions() -> None:
    """2.33.1 is in the release table without a profile version of its own: the upgrade to it is
    decided (not unknown) on the newest registered versions no newer than it."""
    up = upgrades.decide(target("inf2.xlarge"), "2.33.1", ["vllm-neuron@2.26.1"])
    assert (up.action, up.rebuild_on, up.then) == ("rebuild", "vllm-neuron@2.28.0", "frozen")
    trn2 = upgrades.decide(target("trn2.48xlarge", 8), "2.33.1", [], arch())
    assert trn2.migration is not None and trn2.migration.profile == "vllm-neuron-native@2.33.0"


def test_the_decision_round_trips_through_json() -> None:
    up = upgrades.decide(target("trn2.48xlarge", 8), "2.33", [], arch())
    assert upgrades.Upgrade.from_json(json.loads(json.dumps(up.to_json()))) == up


# -- the command ---------------------------------------------------------------------------------------
CATALOG = """models:
  - source: {model}
    config: {config}
    targets:
      - {{instance_type: inf2.xlarge, tp_degree: 2, sequence_length: 64, dtype: fp32, profile: vllm-neuron}}
      - {{instance_type: trn1.2xlarge, tp_degree: 2, sequence_length: 64, dtype: fp32, profile: vllm-neuron}}
      - {{instance_type: trn2.3xlarge, tp_degree: 2, sequence_length: 64, dtype: bf16, profile: vllm-neuron,
         quantization: "int8:per_channel"}}
"""


@pytest.fixture
def catalog(tmp_path: Path, tiny_llama_template: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("NEURONFORGE_HOME", str(tmp_path / "home"))
    path = tmp_path / "models.yaml"
    path.write_text(CATALOG.format(model=tiny_llama_template, config=tiny_llama_template / "config.json"))
    (tmp_path / "store").mkdir()
    return path


def test_recompile_dry_run_says_per_target_what_the_upgrade_does(catalog: Path, capsys) -> None:
    store = str(catalog.parent / "store")
    code = main(["recompile", str(catalog), "--sdk", "2.33", "--dry-run", "--store", store])
    out = capsys.readouterr().out
    lines = out.splitlines()
    inf2 = next(x for x in lines if "vllm-neuron-inf2.xlarge" in x)
    trn1 = next(x for x in lines if "vllm-neuron-trn1.2xlarge" in x)
    trn2 = next(x for x in lines if "vllm-neuron-trn2.3xlarge" in x)
    assert "[inf2] vllm-neuron@2.28.0: rebuild on 2.28.0, then frozen" in inf2
    assert "[trn1] vllm-neuron@2.28.0: rebuild on 2.28.0, then frozen" in trn1
    assert "[trn2] vllm-neuron@2.31.1: rebuild on 2.31.1 or migrate to vllm-neuron-native@2.33.0 (changes: " in trn2
    assert "quantization int8_per_channel -> none" in trn2 and "planner: fits" in trn2
    assert lines[-1].startswith("Neuron SDK 2.33: 3 row(s): 3 to rebuild; 1 migration(s) proposed (--migrate builds")
    assert lines[-1].endswith("dry run: nothing built")
    # no toolchain of those releases on this machine: the rows are not checked, and the exit code says so
    assert code == 1 and "NOT CHECKED: 3 unavailable" in lines[-1]
    assert not any((catalog.parent / "store").iterdir())  # a dry run writes nothing


def test_recompile_with_migrate_adds_the_migration_rows(catalog: Path, capsys) -> None:
    store = str(catalog.parent / "store")
    main(["recompile", str(catalog), "--sdk", "2.33", "--dry-run", "--migrate", "--store", store, "--json"])
    data = json.loads(capsys.readouterr().out)
    moved = [t for t in data["targets"] if t["migrated_from"]]
    assert len(moved) == 1 and moved[0]["profile"] == "vllm-neuron-native@2.33.0"
    assert moved[0]["migrated_from"].endswith("vllm-neuron@2.31.1") and moved[0]["target"]["quantization"] == "none"


def test_recompile_to_an_unknown_release_builds_nothing_and_exits_3(catalog: Path, capsys) -> None:
    store = str(catalog.parent / "store")
    assert main(["recompile", str(catalog), "--sdk", "2.34", "--store", store]) == 3
    out = capsys.readouterr().out
    assert out.count("SDK 2.34 is not in neuronforge's profile data") == 3
    last = "Neuron SDK 2.34: 3 row(s): 3 unknown (release not in the profile data); 0 rebuilt here, 0 failed"
    assert out.splitlines()[-1] == last
    with pytest.raises(SystemExit) as refused:  # the release rule, at parse time: before any work
        main(["recompile", str(catalog), "--sdk", "two", "--store", store])
    assert refused.value.code == 2
    assert "'two' is not a Neuron SDK release: give it as 2.33 or 2.33.1" in capsys.readouterr().err


def test_migration_target_parses_back() -> None:
    up = upgrades.decide(target("trn2.48xlarge", 8), "2.33", [])
    assert up.migration is not None
    moved = parse_target(up.migration.target)
    assert moved.profile == "vllm-neuron-native@2.33.0" and moved.slug == up.migration.slug
