"""The compile DAG's form without JSON: its own fields describe one target (defaults: the embedded
default target), `targets` adds more; a conf that gives only `targets` (REST, the recompile DAG)
builds just those. The cluster policy sizes pool slots from the same list."""

from __future__ import annotations

from neuronforge.common import settings
from neuronforge_airflow.params import FORM_TARGET_FIELDS, PARAMS, conf_targets, requested_targets
from neuronforge_airflow.policies.routing import pool_slots_for

EXTRA = {"instance_type": "trn1.32xlarge", "tp_degree": 8, "sequence_length": 2048}


def test_the_form_fields_alone_are_the_default_target() -> None:
    assert conf_targets({}) == [{k: v for k, v in settings.DEFAULT_TARGET.items()}]
    assert all(PARAMS[k].schema.get("title") for k in FORM_TARGET_FIELDS)  # every field labelled
    assert PARAMS["instance_type"].schema["enum"] and PARAMS["quantization"].schema["enum"]  # dropdowns


def test_fields_and_more_targets() -> None:
    conf = {"tp_degree": 2, "sequence_length": 128, "targets": [EXTRA]}
    first, second = conf_targets(conf)
    assert first["tp_degree"] == 2 and first["sequence_length"] == 128 and first["instance_type"] == "inf2.xlarge"
    assert second == EXTRA


def test_targets_with_the_form_left_at_its_defaults_build_just_those() -> None:
    """`dag.test` and the UI send every field: a form target left at its defaults is not built."""
    defaults = {k: p.value for k, p in FORM_TARGET_FIELDS.items()}
    assert conf_targets({**defaults, "targets": [EXTRA]}) == [EXTRA]


def test_targets_alone_build_just_those() -> None:
    assert conf_targets({"targets": [EXTRA]}) == [EXTRA]
    params = {k: p.value for k, p in FORM_TARGET_FIELDS.items()} | {"targets": [EXTRA]}
    assert requested_targets(params, {"targets": [EXTRA]}) == [EXTRA]


def test_an_emptied_max_context_length_is_left_to_the_sequence_length() -> None:
    (target,) = conf_targets({"max_context_length": None})
    assert "max_context_length" not in target


def test_pool_slots_follow_the_form_target() -> None:
    assert pool_slots_for("neuron_2_26_1_target.smoke", 0, {"profile": "vllm-neuron@2.26.1", "tp_degree": 2}) == 2
