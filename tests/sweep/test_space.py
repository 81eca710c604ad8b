"""The candidate space follows optimum-neuron's export-configuration document ("Optimal export
configurations", huggingface/optimum-neuron@ec894b4c tools/export/AGENTS.md, as
neuronforge.farm.sweep.space's docstring gives it): tp at least 2, a multiple of the
cores per device, at most the instance's cores, dividing the attention heads; batch sizes
[1, 4, 8, 16, 32, 64, 128]; sequence lengths powers of two from 1024 to the max positions; order
tp up, batch down, sequence length down."""

from __future__ import annotations

import pytest

from neuronforge.common.errors import InvalidInput
from neuronforge.farm.sweep import BATCH_SIZES, Candidate, Space
from neuronforge.spec.instances import get_instance
from neuronforge.spec.modelconfig import ModelArch, load_config
from tests.test_planner import CONFIGS


def arch(name: str) -> ModelArch:
    return ModelArch.from_config(load_config(CONFIGS / f"{name}.json"))


@pytest.mark.parametrize(
    ("model", "instance", "tps"),
    [
        ("meta-llama--Llama-3.1-8B", "inf2.xlarge", [2]),  # 2 cores
        ("meta-llama--Llama-3.1-8B", "inf2.48xlarge", [2, 4, 8, 16]),  # 24 cores; 32 heads: not 6, 12 or 24
        ("Qwen--Qwen2.5-7B", "inf2.48xlarge", [2, 4, 14]),  # 28 heads
        ("meta-llama--Llama-3.1-8B", "trn1.32xlarge", [2, 4, 8, 16, 32]),
        ("meta-llama--Llama-3.1-8B", "trn2.48xlarge", [4, 8, 16, 32]),  # 8 cores per device = 4 at LNC 2
    ],
)
def test_tensor_parallel_candidates(model: str, instance: str, tps: list[int]) -> None:
    assert list(Space.build(arch(model), get_instance(instance)).tps) == tps


def test_batches_and_sequence_lengths_and_order() -> None:
    space = Space.build(arch("mistralai--Mistral-7B-v0.1"), get_instance("inf2.xlarge"))
    assert space.batch_sizes == tuple(sorted(BATCH_SIZES, reverse=True))
    assert space.seq_lens == (32768, 16384, 8192, 4096, 2048, 1024)  # max positions 32768
    cands = space.candidates()
    assert cands[:3] == [Candidate(2, 128, 32768), Candidate(2, 128, 16384), Candidate(2, 128, 8192)]
    assert cands[6] == Candidate(2, 64, 32768) and cands[-1] == Candidate(2, 1, 1024)
    assert len(cands) == 1 * 7 * 6
    planned = space.candidates("planned")
    assert set(planned) == set(cands) and planned[0] == Candidate(2, 1, 32768)


@pytest.mark.parametrize(
    ("kwargs", "words"),
    [
        ({"tps": [3]}, "--tp [3] not allowed for inf2.48xlarge"),
        ({"tps": [1]}, "at least 2"),
        ({"tps": [48]}, "allowed: [2, 4, 8, 16]"),
        ({"seq_lens": [3000]}, "--seq-lens [3000]: sequence lengths are powers of two"),
        ({"seq_lens": [262144]}, "up to the model's max positions (131072)"),
        ({"batch_sizes": [0]}, "--batch-sizes [0]"),
    ],
)
def test_a_list_outside_the_rules_is_refused(kwargs: dict, words: str) -> None:
    with pytest.raises(InvalidInput) as err:
        Space.build(arch("meta-llama--Llama-3.1-8B"), get_instance("inf2.48xlarge"), **kwargs)
    assert words in str(err.value)


@pytest.mark.parametrize(
    ("model", "instance", "tps"),
    [
        ("openai-community--gpt2-xl", "trn1.2xlarge", [1]),  # 25 heads: "without tensor-parallelism only"
        ("facebook--opt-30b", "trn1.32xlarge", [1, 2, 8]),  # 56 heads: not 16 or 32
        ("facebook--opt-13b", "inf2.48xlarge", [1, 2, 4, 8]),  # 40 heads: not 24
        ("EleutherAI--gpt-neox-20b", "inf2.24xlarge", [1, 2, 4, 8]),  # 64 heads: not 12
    ],
)
def test_lmi_neuronx_sweeps_take_the_guide_tps(model: str, instance: str, tps: list[int]) -> None:
    """transformers-neuronx's guide: the degrees the runtime supports on the instance, dividing the heads."""
    from neuronforge.profiles import get_profile

    space = Space.build(arch(model), get_instance(instance), profile=get_profile("lmi-neuronx"))
    assert list(space.tps) == tps
    with pytest.raises(InvalidInput, match="a degree the Neuron runtime supports there and divide the heads"):
        Space.build(arch(model), get_instance(instance), tps=[3], profile=get_profile("lmi-neuronx"))


def test_alibi_models_sweep_up_to_bloom_default_positions() -> None:
    bloom = arch("bigscience--bloom-7b1")
    assert Space.build(bloom, get_instance("inf2.xlarge")).seq_lens == (2048, 1024)
    assert Space.build(bloom, get_instance("inf2.xlarge"), seq_lens=[8192]).seq_lens == (8192,)  # no limit
    with pytest.raises(InvalidInput, match="no limit: ALiBi"):
        Space.build(bloom, get_instance("inf2.xlarge"), seq_lens=[3000])
