"""The DAG's trigger form, as a hostile or careless user fills it: every bad conf is refused by the
form's validation (`validate_conf`, the cluster policy's check, and `expand_targets`, the run's first
task) with a message naming the field and the value, before any lease, download or compile — so the
store is never touched. (The REST path answering 400 is tested in tests/dags/test_params.py.)"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from neuronforge.common.errors import InvalidInput
from neuronforge_airflow.operators.compile_publish import expand_targets  # the run's first task (`.function`: its body)
from neuronforge_airflow.params import validate_conf
from tests.reliability.harness import snapshot

SECRET = "wJalrXUtnFEMI-K7MDENG-bPxRfiCYEXAMPLEKEY"
GOOD = {"instance_type": "inf2.xlarge", "tp_degree": 2, "sequence_length": 64}


def params(store_dir: Path, **changes: Any) -> dict[str, Any]:
    base = {"model": None, "targets": [GOOD], "profile": "cpu", "store": f"file://{store_dir}", "prompts": []}
    return {**base, "max_new_tokens": 8, **changes}


CASES: dict[str, tuple[dict[str, Any], list[str]]] = {
    "zero tp": ({"targets": [{**GOOD, "tp_degree": 0}]}, ["target.tp_degree", "greater than or equal to 1"]),
    "text tp": ({"targets": [{**GOOD, "tp_degree": "two"}]}, ["target.tp_degree", "'two'"]),
    "unknown instance": ({"targets": [{**GOOD, "instance_type": "inf9.huge"}]}, ["unknown instance type 'inf9.huge'"]),
    "unknown field": ({"targets": [{**GOOD, "colour": "red"}]}, ["target.colour", "unknown field; the fields are"]),
    "misspelt field": ({"targets": [{**GOOD, "tp_degre": 2}]}, ["target.tp_degre", "(did you mean 'tp_degree'?)"]),
    "legacy backend": (
        {"targets": [{**GOOD, "backend": "nxdi"}]},
        ["`backend` was replaced by `profile`", "vllm-neuron"],
    ),
    "unknown profile": ({"profile": "tensorrt"}, ["unknown profile 'tensorrt'", "known profiles: cpu"]),
    "refused stack": ({"profile": "tgi-neuron"}, ["profile 'tgi-neuron' is not supported", "optimum-neuron"]),
    "buckets out of order": (
        {"targets": [{**GOOD, "context_encoding_buckets": [64, 32]}]},
        ["strictly increasing", "[64, 32]"],
    ),
    "bucket beyond the sequence": (
        {"targets": [{**GOOD, "token_generation_buckets": [32, 128]}]},
        ["token_generation_buckets has 128 > sequence_length=64"],
    ),
    "prompt longer than the sequence": (
        {"targets": [{**GOOD, "max_context_length": 128}]},
        ["max_context_length=128 exceeds sequence_length=64"],
    ),
    "lnc the instance lacks": (
        {"targets": [{**GOOD, "logical_nc_config": 2}]},
        ["logical_nc_config=2 is not available on inf2.xlarge"],
    ),
    "unknown quantization": ({"targets": [{**GOOD, "quantization": "int4"}]}, ["unknown dtype 'int4'"]),
    "modules without quantization": (
        {"targets": [{**GOOD, "modules_to_not_convert": ["lm_head"]}]},
        ["modules_to_not_convert given without a quantization dtype"],
    ),
    "module path that is not one": (
        {"targets": [{**GOOD, "quantization": "int8", "modules_to_not_convert": ["../etc"]}]},
        ["are not module names"],
    ),
    "absurd sequence length": ({"targets": [{**GOOD, "sequence_length": 10**12}]}, ["target.sequence_length"]),
    # the smoke-test limits, as given (0 is not "the default")
    "no tokens to generate": ({"max_new_tokens": 0}, ["max_new_tokens=0 is out of range"]),
    "tokens as text": ({"max_new_tokens": "many"}, ["max_new_tokens"]),
    # secrets in URIs: refused with the credentials masked (the test below checks they are not repeated)
    "credentials in the store": ({"store": f"s3://AKIAEXAMPLE:{SECRET}@bucket/store"}, ["carries credentials", "***"]),
    "credentials in the model": ({"model": f"s3://AKIAEXAMPLE:{SECRET}@bucket/model"}, ["carries credentials"]),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_bad_target_is_refused_by_the_form_before_any_work(case: str, tmp_path: Path) -> None:
    changes, words = CASES[case]
    store = tmp_path / "store"
    before = snapshot(store)
    with pytest.raises(InvalidInput) as err:
        expand_targets.function(params(store, **changes))
    for word in words:
        assert word in str(err.value), (word, str(err.value))
    assert "Traceback" not in str(err.value) and SECRET not in str(err.value)
    assert snapshot(store) == before  # nothing written: refused before any lease or download


def test_an_unknown_conf_key_is_named_with_the_allowed_ones() -> None:
    with pytest.raises(InvalidInput) as err:
        validate_conf({"targts": [GOOD]})
    assert "'targts' (did you mean 'targets'?)" in str(err.value)
