"""`neuronforge catalog check`: line-numbered problems, the planner run on every target."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from neuronforge.farm.catalog import check_catalog, load_catalog
from neuronforge.interfaces.cli import main
from tests.hubdown import closed_endpoint, hub_at
from tests.test_planner import CONFIGS


def _write(tmp_path: Path, text: str) -> Path:
    shutil.copy(CONFIGS / "meta-llama--Llama-3.1-8B.json", tmp_path / "llama.json")
    path = tmp_path / "models.yaml"
    path.write_text(text)
    return path


def test_the_shipped_catalog_is_valid(capsys) -> None:
    assert main(["catalog", "check"]) == 0
    assert ": ok" in capsys.readouterr().out


def test_every_kind_of_problem_is_reported_with_its_line(tmp_path: Path, capsys) -> None:
    path = _write(
        tmp_path,
        """models:
  - source: meta-llama/Llama-3.1-8B
    config: llama.json
    owner: me
    targets:
      - {instance_type: inf2.xlarge, tp_degree: 2, sequence_length: 4096, dtype: bf16}
      - {instance_type: inf2.xlarge, tp_degree: 2, sequence_length: 4096, dtype: bf16}
      - {instance_type: inf2.xlarge, tp_degree: 3, sequence_length: 4096}
      - {instance_type: inf2.xlarge, tp_degree: 1, sequence_length: 8192, dtype: bf16}
      - {instance_type: inf2.xlarge, tp_degree: 2, sequence_length: 1024, flavour: spicy}
""",
    )
    report = check_catalog(path)
    assert not report.ok
    text = "\n".join(report.problems)
    assert "models.yaml:4: unknown field 'owner'" in text
    assert (
        "models.yaml:7: meta-llama/Llama-3.1-8B cpu-inf2.xlarge-tp2-b1-s4096-bf16: duplicate of the target at line 6"
        in text
    )
    assert (
        "models.yaml:8: meta-llama/Llama-3.1-8B cpu-inf2.xlarge-tp3-b1-s4096-bf16: the planner rejects it: tp=3" in text
    )
    assert "models.yaml:9: meta-llama/Llama-3.1-8B cpu-inf2.xlarge-tp1-b1-s8192-bf16: the planner rejects it" in text
    assert "models.yaml:10:" in text and "flavour" in text
    assert len(report.problems) == 5
    assert main(["catalog", "check", str(path), "--json"]) == 3
    out = json.loads(capsys.readouterr().out)
    assert out["ok"] is False and len(out["problems"]) == 5 and out["targets"] == 3


def test_structure_errors(tmp_path: Path) -> None:
    assert "a mapping with one key" in check_catalog(_write(tmp_path, "- source: x\n")).problems[0]
    assert "not valid YAML" in check_catalog(_write(tmp_path, "models: [\n")).problems[0]
    missing = check_catalog(_write(tmp_path, "models:\n  - targets: []\n")).problems
    assert missing == ["models.yaml:2: an entry needs `source:` (Hub id[@revision], s3:// prefix or folder)"]


def test_an_entry_without_a_config_offline_is_noted_not_planned(tmp_path: Path, monkeypatch, request, capsys) -> None:
    """An unreachable Hub: the entry is noted, counted as not planned, and the command does not say
    "ok" or exit 0 over it (exit 1, the count named); it answers at once, not after the Hub's retries."""
    import time

    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hf"))
    hub_at(closed_endpoint(), monkeypatch, request)
    path = _write(
        tmp_path,
        "models:\n  - source: some-org/unknown-model\n    targets:\n"
        "      - {instance_type: inf2.xlarge, tp_degree: 2, sequence_length: 1024}\n"
        "  - source: meta-llama/Llama-3.1-8B\n    config: llama.json\n    targets:\n"
        "      - {instance_type: inf2.xlarge, tp_degree: 2, sequence_length: 1024}\n",
    )
    started = time.monotonic()
    report = check_catalog(path)
    assert time.monotonic() - started < 5
    assert report.ok and report.unplanned == 1 and "1 target(s) not planned" in report.notes[0]
    assert "cannot reach the Hugging Face Hub" in report.notes[0]
    assert main(["catalog", "check", str(path)]) == 1
    out = capsys.readouterr().out
    assert out.rstrip().endswith("2 model(s), 2 target(s): 1 of 2 target(s) NOT PLANNED (see the notes)"), out
    assert ": ok" not in out


def test_the_built_in_model_is_planned(tmp_path: Path, capsys, monkeypatch) -> None:
    """`builtin:tiny-llama` is planned like any model (its config is generated here), so a target it
    cannot fit is a problem, and an unknown built-in name is one too."""
    monkeypatch.setenv("NEURONFORGE_HOME", str(tmp_path / "home"))
    path = _write(
        tmp_path,
        "models:\n  - source: builtin:tiny-llama\n    targets:\n"
        "      - {instance_type: inf2.xlarge, tp_degree: 1, sequence_length: 64, dtype: fp32, profile: cpu}\n"
        "      - {instance_type: inf2.xlarge, tp_degree: 1, sequence_length: 4096, dtype: fp32, profile: cpu}\n"
        "  - source: builtin:huge-llama\n    targets:\n"
        "      - {instance_type: inf2.xlarge, tp_degree: 1, sequence_length: 64, dtype: fp32, profile: cpu}\n",
    )
    report = check_catalog(path)
    assert not report.notes and report.unplanned == 0
    too_long, unknown = report.problems
    assert too_long.startswith("models.yaml:5: builtin:tiny-llama ") and "the planner rejects it" in too_long
    assert unknown.startswith("models.yaml:6:") and "unknown built-in model 'huge-llama'" in unknown
    assert main(["catalog", "check", str(path)]) == 3


def test_targets_name_a_profile_and_the_removed_fields_are_refused_with_the_fix(tmp_path: Path) -> None:
    path = _write(
        tmp_path,
        """models:
  - source: meta-llama/Llama-3.1-8B
    config: llama.json
    targets:
      - {instance_type: inf2.xlarge, tp_degree: 2, sequence_length: 4096, dtype: bf16, profile: vllm-neuron}
      - {instance_type: inf2.xlarge, tp_degree: 2, sequence_length: 4096, dtype: bf16,
         profile: optimum-neuron@2.26.1}
      - {instance_type: inf2.xlarge, tp_degree: 2, sequence_length: 2048, backend: nxdi}
      - {instance_type: inf2.xlarge, tp_degree: 2, sequence_length: 1024, profile: vllm-neuron,
         publish_formats: [optimum, lmi]}
      - {instance_type: inf2.xlarge, tp_degree: 2, sequence_length: 512, profile: triton-neuron}
""",
    )
    report = check_catalog(path)
    assert len(report.problems) == 3, report.problems
    backend, formats, unknown = report.problems
    assert backend.startswith("models.yaml:8: meta-llama/Llama-3.1-8B: `backend: nxdi` was replaced by `profile`")
    assert backend.endswith("write `profile: vllm-neuron`")
    assert formats.startswith("models.yaml:9: meta-llama/Llama-3.1-8B: `publish_formats` was removed")
    assert "the target's profile decides what is published" in formats
    assert unknown.startswith("models.yaml:11:") and "unknown profile 'triton-neuron'" in unknown
    # The targets keep the profile as written: a bare name follows the newest registered version.
    (entry,) = report.entries
    assert [t.spec.profile for t in entry.targets] == ["vllm-neuron", "optimum-neuron@2.26.1"]
    assert [t.line for t in entry.targets] == [5, 6]


def test_the_shipped_catalog_names_profiles() -> None:
    from neuronforge.farm.catalog import default_path, load_catalog

    report = load_catalog(default_path())
    profiles = {t.spec.profile for e in report.entries for t in e.targets}
    assert report.ok and "vllm-neuron" in profiles and "optimum-neuron@2.26.1" in profiles


def test_catalog_stale_never_says_nothing_is_stale_over_unchecked_targets(tmp_path: Path, capsys, monkeypatch) -> None:
    """A source that cannot be pinned (here a folder missing on this host) leaves its targets
    unresolved: the summary names them and the exit is 1, not "0 stale" and 0."""
    monkeypatch.setenv("NEURONFORGE_HOME", str(tmp_path / "home"))
    (tmp_path / "store").mkdir()
    path = _write(
        tmp_path,
        f"models:\n  - source: {tmp_path / 'gone'}\n    targets:\n"
        "      - {instance_type: inf2.xlarge, tp_degree: 1, sequence_length: 64, dtype: fp32, profile: cpu}\n"
        "      - {instance_type: inf2.xlarge, tp_degree: 1, sequence_length: 32, dtype: fp32, profile: cpu}\n",
    )
    assert main(["catalog", "stale", str(path), "--store", str(tmp_path / "store")]) == 1
    last = capsys.readouterr().out.rstrip().splitlines()[-1]
    assert last.startswith("0 stale of 2 catalog target(s) in ")
    assert last.endswith("; 2 NOT CHECKED: 2 unresolved (the source could not be pinned: Hub or store "
                         "unreachable, folder missing)"), last  # fmt: skip
    assert main(["catalog", "stale", str(path), "--store", str(tmp_path / "store"), "--json"]) == 1
    assert [s["status"] for s in json.loads(capsys.readouterr().out)] == ["unresolved", "unresolved"]


def test_the_guide_families_are_planned(tmp_path: Path) -> None:
    """A catalog of the transformers-neuronx guide's models (their real configs) for lmi-neuronx: each
    planned, the guide's heads rule enforced (opt-30b's 56 heads at tp=32)."""
    lines = ["models:"]
    rows = [
        ("facebook--opt-30b", "facebook/opt-30b", "trn1.32xlarge", [8, 32], 2048),
        ("openai-community--gpt2-xl", "openai-community/gpt2-xl", "inf2.xlarge", [1], 1024),
        ("EleutherAI--gpt-j-6b", "EleutherAI/gpt-j-6b", "inf2.xlarge", [2], 2048),
        ("bigscience--bloom-7b1", "bigscience/bloom-7b1", "inf2.xlarge", [2], 8192),
    ]
    for file, source, instance, tps, seq in rows:
        shutil.copy(CONFIGS / f"{file}.json", tmp_path / f"{file}.json")
        lines += [f"  - source: {source}", f"    config: {file}.json", "    targets:"]
        lines += [
            f"      - {{instance_type: {instance}, tp_degree: {tp}, sequence_length: {seq}, dtype: fp16, "
            "profile: lmi-neuronx}"
            for tp in tps
        ]
    path = tmp_path / "models.yaml"
    path.write_text("\n".join(lines) + "\n")
    report = check_catalog(path)
    assert len(report.problems) == 1, report.problems
    assert (
        "facebook/opt-30b" in report.problems[0]
        and "56 attention heads are not divisible by tp=32; use tp=8" in (report.problems[0])
    )


def test_a_misspelt_key_gets_the_field_it_means(tmp_path: Path) -> None:
    """In an entry and inside a target (`common.spelling`, the rule of every place that refuses a key)."""
    path = _write(
        tmp_path,
        """models:
  - source: meta-llama/Llama-3.1-8B
    config: llama.json
    target:
      - {instance_type: inf2.xlarge, tp_degree: 2, sequence_length: 4096}
  - source: meta-llama/Llama-3.1-8B
    config: llama.json
    targets:
      - {instnace_type: inf2.xlarge, instance_type: inf2.xlarge, tp_degree: 2, sequence_length: 4096}
""",
    )
    text = "\n".join(check_catalog(path).problems)
    assert "models.yaml:4: unknown field 'target' (did you mean 'targets'?)" in text, text
    assert (
        "models.yaml:9: meta-llama/Llama-3.1-8B: target.instnace_type: unknown field (did you mean 'instance_type'?)"
        in text
    ), text


HOSTILE_CATALOGS = {
    "not UTF-8": (b"models:\n  - source: caf\xe9\n", 2, "is not UTF-8 text (byte 23); save it as UTF-8"),
    "config not text": (
        b"models:\n  - source: builtin:tiny-llama\n    config: [1]\n    targets: [{profile: cpu}]\n",
        3,
        "models.yaml:3: config: the path of a config.json file (text)",
    ),
    "compilers not a list": (
        b"models:\n  - source: builtin:tiny-llama\n    pin: {compilers: 5}\n    targets: [{profile: cpu}]\n",
        3,
        "models.yaml:3: pin.compilers: a list of compiler versions",
    ),
    "a key twice": (
        b"models:\n  - source: builtin:tiny-llama\n    targets:\n      - {profile: cpu, tp_degree: 1, tp_degree: 2}\n",
        3,
        "models.yaml:4: 'tp_degree' is given twice in one mapping",
    ),
    "source twice": (
        b"models:\n  - source: a/b\n    source: builtin:tiny-llama\n    targets: [{profile: cpu}]\n",
        3,
        "models.yaml:3: 'source' is given twice in one mapping",
    ),
    "an alias bomb": (
        (
            "models:\n  - source: builtin:tiny-llama\n    pin:\n      compilers: &a9 [&a8 [&a7 [&a6 [&a5 [&a4 [&a3 "
            "[&a2 [&a1 [x, x, x, x, x, x, x, x, x, x]]]]]]]]]\n    targets: [{profile: cpu}]\n"
            "  - source: x/y\n    pin: {compilers: [" + ", ".join(["*a9"] * 10) + "]}\n    targets: [{profile: cpu}]\n"
        ).encode(),
        3,
        "pin.compilers: a list of compiler versions",
    ),
    "config is a device": (
        b"models:\n  - source: builtin:tiny-llama\n    config: /dev/zero\n    targets: [{profile: cpu}]\n",
        3,
        "config /dev/zero is larger than 16 MiB; it is not one",
    ),
}


@pytest.mark.parametrize("name", HOSTILE_CATALOGS)
def test_a_hand_written_catalog_that_is_wrong_is_one_line_never_a_traceback(tmp_path: Path, capsys, name) -> None:
    """Strict UTF-8, typed fields, duplicate keys refused, aliases bounded, `config:` read under a cap:
    each hand-written mistake is its line and its fix (issue 54), for `catalog check` as for every reader."""
    raw, code, said = HOSTILE_CATALOGS[name]
    path = tmp_path / "models.yaml"
    path.write_bytes(raw)
    assert main(["catalog", "check", str(path)]) == code
    captured = capsys.readouterr()
    out = captured.out + captured.err
    assert said in out and "Traceback" not in out, out


def test_aliases_for_shared_targets_still_read(tmp_path: Path) -> None:
    path = _write(
        tmp_path,
        """models:
  - source: builtin:tiny-llama
    targets:
      - &base {profile: cpu, instance_type: inf2.xlarge, tp_degree: 1, sequence_length: 64}
      - {<<: *base, sequence_length: 128}
""",
    )
    report = load_catalog(path)
    assert report.ok, report.problems
    assert [t.spec.sequence_length for t in report.entries[0].targets] == [64, 128]
