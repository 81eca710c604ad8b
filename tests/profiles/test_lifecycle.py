"""Each serving line's lifecycle per instance family (derived from the release table), as the
planner, `neuronforge profiles` and the pages read it.

The reconciled facts asserted here, with their sources (the data cites each):
- NxD Inference 2.29.0 release notes: NxD Inference serves only Trn2 and newer; Inf2/Trn1 pin 2.28;
- the maintenance announcements: maintenance from 2.30, 0.10.18399 (SDK 2.31) the last release;
- What's New 2.32.0: NxD Inference out of the DLCs;
- announce-eos-nxdi-nxd-core-inference (2026-10-16): end of support on Trn2/Trn3 from 2.34.
"""

from __future__ import annotations

import json

import pytest

from neuronforge.interfaces import lifecycle_table
from neuronforge.interfaces.cli import main
from neuronforge.profiles import registry
from neuronforge.profiles.lifecycle import Status, release_key
from neuronforge.profiles.line_lifecycles import VLLM_NEURON, VLLM_NEURON_NATIVE
from neuronforge.profiles.sdk_releases import announced, known_release, latest_release


def run_cli(*argv: str) -> int:
    return main(list(argv))


@pytest.mark.parametrize(
    ("family", "release", "status"),
    [
        ("inf2", "2.26.1", Status.ACTIVE),
        ("inf2", "2.28.0", Status.ACTIVE),
        ("inf2", "2.29", Status.FROZEN),
        ("trn1n", "2.33.0", Status.FROZEN),
        ("trn2", "2.29.1", Status.ACTIVE),
        ("trn2", "2.30.0", Status.MAINTENANCE),
        ("trn2", "2.31.1", Status.MAINTENANCE),
        ("trn2", "2.32.0", Status.FROZEN),
        ("trn2", "2.34", Status.END_OF_SUPPORT),
        ("trn3", "2.26.1", Status.NOT_SERVED),  # NxD Inference added Trn3 in 2.27.0
        ("trn3", "2.27.0", Status.ACTIVE),
    ],
)
def test_the_nxdi_line_per_family_as_reconciled(family: str, release: str, status: Status) -> None:
    assert VLLM_NEURON.status(family, release) is status


def test_last_releases_and_where_each_family_moves() -> None:
    inf2, trn2 = VLLM_NEURON.of("inf2"), VLLM_NEURON.of("trn2")
    assert inf2 is not None and trn2 is not None
    assert (inf2.last_release, inf2.moves_to) == ("2.28", None)
    assert (trn2.last_release, trn2.moves_to) == ("2.31", "vllm-neuron-native")
    assert inf2.serves("2.28.1") and not inf2.serves("2.29.0")
    assert trn2.serves("2.31.1") and not trn2.serves("2.32.0")
    assert VLLM_NEURON_NATIVE.status("inf2", "2.33.0") is Status.NOT_SERVED
    assert VLLM_NEURON_NATIVE.status("trn2", "2.33.0") is Status.ACTIVE


def test_every_neuron_line_declares_its_lifecycle_and_every_statement_cites_a_page() -> None:
    lines = registry.lifecycles()
    neuron_lines = {p.name for p in registry.all_profiles() if p.neuron}
    assert set(lines) == neuron_lines
    for lc in lines.values():
        for fam in lc.families:
            assert fam.phases, (lc.line, fam.families)
            for p in fam.phases:
                assert p.source.url.startswith("https://") and p.source.title, (lc.line, p)
                assert known_release(p.since) or announced(p.since) or release_key(p.since) < release_key("2.34")
            if fam.moves_to:
                assert fam.moves_to in lines, fam.moves_to
        # every registered version of the line is among its releases (the table marks them)
        shipped = {r.sdk for r in lc.releases}
        assert {p.version for p in registry.versions_of(lc.line)} <= shipped, lc.line


def test_release_names_and_the_announced_release() -> None:
    assert release_key("2.31") == release_key("2.31.0") < release_key("2.31.1")
    assert known_release("2.31").version == "2.31.1"  # a series names its newest patch
    assert known_release("2.34") is None and known_release("2.34.0") is None
    soon = announced("2.34.0")
    assert soon is not None and not soon.released
    assert any("neuron-ls" in n for n in soon.notes) and any("NxD Inference" in n for n in soon.notes)
    assert latest_release().version == "2.33.1"  # a patch release: known, though no profile pins it
    assert known_release("2.33").version == "2.33.1" and known_release("2.33.1").neuronx_cc == "2.28.7631.0"


@pytest.mark.parametrize(
    ("ref", "family", "says", "silent"),
    [
        ("vllm-neuron@2.26.1", "inf2", ["frozen for inf2 from SDK 2.29", "SDK 2.28", "keep it pinned"], False),
        (
            "vllm-neuron@2.26.1",
            "trn2",
            ["frozen for trn2 from SDK 2.32", "announced for SDK 2.34", "vllm-neuron-native@"],
            False,
        ),
        ("optimum-neuron", "trn2", ["announced for SDK 2.34", "ModelBuilder", "vllm-neuron-native@"], False),
        ("lmi-neuronx", "inf2", ["end-of-support for inf2 from SDK 2.26", "move to profile vllm-neuron@"], False),
        ("optimum-neuron", "inf2", [], True),
        ("vllm-neuron-native", "trn2", [], True),
    ],
)
def test_the_planner_warning_names_the_release_and_the_line_to_move_to(
    ref: str, family: str, says: list[str], silent: bool
) -> None:
    warning = registry.lifecycle_warning(registry.get_profile(ref), family)
    if silent:
        assert warning is None
        return
    assert warning is not None
    for words in says:
        assert words in warning, warning
    assert "https://" in warning  # the statement's source


def test_plan_prints_the_warning_and_still_passes(capsys) -> None:
    code = run_cli(
        "plan", "--model", "tests/data/model-configs/meta-llama--Llama-3.1-8B.json", "--instance", "trn2.48xlarge",
        "--tp", "8", "--seq-len", "4096", "--profile", "vllm-neuron@2.26.1",
    )  # fmt: skip
    out = capsys.readouterr().out
    assert code == 0
    assert "[warn] lifecycle: vllm-neuron is frozen for trn2 from SDK 2.32" in out


def test_the_pages_carry_the_table_the_data_renders() -> None:
    assert lifecycle_table.stale_pages() == [], "run `python -m neuronforge.interfaces.lifecycle_table`"
    readme = lifecycle_table.markdown(details=False)
    assert "| `vllm-neuron` | inf2 | - | active | active | active (last) | frozen |" in readme
    assert "| `vllm-neuron` | trn2 |" in readme and "maint. (last) | frozen | frozen | EOS |" in readme
    assert "Sources:" not in readme and "Sources:" in lifecycle_table.markdown(details=True)


def test_profiles_prints_each_line_with_its_sources(capsys) -> None:
    assert run_cli("profiles") == 0
    out = capsys.readouterr().out
    assert "Lifecycle by instance family" in out
    assert "vllm-neuron: vLLM on NxD Inference" in out
    assert "inf2: active from 2.26 [1]; frozen from 2.29 [2]" in out
    assert "announce-eos-nxdi-nxd-core-inference.html" in out
    assert run_cli("profiles", "--json") == 0
    data = json.loads(capsys.readouterr().out)
    nxdi = next(lc for lc in data["lifecycles"] if lc["line"] == "vllm-neuron")
    trn2 = next(f for f in nxdi["families"] if f["families"] == ["trn2"])
    assert trn2["last_release"] == "2.31" and trn2["moves_to"] == "vllm-neuron-native"
    assert trn2["status"]["2.32"] == "frozen" and trn2["status"]["2.34"] == "EOS"
    assert {r["sdk"] for r in nxdi["releases"] if r["registered"]} >= {"2.26.1"}
