"""One declaration of a target (`TargetSpec`), every surface generated from it: the trigger form's
fields, the JSON schema of a target (the REST conf check, the form's `targets`), the CLI's flags.

Around and across each field's bounds, every surface accepts exactly the values `TargetSpec` accepts;
each surface's fields are `TargetSpec`'s declared inputs, and a field added to the declaration shows up
in every surface (adding a field is one edit)."""

from __future__ import annotations

import argparse
import copy
from typing import Annotated, Any

import hypothesis.strategies as st
import pytest
from hypothesis import given, settings
from jsonschema import Draft202012Validator
from pydantic import Field

from neuronforge.common import settings as nf_settings
from neuronforge.common.errors import InvalidInput
from neuronforge.interfaces.cli import options as cli_options
from neuronforge.spec.target import Declared, TargetSpec, spoken, target_inputs, target_json_schema
from neuronforge_airflow.params import (
    COMPILE_DAG,
    FORM_TARGET_FIELDS,
    PARAMS,
    SWEEP_PARAMS,
    TARGET_SCHEMA,
    conf_problem,
    form_target_fields,
)

# A target whose cross-field rules leave every single field free within its own bounds: an instance with
# both logical-core configs, the longest sequence (a prompt or a bucket may be as long as it allows).
BASE = {"instance_type": "trn2.48xlarge", "tp_degree": 1, "sequence_length": 1_048_576}


def _bounded() -> dict[str, tuple[int, int | None]]:
    """Each integer input with declared bounds: (minimum, maximum or None)."""
    return {
        name: (inp.schema["minimum"], inp.schema.get("maximum"))
        for name, inp in target_inputs().items()
        if "minimum" in inp.schema
    }


def _near(lo: int, hi: int | None) -> st.SearchStrategy[int]:
    """Values around and across the bounds, and anywhere between (and beyond) them. A field bounded only
    below (`max_context_length`) is drawn up to BASE's sequence length: above it the rule across fields
    (at most the sequence length) refuses it, which no per-field schema can say."""
    if hi is None:
        return st.one_of(st.integers(lo - 3, lo + 3), st.integers(-(2**31), BASE["sequence_length"]))
    return st.one_of(st.integers(lo - 3, lo + 3), st.integers(hi - 3, hi + 3), st.integers(-(2**31), 2**31))


def _spec_accepts(values: dict[str, Any]) -> bool:
    try:
        TargetSpec.parse(values)
    except InvalidInput:
        return False
    return True


def _schema_accepts(values: dict[str, Any]) -> bool:
    return Draft202012Validator(TARGET_SCHEMA).is_valid(values)


def _argv(values: dict[str, Any]) -> list[str]:
    argv = []
    for name, value in values.items():
        flag = target_inputs()[name].declared.flag
        argv += [flag, *(map(str, value) if isinstance(value, list) else [str(value)])]
    return argv


def _cli_accepts(values: dict[str, Any]) -> bool:
    parser = argparse.ArgumentParser(exit_on_error=False)
    cli_options.add_target_args(parser)
    args = parser.parse_args(_argv(values))
    try:
        cli_options.target_from_args(args)
    except InvalidInput:
        return False
    return True


def _form_accepts(name: str, value: Any) -> bool | None:
    """The compile form's own field, as Airflow checks a trigger's value, and the REST conf check's
    sentence (`conf_problem`) agreeing with it; None when the input is not one of the form's fields."""
    if name not in FORM_TARGET_FIELDS:
        return None
    try:
        copy.deepcopy(PARAMS[name]).resolve(value)  # resolve() keeps the value: not on the form's own Param
        accepted = True
    except (ValueError, TypeError):
        accepted = False
    assert (conf_problem(COMPILE_DAG, {name: value}) is None) == accepted, (name, value)
    return accepted


@pytest.mark.parametrize("name", sorted(_bounded()))
def test_every_surface_accepts_the_same_values_around_each_bound(name: str) -> None:
    lo, hi = _bounded()[name]

    @settings(max_examples=60, deadline=None, derandomize=True)
    @given(_near(lo, hi))
    def check(value: int) -> None:
        values = {**BASE, name: value}
        expected = lo <= value and (hi is None or value <= hi)
        assert _spec_accepts(values) == expected, (name, value)
        assert _schema_accepts(values) == expected, (name, value)
        assert _cli_accepts(values) == expected, (name, value)
        assert _form_accepts(name, value) in (None, expected), (name, value)

    check()


def test_the_sequence_length_has_one_minimum_everywhere() -> None:
    """The bound that had drifted (ge=1 in TargetSpec, 8 in the form and the schema): one rule."""
    for value, accepted in ((7, False), (8, True)):
        values = {**BASE, "sequence_length": value}
        assert _spec_accepts(values) is _schema_accepts(values) is _cli_accepts(values) is accepted
        assert _form_accepts("sequence_length", value) is accepted


@settings(max_examples=40, deadline=None, derandomize=True)
@given(st.one_of(st.integers(-3, 6), st.none()))
def test_the_logical_core_config_choices_agree(value: int | None) -> None:
    values = {**BASE, "logical_nc_config": value}
    expected = value in (None, 1, 2)
    assert _spec_accepts(values) == _schema_accepts(values) == expected
    if value is not None:
        assert _cli_accepts(values) == expected


@settings(max_examples=40, deadline=None, derandomize=True)
@given(st.lists(st.integers(-2, 4), min_size=1, max_size=3).map(lambda xs: sorted(set(xs))))
def test_bucket_items_have_the_same_minimum(buckets: list[int]) -> None:
    values = {**BASE, "context_encoding_buckets": buckets}
    assert _spec_accepts(values) == _schema_accepts(values) == (min(buckets) >= 1)


@pytest.mark.parametrize(("param", "field"), [("instance", "instance_type"), ("dtype", "dtype")])
def test_the_sweep_form_takes_an_instance_and_a_dtype_as_a_target_does(param: str, field: str) -> None:
    """The sweep's one instance and one dtype: the values its form accepts are the target's, no list of its own."""
    accepted = TARGET_SCHEMA["properties"][field]["enum"]
    for value in [*accepted, "inf9.xlarge", "fp8", ""]:
        try:
            copy.deepcopy(SWEEP_PARAMS[param]).resolve(value)
            form = True
        except (ValueError, TypeError):
            form = False
        assert form == _spec_accepts({**BASE, "instance_type": "inf2.48xlarge", field: value}), (param, value)
    assert SWEEP_PARAMS[param].schema["title"] == target_inputs()[field].declared.title


def test_each_surface_has_exactly_the_declared_inputs() -> None:
    inputs = target_inputs()
    assert set(inputs) == set(TargetSpec.model_fields) | set(TargetSpec.INPUTS)
    assert set(TARGET_SCHEMA["properties"]) == set(inputs)
    assert set(TARGET_SCHEMA["required"]) == {n for n, f in TargetSpec.model_fields.items() if f.is_required()}
    parser = argparse.ArgumentParser()
    cli_options.add_target_args(parser)
    flags = {a.option_strings[0] for a in parser._actions if a.option_strings and a.dest != "help"}
    assert flags == {i.declared.flag for i in inputs.values() if i.declared.flag}
    assert set(FORM_TARGET_FIELDS) == {n for n, i in inputs.items() if i.declared.form}
    # The embedded default target names each form field, once, and is a valid target.
    assert set(nf_settings.DEFAULT_TARGET) == set(FORM_TARGET_FIELDS)
    assert TargetSpec.parse(nf_settings.DEFAULT_TARGET).sequence_length == nf_settings.DEFAULT_TARGET["sequence_length"]
    assert {n: p.value for n, p in FORM_TARGET_FIELDS.items()} == nf_settings.DEFAULT_TARGET


def test_the_cli_flags_fill_the_fields_they_are_declared_for() -> None:
    parser = argparse.ArgumentParser()
    cli_options.add_target_args(parser)
    argv = ["--instance", "trn2.3xlarge", "--tp", "2", "--seq-len", "256", "--batch-size", "4"]
    argv += ["--max-context-length", "128", "--lnc", "1", "--dtype", "fp16", "--quant", "int8:per_channel"]
    argv += ["--modules-to-not-convert", "layers.0.mlp", "--profile", "cpu"]
    target = cli_options.target_from_args(parser.parse_args(argv))
    assert (target.instance_type, target.tp_degree, target.sequence_length, target.batch_size) == (
        "trn2.3xlarge",
        2,
        256,
        4,
    )
    assert (target.max_context_length, target.logical_nc_config, target.dtype) == (128, 1, "fp16")
    assert target.quantization.slug == "int8_per_channel"
    assert target.quantization.modules_to_not_convert == ("layers.0.mlp", "lm_head")
    assert target.profile.startswith("cpu@")


class Wider(TargetSpec):
    """A target with one more field, declared the one way a field is."""

    speculation_length: Annotated[
        int,
        Field(ge=1, le=64),
        Declared("draft tokens per step", flag="--speculation-length", title="Speculation length", form=True),
    ] = 4


def test_a_field_added_to_the_declaration_shows_up_in_every_surface() -> None:
    schema = target_json_schema(Wider)
    assert schema["properties"]["speculation_length"] == {
        "type": "integer",
        "minimum": 1,
        "maximum": 64,
        "description": "draft tokens per step",
    }
    validator = Draft202012Validator(schema)
    assert validator.is_valid({**BASE, "speculation_length": 64})
    assert not validator.is_valid({**BASE, "speculation_length": 65})

    form = form_target_fields(Wider)
    assert form["speculation_length"].value == 4  # not in DEFAULT_TARGET: its declared default
    assert form["speculation_length"].schema["title"] == "Speculation length"
    with pytest.raises(ValueError):
        form["speculation_length"].resolve(0)

    parser = argparse.ArgumentParser()
    cli_options.add_target_args(parser, Wider)
    args = parser.parse_args(["--instance", "inf2.xlarge", "--tp", "1", "--seq-len", "64", "--speculation-length", "8"])
    assert Wider.parse(cli_options.target_values(args, Wider)).speculation_length == 8
    assert "draft tokens per step (default 4)" in parser.format_help()

    assert spoken("speculation_length", 8, "cli", Wider) == "--speculation-length 8"
    assert spoken("speculation_length", 8, "form", Wider) == "Speculation length: 8"


def test_a_field_without_its_declaration_is_refused_when_the_surfaces_are_built() -> None:
    class Undeclared(TargetSpec):
        draft_model: str = ""

    with pytest.raises(TypeError, match=r"Undeclared.draft_model has no Declared"):
        target_inputs(Undeclared)


def test_a_fix_is_spoken_in_each_surface_s_words() -> None:
    assert spoken("sequence_length", 2048, "cli") == "--seq-len 2048"
    assert spoken("sequence_length", 2048, "form") == "Sequence length: 2048"
    assert spoken("batch_size", 4, "form") == "Batch size: 4"
    # the form's dropdown spells a quantization in full
    assert spoken("quantization", "int8:per_channel", "cli") == "--quant int8:per_channel"
    assert spoken("quantization", "int8:per_channel", "form") == "Quantization: int8:per_channel_symmetric"


def test_a_rejected_plan_fails_an_airflow_task_in_the_form_s_words(tmp_path) -> None:
    """The same rejection the CLI prints with `--seq-len 32768` fails the task with the form's field name."""
    import json
    from pathlib import Path

    from airflow.sdk.exceptions import AirflowFailException

    from neuronforge.pipeline.buildstate import BuildState
    from neuronforge.pipeline.planner import PlanRejected, plan
    from neuronforge.spec.modelconfig import ModelArch
    from neuronforge_airflow.operators.compile_publish import task_failure

    config = Path(__file__).parent / "data" / "model-configs" / "mistralai--Mistral-7B-v0.1.json"
    target = TargetSpec.parse({"instance_type": "inf2.xlarge", "tp_degree": 2, "sequence_length": 65536})
    rejected = PlanRejected.of(target.slug, plan(ModelArch.from_config(json.loads(config.read_text())), target).failed)
    assert "use --seq-len 32768 or less" in str(rejected)  # the CLI's words (`neuronforge run`)
    state = BuildState(model="builtin:tiny-llama", target=target, store_uri=f"file://{tmp_path}")
    failure = task_failure(rejected, state)
    assert isinstance(failure, AirflowFailException)
    assert "use Sequence length: 32768 or less" in str(failure) and "--seq-len" not in str(failure)
