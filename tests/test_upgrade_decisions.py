"""An upgrade at the cheapest correct cost (neuronforge/farm/upgrade_decisions.py and its use by
`upgrades.decide` and `neuronforge recompile`): a build kept at a newer release when only what its
loads or its consumer's key read changed, rebuilt when the compiler or a graph-shaping library did,
and a package the line does not classify treated as read by the build."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from neuronforge.farm import recompile, upgrade_decisions, upgrades
from neuronforge.interfaces.cli import main
from neuronforge.profiles import release_table
from neuronforge.records.sdk_release import Package, SdkReleaseEntry
from neuronforge.spec.target import TargetSpec

TABLE = release_table.load()
NATIVE = TABLE.lines["vllm-neuron-native"].reads


def native(instance: str = "trn2.3xlarge") -> TargetSpec:
    spec = {"instance_type": instance, "tp_degree": 2, "sequence_length": 64, "dtype": "bf16"}
    return TargetSpec.parse({**spec, "profile": "vllm-neuron-native"})


def patched(base: str, version: str, **versions: str) -> SdkReleaseEntry:
    """A fake release: `base`'s packages with the `versions` given (name=version, `_` for `-`)."""
    entry = TABLE.entry(base)
    assert entry is not None
    changes = {k.replace("_", "-"): v for k, v in versions.items()}
    packages = tuple(p.model_copy(update={"version": changes.pop(p.name, p.version)}) for p in entry.packages)
    packages += tuple(Package(name=n, version=v, source="manifest") for n, v in changes.items())
    return entry.model_copy(update={"version": version, "packages": packages})


def test_2_33_1_re_verifies_the_native_line_naming_the_key_libraries_and_the_guess() -> None:
    d = upgrade_decisions.decide_packages(TABLE.entry("2.33.0"), TABLE.entry("2.33.1"), NATIVE)
    assert (d.decision, d.base, d.release) == ("re-verify", "2.33.0", "2.33.1")
    assert "libtorch-neuronx-lite (not in 2.33.0) -> 2.11.0.1.0.4089" in d.deciding
    assert "libneuronxla 3.0.10135.0 -> 3.0.12293.0" in d.deciding
    assert all(c.split()[0] in ("libtorch-neuronx-lite", "libneuronxla") for c in d.deciding)
    assert "aws-neuronx-runtime-lib 2.35.30.0 -> 2.35.33.0" in d.changed["load"]
    assert d.changed["unread"] == ("jax_neuronx 0.10.0.1.0.14198 -> 0.10.0.1.0.15472",)
    assert "build" not in d.changed  # neuronx-cc, nki, the plugin, vLLM and torch-neuronx are the same
    assert d.unverified and d.unverified[0].startswith("UNVERIFIED: decided by the re-trace")


def test_a_runtime_only_release_re_smokes_and_a_compiler_change_rebuilds() -> None:
    runtime = patched("2.33.0", "2.33.9", aws_neuronx_runtime_lib="2.35.99.0", nrtpy="2.35.99")
    d = upgrade_decisions.decide_packages(TABLE.entry("2.33.0"), runtime, NATIVE)
    assert (d.decision, d.deciding) == (
        "re-smoke",
        ("aws-neuronx-runtime-lib 2.35.30.0 -> 2.35.99.0", "nrtpy 2.35.30 -> 2.35.99"),
    )
    compiler = patched("2.33.0", "2.33.9", neuronx_cc="2.28.9999.0", nrtpy="2.35.99")
    d = upgrade_decisions.decide_packages(TABLE.entry("2.33.0"), compiler, NATIVE)
    assert (d.decision, d.deciding) == ("rebuild", ("neuronx-cc 2.28.7631.0 -> 2.28.9999.0",))
    same = upgrade_decisions.decide_packages(TABLE.entry("2.33.0"), patched("2.33.0", "2.33.9"), NATIVE)
    assert (same.decision, same.deciding, same.changed) == ("nothing", (), {})


def test_a_package_the_line_does_not_classify_rebuilds_and_is_named() -> None:
    new = patched("2.33.0", "2.33.9", aws_neuronx_runtime_lib="2.35.99.0", some_new_library="1.0")
    d = upgrade_decisions.decide_packages(TABLE.entry("2.33.0"), new, NATIVE)
    assert d.decision == "rebuild"
    assert d.deciding == (
        "some-new-library (not in 2.33.0) -> 1.0 (not classified for the line: treated as read by the build)",
    )


def test_a_native_build_on_2_33_0_is_kept_and_re_verified_at_2_33_1() -> None:
    up = upgrades.decide(native(), "2.33.1", ["vllm-neuron-native@2.33.0"])
    assert (up.action, up.decision, up.rebuild_on, up.base) == (
        "re-verify",
        "re-verify",
        "vllm-neuron-native@2.33.0",
        "2.33.0",
    )
    assert up.sentence.startswith("keeps its build on vllm-neuron-native@2.33.0: a library the consumer's key may")
    assert any(p.startswith("libtorch-neuronx-lite") for p in up.packages) and up.unverified
    # at 2.33.0 itself nothing changed; not yet built, or built on 2.32.0: rebuilt on 2.33.0 as before
    assert upgrades.decide(native(), "2.33.0", ["vllm-neuron-native@2.33.0"]).decision == "nothing"
    assert upgrades.decide(native(), "2.33.1", ["vllm-neuron-native@2.32.0"]).decision == "rebuild"
    assert upgrades.decide(native(), "2.33.1", []).rebuild_on == "vllm-neuron-native@2.33.0"
    assert upgrades.Upgrade.from_json(json.loads(json.dumps(up.to_json()))) == up


def test_a_compiler_change_without_a_registered_profile_version_is_a_rebuild_waiting_for_one(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    table = release_table.load()
    entries = tuple(
        patched("2.33.1", "2.33.1", neuronx_cc="2.28.9999.0") if e.version == "2.33.1" else e for e in table.entries
    )
    monkeypatch.setattr(release_table, "load", lambda folder=None: release_table.Table(
        entries, table.sources, table.lines, table.display, table.folder
    ))  # fmt: skip
    up = upgrades.decide(native(), "2.33.1", ["vllm-neuron-native@2.33.0"])
    # what the release asks is a rebuild; not done here: no profile version (image, pins) for 2.33.1
    assert (up.action, up.decision, up.packages) == ("unknown", "rebuild", ["neuronx-cc 2.28.7631.0 -> 2.28.9999.0"])
    assert "rebuilt on a profile version of vllm-neuron-native for it; none is registered: register one" in up.sentence


def test_a_frozen_line_is_not_decided_by_packages() -> None:
    """vllm-neuron on trn2 is frozen after 2.31: its build stays, whatever 2.33.1 changed."""
    spec = TargetSpec.parse(
        {"instance_type": "trn2.3xlarge", "tp_degree": 2, "sequence_length": 64, "profile": "vllm-neuron"}
    )
    up = upgrades.decide(spec, "2.33.1", ["vllm-neuron@2.31.1"])
    assert (up.action, up.base, up.packages) == ("stay", "", [])


# -- the table's roles ------------------------------------------------------------------------------
def _table_copy(tmp_path: Path) -> Path:
    folder = tmp_path / "releases"
    shutil.copytree(release_table.TABLE, folder)
    return folder


def test_every_line_classifies_what_its_registered_releases_pin() -> None:
    """A pinned package is what a build or a key reads: never a load's, never unclassified."""
    for name, facts in TABLE.lines.items():
        for r in release_table.profile_releases(name):
            pinned = {p.distribution for p in r.packages.values()}
            roles = {p: facts.role_of(p).role for p in pinned if facts.role_of(p)}
            assert set(roles) == pinned and set(roles.values()) <= {"build", "key"}, (name, r.sdk, roles)


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (('role = "unread"\npackages = ["jax_neuronx"]', 'role = "unread"\npackages = ["jax_neuronx", "nrtpy"]'),
         "lines.vllm-neuron-native.reads: 'nrtpy' is both load and unread"),
        (('role = "key"', 'role = "maybe"'), "lines.vllm-neuron-native.reads.1.role: Input should be"),
        (('source = "lnl-cache"', 'source = "nowhere"'), "lines.vllm-neuron-native.reads: unknown source 'nowhere'"),
        (('packages = ["libtorch-neuronx-lite", "libneuronxla"]', 'packages = ["libtorch-neuronx-lyte"]'),
         "lines.vllm-neuron-native.reads: 'libtorch-neuronx-lyte' is in no release's packages"),
    ],
)  # fmt: skip
def test_a_bad_role_is_one_line_naming_the_file_and_the_field(tmp_path: Path, edit, message: str) -> None:
    folder = _table_copy(tmp_path)
    lines = folder / release_table.LINES_FILE
    text = lines.read_text()
    assert edit[0] in text
    lines.write_text(text.replace(edit[0], edit[1], 1))
    with pytest.raises(release_table.ReleaseTableError) as exc:
        release_table.load(folder)
    assert str(lines) in str(exc.value) and message in str(exc.value)
    assert "\n" not in str(exc.value)


# -- the command -------------------------------------------------------------------------------------
CATALOG = """models:
  - source: {model}
    config: {config}
    targets:
      - {{instance_type: trn2.3xlarge, tp_degree: 2, sequence_length: 64, dtype: bf16, profile: vllm-neuron-native}}
      - {{instance_type: inf2.xlarge, tp_degree: 2, sequence_length: 64, dtype: fp32, profile: vllm-neuron}}
"""


def test_recompile_dry_run_leads_with_the_summary_and_re_verifies_a_native_build(
    tmp_path: Path, tiny_llama_template: Path, monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    monkeypatch.setenv("NEURONFORGE_HOME", str(tmp_path / "home"))
    catalog = tmp_path / "models.yaml"
    catalog.write_text(CATALOG.format(model=tiny_llama_template, config=tiny_llama_template / "config.json"))
    (tmp_path / "store").mkdir()
    real = recompile.published_for

    def on_2_33_0(builds, pinned, spec):  # the farm index says: published on vllm-neuron-native@2.33.0
        mine = spec.profile_name == "vllm-neuron-native"
        return ["vllm-neuron-native@2.33.0"] if mine else real(builds, pinned, spec)

    monkeypatch.setattr(recompile, "published_for", on_2_33_0)
    args = ["recompile", str(catalog), "--sdk", "2.33.1", "--dry-run", "--store", str(tmp_path / "store")]
    main([*args, "--json"])
    data = json.loads(capsys.readouterr().out)
    assert list(data) == ["release", "dry_run", "summary", "targets"]
    assert data["summary"] == {
        "decisions": {"re-verify": 1, "rebuild": 1},
        "lines": {"vllm-neuron-native": {"re-verify": 1}, "vllm-neuron": {"rebuild": 1}},
    }
    first = data["targets"][0]["upgrade"]
    assert (first["decision"], first["base"]) == ("re-verify", "2.33.0")
    assert any(p.startswith("libtorch-neuronx-lite") for p in first["packages"])
    main(args)
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == (
        "Neuron SDK 2.33.1: 2 target(s): 1 re-verify, 1 rebuild; by line: vllm-neuron-native 1 re-verify; "
        "vllm-neuron 1 rebuild"
    )
    assert "[trn2] vllm-neuron-native@2.33.0: keeps its build on vllm-neuron-native@2.33.0: a library" in lines[1]
