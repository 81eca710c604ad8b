"""TargetSpec validation: impossible values are refused with a message naming the field."""

from __future__ import annotations

import pytest

from neuronforge.common.errors import InvalidInput
from neuronforge.profiles import parse_target
from neuronforge.spec.instances import INSTANCES
from neuronforge.spec.target import Quantization, TargetSpec

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
        ({"colour": "red"}, "target.colour", "unknown field; the fields are backend_options, batch_size"),
    ],
)
def test_impossible_values_are_refused_naming_the_field(change: dict, field: str, text: str) -> None:
    with pytest.raises(InvalidInput) as exc:
        TargetSpec.parse({**BASE, **change})
    assert field in str(exc.value) and text in str(exc.value)


@pytest.mark.parametrize(
    ("target", "text"),
    [
        (
            {**BASE, "instnace_type": "inf2.xlarge"},
            "target.instnace_type: unknown field (did you mean 'instance_type'?)",
        ),
        ({**BASE, "tp_degre": 2}, "target.tp_degre: unknown field (did you mean 'tp_degree'?)"),
        ({**BASE, "modules_to_not_covert": ["lm_head"]}, "(did you mean 'modules_to_not_convert'?)"),
        ({**BASE, "quantization": {"dtype": "int8", "methd": "per_tensor"}}, "(did you mean 'method'?)"),
    ],
)
def test_a_misspelt_field_inside_a_target_gets_the_field_it_means(target: dict, text: str) -> None:
    """As the conf's top-level keys do (neuronforge_airflow.params): the one spelling rule
    (`common.spelling`). A required field an unknown key stands for is not reported missing too."""
    without = {k: v for k, v in target.items() if k != "instance_type"} if "instnace_type" in target else target
    with pytest.raises(InvalidInput) as exc:
        TargetSpec.parse(without)
    assert text in str(exc.value) and "Field required" not in str(exc.value), str(exc.value)


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


# -- the slug names everything in the key ------------------------------------------------------------
# One other value per field of a target (and of its quantization): a field added to TargetSpec or
# Quantization without an entry here fails `test_every_key_field_has_a_variant`, and one whose
# variant changes the key but not the slug fails `test_targets_with_different_keys_have_different_slugs`.
SLUG_BASE = {"instance_type": "trn2.48xlarge", "tp_degree": 2, "sequence_length": 2048, "profile": "vllm-neuron"}
VARIANTS: dict[str, list[dict]] = {
    "instance_type": [{"instance_type": "trn1.32xlarge"}],
    "tp_degree": [{"tp_degree": 4}],
    "batch_size": [{"batch_size": 4}],
    "sequence_length": [{"sequence_length": 4096}],
    "max_context_length": [{"max_context_length": 1024}, {"max_context_length": 512}],
    "logical_nc_config": [{"logical_nc_config": 1}],
    "context_encoding_buckets": [{"context_encoding_buckets": [512, 2048]}, {"context_encoding_buckets": [2048]}],
    "token_generation_buckets": [{"token_generation_buckets": [2048]}, {"token_generation_buckets": [1024, 2048]}],
    "dtype": [{"dtype": "fp16"}],
    "quantization": [{"quantization": "int8"}, {"quantization": "f8e4m3:per_channel"}],
    "quantization.dtype": [{"quantization": "f8e5m2"}],
    "quantization.method": [{"quantization": "int8:per_channel"}],
    "quantization.modules_to_not_convert": [
        {"quantization": "int8", "modules_to_not_convert": ["model.layers.0.mlp"]},
        {"quantization": "int8", "modules_to_not_convert": ["model.layers.1.mlp"]},
    ],
    "backend_options": [{"backend_options": {"fused_qkv": True}}, {"backend_options": {"fused_qkv": False}}],
    # The profile's name is in the slug; its version is the one part the profile ref beside it shows.
    "profile": [{"profile": "optimum-neuron"}],
}


def _key(target: dict) -> str:
    from neuronforge.profiles.registry import compile_request
    from neuronforge.profiles.request import cache_key
    from neuronforge.spec.source import ModelSource
    from neuronforge.spec.toolchain import Toolchain

    spec = TargetSpec.parse(target)
    request = compile_request(ModelSource.parse("org/model").pinned("a" * 40), spec)
    backend = request.profile.backend.name
    return cache_key(request, Toolchain(backend, "1", "neuronxcc", "2.21", {"torch": "2.8.0"}, ()))


def test_every_key_field_has_a_variant() -> None:
    fields = set(TargetSpec.model_fields) | {f"quantization.{f}" for f in Quantization.model_fields}
    assert set(VARIANTS) == fields


def _all_variants() -> list[dict]:
    out = [dict(SLUG_BASE)]
    for changes in VARIANTS.values():
        out += [{**SLUG_BASE, **c} for c in changes]
    # and pairs of changes, so a slug part cannot stand in for another field's
    singles = [c for changes in VARIANTS.values() for c in changes]
    out += [{**SLUG_BASE, **a, **b} for i, a in enumerate(singles) for b in singles[i + 1 :] if not set(a) & set(b)]
    return out


def test_targets_with_different_keys_have_different_slugs() -> None:
    slugs: dict[str, str] = {}
    for target in _all_variants():
        try:
            key = _key(target)
        except InvalidInput:
            continue  # a pair no profile accepts (e.g. lnc 1 on trn1)
        slug = TargetSpec.parse(target).slug
        assert slugs.setdefault(slug, key) == key, f"{slug} names two keys ({target})"
    assert len(slugs) > 100


def test_defaults_spelled_out_keep_the_slug() -> None:
    short = TargetSpec.parse(SLUG_BASE)
    spelled = TargetSpec.parse(
        {**SLUG_BASE, "batch_size": 1, "max_context_length": 2048, "logical_nc_config": 2, "dtype": "bf16"}
    )
    assert spelled.slug == short.slug == "vllm-neuron-trn2.48xlarge-tp2-b1-s2048-bf16"
    assert spelled.normalized().slug == short.slug
    assert TargetSpec.parse({**SLUG_BASE, "quantization": "int8", "modules_to_not_convert": ["lm_head"]}).slug == (
        "vllm-neuron-trn2.48xlarge-tp2-b1-s2048-bf16-int8_per_tensor"
    )


def test_slug_parts_stay_short_and_path_safe() -> None:
    t = TargetSpec.parse(
        {
            **SLUG_BASE,
            "max_context_length": 1024,
            "context_encoding_buckets": [128, 256, 512, 1024, 2048],
            "token_generation_buckets": [2048],
            "backend_options": {"a path": "/x y"},
        }
    )
    assert t.slug.startswith("vllm-neuron-trn2.48xlarge-tp2-b1-s2048-bf16-ctx1024-cteh")
    assert "-tkg2048-opt" in t.slug
    assert len(t.slug) < 100 and all(c.isalnum() or c in "._-" for c in t.slug)
