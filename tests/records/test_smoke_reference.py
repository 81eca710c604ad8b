"""The smoke test's reference (`records.smoke_reference`, `smoke/expected.json` in the payload)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from neuronforge.records.base import RecordError, RecordTooNew
from neuronforge.records.smoke_reference import SmokeReference

WRITTEN = {  # in the order `write_expected` has always written it
    "schema_version": 1,
    "reference": "transformers 4.57.6 eager on the CPU, bf16, greedy",
    "prompts": ["Hello, my name is"],
    "prompt_ids": [[1, 2, 3]],
    "max_new_tokens": 4,
    "tokens": [[5, 6, 7, 8]],
    "unquantized_tokens": None,
}


def test_the_reference_round_trips_in_its_key_order() -> None:
    ref = SmokeReference.from_json(WRITTEN, "smoke/expected.json")
    assert (ref.prompt_ids, ref.max_new_tokens, ref.tokens) == ([[1, 2, 3]], 4, [[5, 6, 7, 8]])
    assert json.dumps(ref.to_json(), indent=2) == json.dumps(WRITTEN, indent=2)  # the payload's bytes


def test_a_newer_reference_is_refused() -> None:
    with pytest.raises(RecordTooNew, match=r"^smoke/expected\.json: smoke reference has schema 2"):
        SmokeReference.from_json({**WRITTEN, "schema_version": 2}, "smoke/expected.json")


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"max_new_tokens": "4"}, "max_new_tokens"),
        ({"prompt_ids": [["1"]]}, "prompt_ids.0.0"),
        ({"tokens": None}, "tokens"),
    ],
)
def test_wrong_types_name_the_field(changes: dict, field: str) -> None:
    with pytest.raises(RecordError, match=rf"^smoke/expected\.json: not a valid smoke reference: {field}: "):
        SmokeReference.from_json({**WRITTEN, **changes}, "smoke/expected.json")


def test_a_payload_with_an_unreadable_reference_fails_its_smoke_test_in_one_line(tmp_path: Path) -> None:
    from types import SimpleNamespace

    from neuronforge.pipeline.stages.smoke import EXPECTED, SmokeInput, smoke_test

    (tmp_path / EXPECTED).parent.mkdir(parents=True)
    (tmp_path / EXPECTED).write_text(json.dumps({**WRITTEN, "tokens": "none"}))
    result = smoke_test(SmokeInput(tmp_path, SimpleNamespace(model_dir="."), "cpu", cache=None))
    assert not result.passed and "\n" not in result.reason
    assert result.reason.startswith(f"the payload has no readable {EXPECTED}") and "tokens" in result.reason
