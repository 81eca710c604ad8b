"""The planner on real published configs (tests/data/model-configs) and on generated checkpoints."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from neuronforge.checkpoints.checkpoint import verify_checkpoint
from neuronforge.pipeline.planner import RUNTIME_RESERVE, kv_cache_bytes, plan, static_problems
from neuronforge.spec.instances import GIB, INSTANCES
from neuronforge.spec.modelconfig import ModelArch
from neuronforge.spec.target import TargetSpec

# Real published configs (config.json of each Hub repo, copied into the repo; see its README).
CONFIGS = Path(__file__).resolve().parent / "data" / "model-configs"


def arch(name: str, **override) -> ModelArch:
    return ModelArch.from_config({**json.loads((CONFIGS / f"{name}.json").read_text()), **override})


def target(**kw) -> TargetSpec:
    base = {"instance_type": "inf2.xlarge", "tp_degree": 1, "sequence_length": 4096, "profile": "vllm-neuron@2.26.1"}
    return TargetSpec.parse({**base, **kw})


def failing(p) -> dict[str, str]:
    return {c.name: c.message for c in p.checks if not c.ok}


@pytest.mark.parametrize(
    ("name", "billions"),
    [
        ("meta-llama--Llama-3.1-8B", 8.03),
        ("mistralai--Mistral-7B-v0.1", 7.24),
        ("mistralai--Mixtral-8x7B-v0.1", 46.70),
        ("Qwen--Qwen2.5-7B", 7.62),
    ],
)
def test_parameter_counts_match_the_published_sizes(name: str, billions: float) -> None:
    p = plan(arch(name), target(instance_type="trn1.32xlarge", tp_degree=32))
    assert round(p.parameter_count / 1e9, 2) == billions
    assert p.weight_bytes == 2 * p.parameter_count  # bf16


def test_the_header_and_the_memory_check_count_the_reserve_the_same_way(capsys) -> None:
    """`plan` said "per core 17.8 GiB of 16.0 GiB" in its header and "needs 15.8 GiB per core ..., a
    NeuronCore has 16.0 GiB minus 2.0 GiB runtime reserve" in its FAIL line: two accountings of one
    number. Both now say the need with the reserve in it against the core's whole HBM, the same words."""
    from neuronforge.interfaces.cli import main

    llama = str(CONFIGS / "meta-llama--Llama-3.1-8B.json")
    for tp in ("1", "2"):
        main(["plan", "--model", llama, "--instance", "inf2.xlarge", "--tp", tp, "--seq-len", "4096"])
        out = capsys.readouterr().out.splitlines()
        header, memory = out[1], next(line for line in out if "] memory: " in line)
        stated = [re.search(r"(\d+\.\d GiB per core of \d+\.\d GiB)", line) for line in (header, memory)]
        assert all(stated) and stated[0][1] == stated[1][1], (header, memory)
        assert header.count("2.0 GiB runtime reserve") == memory.count("2.0 GiB runtime reserve") == 1
        assert "minus" not in memory


def test_llama_3_1_8b_needs_two_cores_as_documented() -> None:
    """Reference: Llama-3.1-8B bf16 batch 1 needs about 16 GB and is served on 2 cores."""
    a = arch("meta-llama--Llama-3.1-8B")
    one = plan(a, target())
    assert 15.5e9 < one.weight_bytes < 16.5e9
    assert not one.fits and not one.ok
    assert "use tp=2 (inf2.xlarge has 2 cores)" in failing(one)["memory"]
    assert "needs 17.8 GiB per core of 16.0 GiB (" in failing(one)["memory"]
    assert "+ 2.0 GiB runtime reserve) on a NeuronCore of inf2.xlarge" in failing(one)["memory"]
    two = plan(a, target(tp_degree=2))
    assert two.fits and two.ok
    assert plan(a, target(instance_type="trn1.2xlarge", tp_degree=2)).ok


def test_mistral_7b_does_not_fit_one_core_and_fits_two() -> None:
    a = arch("mistralai--Mistral-7B-v0.1")
    assert not plan(a, target()).fits
    assert plan(a, target(tp_degree=2)).fits


def test_mixtral_is_sent_to_a_bigger_instance() -> None:
    a = arch("mistralai--Mixtral-8x7B-v0.1")
    p = plan(a, target(tp_degree=2))
    assert "use inf2.24xlarge with tp=8 (12 cores)" in failing(p)["memory"]
    assert plan(a, target(instance_type="inf2.24xlarge", tp_degree=8)).ok


def test_tp_not_supported_on_instance() -> None:
    p = plan(arch("meta-llama--Llama-3.1-8B"), target(tp_degree=4))
    msg = failing(p)["tp_degree"]
    assert "tp=4 is not supported on inf2.xlarge (2 cores); use tp in [1, 2]" in msg
    assert "inf2.24xlarge" in msg and "inf2.48xlarge" in msg


def test_heads_not_divisible_by_tp() -> None:
    p = plan(arch("Qwen--Qwen2.5-7B"), target(instance_type="inf2.48xlarge", tp_degree=8))
    assert failing(p)["heads_divisible"] == (
        "28 attention heads are not divisible by tp=8; use tp=2 (tps that divide the heads on inf2.48xlarge: [1, 2, 4])"
    )


def test_gqa_strategies() -> None:
    a = arch("meta-llama--Llama-3.1-8B")  # 8 kv heads
    assert plan(a, target(instance_type="trn1.32xlarge", tp_degree=8)).gqa_strategy == "shard-over-heads"
    wide = plan(a, target(instance_type="trn1.32xlarge", tp_degree=32))
    assert wide.gqa_strategy == "replicate-to-tp"
    assert wide.kv_cache_bytes == 4 * plan(a, target(instance_type="trn1.32xlarge", tp_degree=8)).kv_cache_bytes
    cfg = json.loads((CONFIGS / "meta-llama--Llama-3.1-8B.json").read_text())
    odd = ModelArch.from_config({**cfg, "num_attention_heads": 24, "hidden_size": 3072})  # 24 heads, 8 kv heads
    mha = plan(odd, target(instance_type="inf2.24xlarge", tp_degree=12))
    assert mha.gqa_strategy == "convert-to-mha"  # 8 neither divides nor is divided by 12
    assert mha.kv_cache_bytes == 3 * plan(odd, target(instance_type="inf2.24xlarge", tp_degree=8)).kv_cache_bytes


def test_kv_cache_formula() -> None:
    a = arch("meta-llama--Llama-3.1-8B")
    # 2 x 32 layers x 8 kv heads x 128 head dim x 4096 tokens x 1 batch x 2 bytes = 512 MiB
    assert kv_cache_bytes(a, 1, 1, 4096, "bf16") == 512 * 1024 * 1024
    assert plan(a, target(batch_size=4)).kv_cache_bytes == 4 * plan(a, target()).kv_cache_bytes


def test_sequence_longer_than_the_model_allows() -> None:
    p = plan(arch("mistralai--Mistral-7B-v0.1"), target(sequence_length=65536, tp_degree=2))
    assert "use --seq-len 32768 or less" in failing(p)["sequence_length"]


def test_a_fix_is_structured_and_said_in_each_surface_s_words() -> None:
    """The CLI names the flag, the form and the Airflow tasks the field's title: same fix, same value."""
    from neuronforge.pipeline.planner import Fix, PlanRejected

    p = plan(arch("mistralai--Mistral-7B-v0.1"), target(sequence_length=65536, tp_degree=2))
    (check,) = [c for c in p.failed if c.name == "sequence_length"]
    assert check.fix == Fix("sequence_length", 32768, "or less")
    assert (
        check.said("cli")
        == check.message
        == ("sequence length 65536 exceeds the model's max_position_embeddings 32768; use --seq-len 32768 or less")
    )
    assert check.said("form").endswith("32768; use Sequence length: 32768 or less")
    assert p.to_json()["checks"][check_index(p, "sequence_length")] == {
        "name": "sequence_length",
        "ok": False,
        "message": check.message,  # the JSON keeps the CLI's words, no new keys
    }
    rejected = PlanRejected.of("slug", p.failed)
    assert str(rejected).startswith("slug: ") and "--seq-len 32768" in str(rejected)
    assert "Sequence length: 32768" in rejected.said("form") and "--seq-len" not in rejected.said("form")


def check_index(p, name: str) -> int:
    return [c.name for c in p.checks].index(name)


def test_a_memory_fix_of_one_field_is_said_in_the_form_s_words() -> None:
    a = arch("meta-llama--Llama-3.1-8B")
    t = target(instance_type="inf2.xlarge", tp_degree=2, batch_size=1, sequence_length=131072)
    (memory,) = [c for c in plan(a, t).failed if c.name == "memory"]
    assert memory.fix is not None and memory.fix.field == "sequence_length" and memory.fix.why == "at tp=2"
    assert f"use --seq-len {memory.fix.value} at tp=2" in memory.message
    assert memory.said("form").endswith(f"; use Sequence length: {memory.fix.value} at tp=2")
    # 20B parameters in bf16 fill inf2.xlarge's two cores at any length: int8 weights are the fix
    neox = arch("EleutherAI--gpt-neox-20b")
    (quantize,) = [c for c in plan(neox, target(tp_degree=2, sequence_length=512)).failed if c.name == "memory"]
    assert quantize.message.endswith("; quantize the weights (--quant int8:per_channel) at tp=2")
    assert quantize.said("form").endswith(
        "; quantize the weights (Quantization: int8:per_channel_symmetric) at tp=2"  # the form's dropdown spelling
    )


def test_backend_that_lacks_the_architecture() -> None:
    p = plan(arch("mistralai--Mistral-7B-v0.1"), target(tp_degree=2, profile="optimum-neuron"))
    assert failing(p)["profile"] == (  # cpu is no Neuron server, lmi-neuronx is past its end on inf2 (issue 54)
        "profile 'optimum-neuron' does not support mistral; no profile serves mistral on inf2 today "
        "(lmi-neuronx is end-of-support for inf2)"
    )
    qwen = plan(arch("Qwen--Qwen2.5-7B"), target(tp_degree=2, profile="lmi-neuronx"))
    # a line frozen for the family is named with the last version that serves it
    assert (
        failing(qwen)["profile"]
        == "profile 'lmi-neuronx' does not support qwen2; use profile optimum-neuron or vllm-neuron@2.28.0"
    )


def test_quantization_shrinks_weights_and_can_be_the_fix() -> None:
    a = arch("meta-llama--Llama-3.1-8B")
    bf16 = plan(a, target(tp_degree=2))
    int8 = plan(a, target(tp_degree=2, quantization="int8:per_channel"))
    per_tensor = plan(a, target(tp_degree=2, quantization="int8:per_tensor"))
    assert int8.weight_bytes < 0.6 * bf16.weight_bytes
    assert int8.weight_bytes > per_tensor.weight_bytes  # per-channel carries one fp32 scale per row
    t = target(instance_type="inf2.xlarge", tp_degree=2, batch_size=1, sequence_length=131072)
    # At 128k tokens the KV cache alone is 8 GiB per core on 2 cores: shorter sequences are the fix.
    assert "use --seq-len" in failing(plan(a, t))["memory"]


def test_headers_give_exact_weight_bytes(tiny_llama: Path) -> None:
    v = verify_checkpoint(tiny_llama)
    t = target(profile="cpu", sequence_length=256)
    from_headers = plan(v.arch, t, tensors=v.tensors)
    from_config = plan(v.arch, t)
    exact = sum(info.numel for info in v.tensors.values())
    assert from_headers.parameter_count == exact
    assert from_config.parameter_count == exact  # the config formula agrees on a real checkpoint
    assert from_headers.ok


def test_suggestions_are_feasible_and_smallest_tp_first() -> None:
    a = arch("meta-llama--Llama-3.1-8B")
    p = plan(a, target(instance_type="inf2.48xlarge", tp_degree=1), with_suggestions=True)
    assert p.suggestions
    tps = [s.tp for s in p.suggestions]
    assert tps == sorted(tps) and tps[0] == 2  # tp=1 never fits an 8B model in bf16
    for s in p.suggestions:
        check = plan(
            a, target(instance_type="inf2.48xlarge", tp_degree=s.tp, batch_size=s.batch_size, sequence_length=s.seq_len)
        )
        assert check.fits and check.per_core_bytes == s.per_core_bytes
    assert all(s.per_core_bytes <= 16 * GIB for s in p.suggestions)


def test_trn2_logical_cores() -> None:
    a = arch("meta-llama--Llama-3.1-8B")
    lnc2 = plan(a, target(instance_type="trn2.48xlarge", tp_degree=1))
    lnc1 = plan(a, target(instance_type="trn2.48xlarge", tp_degree=1, logical_nc_config=1))
    assert lnc2.hbm_per_core_bytes == 24 * GIB and lnc1.hbm_per_core_bytes == 12 * GIB
    assert lnc2.fits and not lnc1.fits


# -- properties ------------------------------------------------------------------------------------
power_of_two_archs = st.builds(
    lambda layers, heads_exp, kv_exp, hd, inter, vocab: ModelArch.from_config(
        {
            "model_type": "llama",
            "hidden_size": (2**heads_exp) * hd,
            "num_hidden_layers": layers,
            "num_attention_heads": 2**heads_exp,
            "num_key_value_heads": 2 ** min(kv_exp, heads_exp),
            "intermediate_size": inter,
            "vocab_size": vocab,
            "max_position_embeddings": 131072,
        }
    ),
    st.integers(1, 80),
    st.integers(3, 7),
    st.integers(0, 6),
    st.sampled_from([64, 128]),
    st.integers(256, 30000),
    st.integers(1000, 200000),
)


@settings(max_examples=150, deadline=None)
@given(power_of_two_archs, st.sampled_from([1, 2, 4, 8, 16]), st.integers(1, 32), st.integers(128, 32768))
def test_more_tp_never_increases_per_core_bytes(a: ModelArch, tp: int, batch: int, seq: int) -> None:
    assume(a.num_heads % (2 * tp) == 0)
    inst = "trn1.32xlarge"
    small = plan(a, target(instance_type=inst, tp_degree=tp, batch_size=batch, sequence_length=seq))
    large = plan(a, target(instance_type=inst, tp_degree=2 * tp, batch_size=batch, sequence_length=seq))
    assert large.per_core_bytes <= small.per_core_bytes


@settings(max_examples=150, deadline=None)
@given(power_of_two_archs, st.sampled_from([1, 2, 8, 32]), st.integers(1, 32), st.integers(128, 65536))
def test_longer_sequence_never_decreases_kv_bytes(a: ModelArch, tp: int, batch: int, seq: int) -> None:
    shorter = kv_cache_bytes(a, tp, batch, seq, "bf16")
    longer = kv_cache_bytes(a, tp, batch, seq + 1, "bf16")
    assert longer > shorter > 0


def test_reserve_is_counted_once_per_core() -> None:
    a = arch("meta-llama--Llama-3.1-8B")
    p = plan(a, target(tp_degree=2))
    assert p.per_core_bytes == -(-(p.weight_bytes + p.kv_cache_bytes + p.activation_bytes) // 2) + RUNTIME_RESERVE
    assert set(INSTANCES) >= {"inf2.xlarge", "trn1.2xlarge", "trn2.48xlarge"}


# -- the transformers-neuronx guide's families under lmi-neuronx (the guide's own sizing examples) ---
def lmi(**kw) -> TargetSpec:
    return target(**{"profile": "lmi-neuronx", "dtype": "fp16", "sequence_length": 2048, **kw})


def test_guide_opt_13b_fits_a_trn1_2xlarge() -> None:
    """ "facebook/opt-13b has 40 attention heads, and when running at batch size 1 and float16
    precision the model requires ~29 GB memory, therefore a trn1.2xlarge ... is sufficient"."""
    p = plan(arch("facebook--opt-13b"), lmi(instance_type="trn1.2xlarge", tp_degree=2))
    assert p.ok, p.problems
    assert 26e9 < p.weight_bytes + p.kv_cache_bytes < 29e9


def test_guide_opt_30b_heads_refuse_tp_32_and_name_tp_8() -> None:
    """opt-30b's 56 heads: "it can run on 8 NeuronCores on one trn1.32xlarge"."""
    a = arch("facebook--opt-30b")
    p = plan(a, lmi(instance_type="trn1.32xlarge", tp_degree=32))
    assert failing(p) == {
        "heads_divisible": "56 attention heads are not divisible by tp=32; "
        "use tp=8 (tps that divide the heads on trn1.32xlarge: [1, 2, 8])"
    }
    assert plan(a, lmi(instance_type="trn1.32xlarge", tp_degree=8)).ok
    assert "memory" in failing(plan(a, lmi(instance_type="trn1.32xlarge", tp_degree=2)))


def test_guide_gpt2_xl_runs_without_tensor_parallelism_only() -> None:
    a = arch("openai-community--gpt2-xl")
    p = plan(a, lmi(instance_type="trn1.2xlarge", tp_degree=2, sequence_length=1024, dtype="bf16"))
    assert failing(p)["heads_divisible"] == (
        "25 attention heads are not divisible by tp=2; use tp=1 (tps that divide the heads on trn1.2xlarge: [1])"
    )
    ok = plan(a, lmi(instance_type="trn1.2xlarge", tp_degree=1, sequence_length=1024, dtype="bf16"))
    assert ok.ok and ok.weight_bytes / GIB < 4  # "requires ~4 GB memory at bfloat16 precision"
    assert failing(plan(a, lmi(tp_degree=1)))["sequence_length"] == (
        "sequence length 2048 exceeds the model's n_positions 1024; use --seq-len 1024 or less"
    )


def test_gptj_and_neox_have_no_context_length_estimate() -> None:
    for name in ("EleutherAI--gpt-j-6b", "EleutherAI--gpt-neox-20b"):
        a = arch(name)
        t = lmi(instance_type="inf2.48xlarge", tp_degree=8, context_encoding_buckets=[512, 1024])
        assert "has no context_length_estimate" in failing(plan(a, t))["family"]
        p = plan(a, lmi(instance_type="inf2.48xlarge", tp_degree=8, max_context_length=512))
        assert "max_context_length=512" in failing(p)["family"]
        assert plan(a, lmi(instance_type="inf2.48xlarge", tp_degree=8)).ok
    # the OPT and BLOOM classes have it
    t = lmi(instance_type="inf2.xlarge", tp_degree=2, context_encoding_buckets=[512, 1024])
    assert plan(arch("bigscience--bloom-560m"), t).ok


def test_class_layout_limits() -> None:
    neox = arch("EleutherAI--gpt-neox-20b", use_parallel_residual=False)
    t = lmi(instance_type="inf2.48xlarge", tp_degree=8)
    assert (
        "use_parallel_residual=false: GPTNeoXForSampling raises NotImplementedError" in failing(plan(neox, t))["family"]
    )
    opt = arch("facebook--opt-13b", ffn_dim=16384)
    assert "ffn_dim 16384 != 4 x hidden_size 5120" in failing(plan(opt, t))["family"]
    assert static_problems(opt, t)  # refused before any download
    # another profile is not bound by transformers-neuronx's classes
    assert "family" not in failing(plan(neox, t.model_copy(update={"profile": "cpu"})))


def test_alibi_sets_no_sequence_limit() -> None:
    a = arch("bigscience--bloom-7b1")
    p = plan(a, lmi(instance_type="inf2.48xlarge", tp_degree=8, sequence_length=16384), with_suggestions=True)
    assert p.ok and "no limit from the config" in next(c.message for c in p.checks if c.name == "sequence_length")
    assert max(s.seq_len for s in p.suggestions) > 16384


def test_gpt2_conv1d_scales_follow_output_channels() -> None:
    """GPT-2's Conv1D weights are (in, out): per-channel int8 keeps one fp32 scale per output column."""
    from neuronforge.pipeline.planner import weight_bytes
    from neuronforge.spec.target import Quantization

    a = arch("openai-community--gpt2-xl")
    _, fp16 = weight_bytes(a, "fp16", Quantization())
    _, int8 = weight_bytes(a, "fp16", Quantization(dtype="int8", method="per_channel_symmetric"))
    h, layers = 1600, 48
    linear = layers * (h * 3 * h + h * h + h * 4 * h + 4 * h * h)
    scales = layers * (3 * h + h + 4 * h + h) * 4
    assert fp16 - int8 == linear * 2 - (linear + scales)
