"""TargetSpec validation: impossible values are refused with a message naming the field."""

from __future__ import annotations

import pytest

from neuronforge.errors import InvalidInput
from neuronforge.instances import INSTANCES
from neuronforge.profiles import parse_target
from neuronforge.target import Quantization, TargetSpec

BASE = {"instance_type": "inf2.xlarge", "tp_degree": 2, "sequence_length": 2048}


def test_defaults_and_normalization() -> None:
    t = TargetSpec.parse(BASE)
    assert (t.batch_size, t.dtype, t.profile, t.quantization.enabled) == (1, "bf16", "cpu", False)
    assert t.normalized().profile == "cpu"  # a value type resolves no registry: the edge pins it
    assert parse_target(BASE).profile == "cpu@local"
    n = t.normalized()
    assert n.max_context_length == 2048 and n.logical_nc_config == 1
    assert TargetSpec.parse({**BASE, "instance_type": "trn2.48xlarge"}).lnc == 2


@pytest.mark.parametrize(
    ("change", "field", "text"),
    [
        ({"tp_degree": 0}, "target.tp_degree", "greater than or equal to 1"),
        ({"batch_size": 0}, "target.batch_size", "greater than or equal to 1"),
        ({"instance_type": "inf3.xlarge"}, "target.instance_type", "unknown instance type 'inf3.xlarge'"),
        ({"dtype": "int4"}, "target.dtype", "'bf16', 'fp16' or 'fp32'"),
        ({"profile": "vllm neuron"}, "target.profile", "is not a profile name"),
        ({"backend": "nxdi"}, "target", "`backend` was replaced by `profile`"),
        ({"max_context_length": 4096}, "target", "max_context_length=4096 exceeds sequence_length=2048"),
        ({"logical_nc_config": 2}, "target", "logical_nc_config=2 is not available on inf2.xlarge"),
        ({"context_encoding_buckets": [512, 256]}, "target.context_encoding_buckets", "strictly increasing"),
        ({"token_generation_buckets": [1024, 4096]}, "target", "token_generation_buckets has 4096 > sequence_length"),
        ({"quantization": "int4"}, "", "quantization: unknown dtype 'int4'"),
        ({"quantization": "int8:per_block"}, "", "unknown method 'per_block'"),
        ({"colour": "red"}, "target.colour", "Extra inputs are not permitted"),
    ],
)
def test_impossible_values_are_refused_naming_the_field(change: dict, field: str, text: str) -> None:
    with pytest.raises(InvalidInput) as exc:
        TargetSpec.parse({**BASE, **change})
    assert field in str(exc.value) and text in str(exc.value)


@pytest.mark.parametrize(
    ("profile", "text"),
    [
        ("tensorrt", "target.profile: unknown profile 'tensorrt'"),
        ("tgi-neuron", "nearest supported profile is optimum-neuron"),
        ("vllm-neuron@2.30.0", "profile 'vllm-neuron' has no version '2.30.0'"),
    ],
)
def test_the_edge_pins_the_profile_or_says_why_not(profile: str, text: str) -> None:
    """`TargetSpec` checks the spelling only; `parse_target` (every entry point's) asks the registry."""
    assert TargetSpec.parse({**BASE, "profile": profile}).profile == profile
    with pytest.raises(InvalidInput) as exc:
        parse_target({**BASE, "profile": profile})
    assert text in str(exc.value)
    assert parse_target({**BASE, "profile": "vllm-neuron@2.26"}).profile == "vllm-neuron@2.26.1"


def test_every_reference_instance_is_accepted() -> None:
    for name in INSTANCES:
        assert TargetSpec.parse({**BASE, "instance_type": name, "tp_degree": 1}).instance.name == name


def test_quantization_parsing_and_slug() -> None:
    assert Quantization.parse("none") == Quantization()
    q = Quantization.parse("int8:per_channel")
    assert (q.dtype, q.method, q.slug) == ("int8", "per_channel_symmetric", "int8_per_channel")
    assert Quantization.parse("f8e4m3").method == "per_tensor_symmetric"
    assert TargetSpec.parse({**BASE, "quantization": "f8e5m2:per_tensor_symmetric"}).quantization.dtype == "f8e5m2"


def test_slug_names_the_target() -> None:
    t = TargetSpec.parse({**BASE, "profile": "vllm-neuron", "quantization": "int8:per_channel"})
    assert t.slug == "vllm-neuron-inf2.xlarge-tp2-b1-s2048-bf16-int8_per_channel"
    t2 = TargetSpec.parse({**BASE, "instance_type": "trn2.48xlarge", "logical_nc_config": 1})
    assert t2.slug.endswith("-lnc1")
