"""Malformed model configs, as a careless or hostile `config.json` has them: fractions, booleans,
strings, zero or negative dimensions, NaN/infinity (`1e999` in JSON), absurd sizes. `plan` refuses
each with one line naming the field, the value and the fix (exit 3), never a traceback from the
planner's arithmetic; `fetch` rejects the checkpoint (exit 3) and leaves the store as it was."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.reliability.harness import cli, expect_error, snapshot

EXIT_USAGE, EXIT_REJECTED = 2, 3
PLAN = ["--instance", "inf2.xlarge", "--tp", "1", "--seq-len", "64"]
RAW = "__raw_json_value__"


def edit_config(folder: Path, field: str, raw: str | None) -> None:
    """Set `field` to the JSON text `raw` verbatim (so that `1e999` and `NaN` reach the parser as
    written); None removes the field."""
    config = json.loads((folder / "config.json").read_text())
    if raw is None:
        config.pop(field)
        text = json.dumps(config)
    else:
        config[field] = RAW
        text = json.dumps(config).replace(json.dumps(RAW), raw)
    (folder / "config.json").write_text(text)


# name -> (field, raw JSON value, words the message must hold)
CASES: dict[str, tuple[str, str | None, list[str]]] = {
    "fractional hidden size": ("hidden_size", "64.5", ["hidden_size must be a whole number", "64.5"]),
    "boolean hidden size": ("hidden_size", "true", ["hidden_size must be a whole number", "True"]),
    "string hidden size": ("hidden_size", '"64"', ["hidden_size must be a whole number", "'64'"]),
    "zero hidden size": ("hidden_size", "0", ["hidden_size = 0 is out of range", "between 1 and 2147483648"]),
    "negative layers": ("num_hidden_layers", "-2", ["num_hidden_layers = -2 is out of range"]),
    "infinite hidden size (1e999)": ("hidden_size", "1e999", ["hidden_size must be a whole number", "inf"]),
    "NaN heads": ("num_attention_heads", "NaN", ["num_attention_heads must be a whole number", "nan"]),
    "1e308 vocabulary": ("vocab_size", "1e308", ["vocab_size = 1e+308 is out of range", "2147483648"]),
    "10**30 intermediate size": ("intermediate_size", str(10**30), ["intermediate_size", "is out of range"]),
    "absurd layer count": ("num_hidden_layers", "20000", ["num_hidden_layers = 20000", "between 1 and 10000"]),
    "zero heads": ("num_attention_heads", "0", ["num_attention_heads = 0 is out of range"]),
    "negative head dim": ("head_dim", "-16", ["head_dim = -16 is out of range"]),
    "kv heads not dividing heads": ("num_key_value_heads", "3", ["not a multiple of num_key_value_heads 3"]),
    "too many experts": ("num_local_experts", "100000", ["num_local_experts = 100000", "between 0 and 4096"]),
    "string boolean": ("tie_word_embeddings", '"yes"', ["tie_word_embeddings must be true or false", "'yes'"]),
    "list model type": ("model_type", '["llama"]', ["model_type ['llama']", "is not an architecture"]),
    "string architectures": ("architectures", '"LlamaForCausalLM"', ["architectures must be a list"]),
    # already held before: kept holding
    "missing hidden size": ("hidden_size", None, ["required field 'hidden_size' is missing"]),
    "unknown architecture": ("model_type", '"bert"', ["model_type 'bert'", "supported model types"]),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_plan_refuses_a_malformed_config_in_one_line(case: str, tiny_llama: Path) -> None:
    field, raw, words = CASES[case]
    edit_config(tiny_llama, field, raw)
    before = snapshot(tiny_llama)
    outcome = cli(["plan", "--model", tiny_llama, *PLAN])
    expect_error(outcome, EXIT_REJECTED, str(tiny_llama), *words)
    assert len(outcome.err.strip().splitlines()) == 1, outcome.err
    assert snapshot(tiny_llama) == before


FETCH_CASES = [
    "fractional hidden size",
    "infinite hidden size (1e999)",
    "10**30 intermediate size",
    "zero heads",
    "string boolean",
    "missing hidden size",
]


@pytest.mark.parametrize("case", FETCH_CASES)
def test_fetch_rejects_a_malformed_config_and_leaves_the_store_alone(
    case: str, tiny_llama: Path, tmp_path: Path
) -> None:
    field, raw, words = CASES[case]
    edit_config(tiny_llama, field, raw)
    store = tmp_path / "store"
    before = snapshot(store)
    outcome = cli(["fetch", tiny_llama, "--store", f"file://{store}", "--work-dir", tmp_path / "work"])
    expect_error(outcome, EXIT_REJECTED, "checkpoint rejected", *words)
    assert snapshot(store) == before


def test_a_config_that_is_not_json_is_refused(tiny_llama: Path, tmp_path: Path) -> None:
    (tiny_llama / "config.json").write_text('{"model_type": "llama", "hidden_size": 64,')
    expect_error(cli(["plan", "--model", tiny_llama, *PLAN]), EXIT_USAGE, "is not valid JSON")
    store = tmp_path / "store"
    outcome = cli(["fetch", tiny_llama, "--store", f"file://{store}", "--work-dir", tmp_path / "work"])
    expect_error(outcome, EXIT_REJECTED, "is not valid JSON")
    assert snapshot(store) == {}


def test_integral_floats_are_accepted(tiny_llama: Path) -> None:
    """`2.0` layers is what some exporters write: the same model as `2`."""
    edit_config(tiny_llama, "num_hidden_layers", "2.0")
    edit_config(tiny_llama, "hidden_size", "64.0")
    outcome = cli(["plan", "--model", tiny_llama, *PLAN, "--json"])
    assert outcome.traceback is None and outcome.code == 0, outcome.text
    assert json.loads(outcome.out)["fits"] is True


def test_the_largest_accepted_config_plans_without_overflow(tmp_path: Path) -> None:
    """Every dimension at its upper bound: the planner's arithmetic stays exact and quick, and the
    answer is a plain "does not fit"."""
    big = 2**31
    config = {
        "model_type": "mixtral",
        "architectures": ["MixtralForCausalLM"],
        "hidden_size": big,
        "intermediate_size": big,
        "num_attention_heads": big,
        "num_key_value_heads": big,
        "head_dim": big,
        "num_hidden_layers": 10_000,
        "num_local_experts": 4096,
        "vocab_size": big,
        "max_position_embeddings": big,
    }
    (tmp_path / "config.json").write_text(json.dumps(config))
    outcome = cli(["plan", "--model", tmp_path / "config.json", *PLAN, "--suggest"])
    assert outcome.traceback is None, outcome.traceback
    assert outcome.code == EXIT_REJECTED and "does not fit" in outcome.out, outcome.text
