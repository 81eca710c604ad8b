"""Cache keys: every input that changes the compiled output changes the key; spelling does not."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from neuronforge.common.errors import InvalidInput
from neuronforge.profiles.registry import compile_request, parse_target
from neuronforge.profiles.request import cache_key, cache_key_material, canonical_json
from neuronforge.spec.source import ModelSource
from neuronforge.spec.target import TargetSpec
from neuronforge.spec.toolchain import Toolchain, normalize_flags

SHA = "a" * 40
SRC = ModelSource.parse("org/model").pinned(SHA)
BASE_TARGET = {
    "instance_type": "inf2.xlarge",
    "tp_degree": 2,
    "sequence_length": 2048,
    "profile": "vllm-neuron@2.26.1",
}
CC = "2.21.33363.0+82129205"  # neuronx-cc of SDK 2.26.1 as it reports itself (local label included)
TC = Toolchain("nxdi", "0.6.1", "neuronxcc", CC, {"torch": "2.8.0", "transformers": "4.57.6"}, ())


def key(target: dict | None = None, toolchain: Toolchain = TC, source: ModelSource = SRC) -> str:
    return cache_key(compile_request(source, TargetSpec.parse({**BASE_TARGET, **(target or {})})), toolchain)


@pytest.mark.parametrize(
    "change",
    [
        {"instance_type": "trn1.2xlarge"},
        {"tp_degree": 1},
        {"batch_size": 4},
        {"sequence_length": 4096},
        {"max_context_length": 1024},
        {"dtype": "fp16"},
        {"quantization": "int8"},
        {"quantization": "int8:per_channel"},
        {"quantization": "f8e4m3"},
        {"context_encoding_buckets": [512, 2048]},
        {"token_generation_buckets": [2048]},
        {"backend_options": {"fused_qkv": True}},
    ],
)
def test_every_target_field_changes_the_key(change: dict) -> None:
    assert key(change) != key()


def test_quantization_method_changes_the_key() -> None:
    assert key({"quantization": "int8:per_tensor"}) != key({"quantization": "int8:per_channel"})


def test_logical_core_config_changes_the_key() -> None:
    trn2 = {"instance_type": "trn2.48xlarge"}
    assert key({**trn2, "logical_nc_config": 1}) != key(trn2)


@pytest.mark.parametrize(
    "toolchain",
    [
        Toolchain("nxdi", "0.6.2", "neuronxcc", CC, TC.packages),
        Toolchain("nxdi", "0.6.1", "neuronxcc", "2.22.12471.0+b4a00d10", TC.packages),
        Toolchain("nxdi", "0.6.1", "neuronxcc", "2.21.33363.0", TC.packages),  # the label is part of it
        Toolchain("nxdi", "0.6.1", "neuronxcc", CC, {**TC.packages, "torch": "2.9.0"}),
        Toolchain("nxdi", "0.6.1", "neuronxcc", CC, TC.packages, ("-O1",)),
        Toolchain("nxdi", "0.6.1", "otherc", CC, TC.packages),
    ],
)
def test_every_toolchain_field_changes_the_key(toolchain: Toolchain) -> None:
    assert key(toolchain=toolchain) != key()


def test_revision_and_backend_change_the_key() -> None:
    assert key(source=ModelSource.parse("org/model").pinned("b" * 40)) != key()
    cpu_tc = Toolchain("cpu", "2.13.0", "torch-inductor", "2.13.0")
    assert key({"profile": "cpu"}, toolchain=cpu_tc) != key()


def test_defaults_spelled_out_do_not_change_the_key() -> None:
    explicit = {
        "batch_size": 1,
        "dtype": "bf16",
        "max_context_length": 2048,
        "logical_nc_config": 1,
        "quantization": "none",
        "backend_options": {},
    }
    assert key(explicit) == key()


def test_field_and_option_order_do_not_change_the_key() -> None:
    a = TargetSpec.parse({**BASE_TARGET, "backend_options": {"a": 1, "b": 2}})
    b = TargetSpec.parse(dict(reversed(list({**BASE_TARGET, "backend_options": {"b": 2, "a": 1}}.items()))))
    assert cache_key(compile_request(SRC, a), TC) == cache_key(compile_request(SRC, b), TC)
    t1 = Toolchain("nxdi", "1", "neuronxcc", "2", {"x": "1", "y": "2"}, ("-O1", "--model-type transformer"))
    t2 = Toolchain("nxdi", "1", "neuronxcc", "2", {"y": "2", "x": "1"}, ("--model-type  transformer -O1",))
    assert key(toolchain=t1) == key(toolchain=t2)


def test_repo_name_is_not_in_the_key() -> None:
    """Same bytes under another name compile to the same graphs."""
    assert key(source=ModelSource.parse("other/copy").pinned(SHA)) == key()


def test_unresolved_source_or_mismatched_backend_is_refused() -> None:
    with pytest.raises(InvalidInput, match="resolve it to an immutable revision"):
        key(source=ModelSource.parse("org/model"))
    with pytest.raises(InvalidInput, match="toolchain is for backend 'nxdi' but profile cpu@local compiles with 'cpu'"):
        key({"profile": "cpu"})


def test_material_is_canonical_json_and_roundtrips_the_toolchain() -> None:
    material = cache_key_material(compile_request(SRC, TargetSpec.parse(BASE_TARGET)), TC)
    assert material["model_revision"] == SHA and material["toolchain"]["compiler_version"] == CC
    assert Toolchain.from_json(json.loads(json.dumps(material["toolchain"]))) == TC


def test_normalize_flags_keeps_option_values_with_their_flag() -> None:
    assert normalize_flags("--model-type transformer -O1 --auto-cast none") == (
        "--auto-cast none",
        "--model-type transformer",
        "-O1",
    )
    assert normalize_flags(None) == ()


targets = st.fixed_dictionaries(
    {
        "instance_type": st.sampled_from(["inf2.xlarge", "trn1.32xlarge", "inf2.48xlarge"]),
        "tp_degree": st.sampled_from([1, 2]),
        "batch_size": st.integers(1, 64),
        "sequence_length": st.integers(128, 8192),
        "dtype": st.sampled_from(["bf16", "fp16", "fp32"]),
        "quantization": st.sampled_from(["none", "int8", "int8:per_channel", "f8e4m3", "f8e5m2:per_channel"]),
        "profile": st.just("vllm-neuron@2.26.1"),
    }
)


@settings(max_examples=60, deadline=None)
@given(targets, st.randoms())
def test_key_is_stable_under_dict_order(target: dict, rnd) -> None:
    items = list(target.items())
    rnd.shuffle(items)
    assert key(dict(items)) == key(target)


@settings(max_examples=60, deadline=None)
@given(targets, targets)
def test_distinct_targets_have_distinct_keys(a: dict, b: dict) -> None:
    same = TargetSpec.parse({**BASE_TARGET, **a}).normalized() == TargetSpec.parse({**BASE_TARGET, **b}).normalized()
    assert (key(a) == key(b)) == same


def test_the_profile_and_its_pins_are_in_the_key(monkeypatch) -> None:
    """The serving profile decides what the artifact is compiled for: another profile with the same
    backend, or the same profile at another SDK release (new pins), is another key; naming the
    newest version explicitly is the same key as naming the profile."""
    from neuronforge.profiles import registry
    from neuronforge.profiles.base import Pins
    from neuronforge.profiles.vllm_neuron import VllmNeuronProfile

    base = key()
    assert key({"profile": "vllm-neuron@2.26"}) == base  # a release series names its newest release
    material = cache_key_material(compile_request(SRC, TargetSpec.parse(BASE_TARGET)), TC)
    assert material["profile"]["name"] == "vllm-neuron" and material["profile"]["version"] == "2.26.1"
    assert material["profile"]["pins"]["compiler_version"] == "2.21.33363.0+82129205"

    class Newer(VllmNeuronProfile):  # newer than every registered release, serving inf2 (2.26.1's families)
        pins = Pins("2.40.0", "2.40.0.0+abcdef12", {"neuronx-distributed-inference": "0.40.0"})

    registered = registry.all_profiles()
    monkeypatch.setattr(registry, "all_profiles", lambda: (*registered, Newer()))
    bare = key({"profile": "vllm-neuron"})
    assert bare != base and bare == key({"profile": "vllm-neuron@2.40.0"})  # the bare name follows the newest
    assert key() == base  # a pinned target does not


def test_the_target_is_read_back_from_the_key_material() -> None:
    target = parse_target({**BASE_TARGET, "quantization": "int8:per_channel", "batch_size": 4})
    material = cache_key_material(compile_request(SRC, target), TC)
    assert TargetSpec.from_key_material(json.loads(canonical_json(material))) == target.normalized()


def test_the_compile_target_the_toolchain_is_told_is_in_the_key() -> None:
    """A Neuron compile runs on a CPU host and is told its target (NEURON_PLATFORM_TARGET_OVERRIDE):
    the same value is keyed; inf2 compiles for trn1 as optimum-neuron maps it, trn2 for trn2; the
    CPU profile has none."""
    from neuronforge.compilation.backends.base import neuron_compile_env

    for instance, tp, want in (("inf2.xlarge", 2, "trn1"), ("trn1n.32xlarge", 8, "trn1"), ("trn2.48xlarge", 4, "trn2")):
        target = TargetSpec.parse({**BASE_TARGET, "instance_type": instance, "tp_degree": tp})
        material = cache_key_material(compile_request(SRC, target), TC)
        assert material["compile_target"] == want and material["key_schema"] == 3
        assert neuron_compile_env(target, Path("/c"), ())["NEURON_PLATFORM_TARGET_OVERRIDE"] == want
    cpu = TargetSpec.parse({**BASE_TARGET, "profile": "cpu"})
    cpu_tc = Toolchain("cpu", "2.13.0", "torch-inductor", "2.13.0")
    assert "compile_target" not in cache_key_material(compile_request(SRC, cpu), cpu_tc)
