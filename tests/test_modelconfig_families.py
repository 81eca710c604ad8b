"""The transformers-neuronx guide's families (GPT-2, OPT, BLOOM, GPT-J, GPT-NeoX) read from their real
published config.json files (tests/data/model-configs, provenance in its README): dimensions from each
family's own field names, exact parameter counts, and tensor names and shapes checked against
transformers' own model classes built on the meta device (no weights, no download)."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import pytest

from neuronforge.checkpoints.quantized_names import QUANTIZABLE
from neuronforge.common.errors import InvalidInput
from neuronforge.spec.modelconfig import ModelArch

CONFIGS = Path(__file__).resolve().parent / "data" / "model-configs"
FAMILIES = [
    "openai-community--gpt2-xl",
    "facebook--opt-13b",
    "facebook--opt-30b",
    "EleutherAI--gpt-j-6b",
    "EleutherAI--gpt-neox-20b",
    "bigscience--bloom-560m",
    "bigscience--bloom-7b1",
]


def config(name: str) -> dict:
    return json.loads((CONFIGS / f"{name}.json").read_text())


def arch(name: str, **override) -> ModelArch:
    return ModelArch.from_config({**config(name), **override})


# Exact counts: sum(p.numel()) of transformers 4.57's AutoModelForCausalLM.from_config on the meta
# device for each config (test_tensors_match_transformers recomputes five of them). The model cards
# agree for gpt2-xl (1,557,611,200), gpt-neox-20b (20,554,567,680), bloom-560m (559,214,592) and
# bloom-7b1 (7,069,016,064); gpt-j-6b's card says 6,053,381,344 while transformers' GPTJForCausalLM
# built from the published config holds 6,050,882,784 (2,498,560 fewer; the card does not say what
# its figure counts). OPT's cards give no exact figure ("13B", "30B"); the counts include OPT's
# 2050-row learned position table.
COUNTS = {
    "openai-community--gpt2-xl": 1_557_611_200,
    "facebook--opt-13b": 12_853_473_280,
    "facebook--opt-30b": 29_974_540_288,
    "EleutherAI--gpt-j-6b": 6_050_882_784,
    "EleutherAI--gpt-neox-20b": 20_554_567_680,
    "bigscience--bloom-560m": 559_214_592,
    "bigscience--bloom-7b1": 7_069_016_064,
}


@pytest.mark.parametrize("name", FAMILIES)
def test_parameter_counts(name: str) -> None:
    a = arch(name)
    assert a.parameter_count() == COUNTS[name]
    assert sum(k * math.prod(s) for k, _, s in a.tensors()) == COUNTS[name]


def _meta_model(name: str):
    transformers = pytest.importorskip("transformers")
    torch = pytest.importorskip("torch")
    data = config(name)
    model_type = data.pop("model_type")
    data.pop("architectures")
    cfg = transformers.AutoConfig.for_model(model_type, **data)
    with torch.device("meta"):
        return transformers.AutoModelForCausalLM.from_config(cfg)


@pytest.mark.parametrize("name", ["openai-community--gpt2-xl", "facebook--opt-13b", "EleutherAI--gpt-j-6b",
                                  "EleutherAI--gpt-neox-20b", "bigscience--bloom-560m"])  # fmt: skip
def test_tensors_match_transformers(name: str) -> None:
    """Every parameter of transformers' model matches exactly one shape rule with its shape, the
    counts agree, and the tensor list names real parameters."""
    model = _meta_model(name)
    params = {k: tuple(v.shape) for k, v in model.named_parameters()}
    a = arch(name)
    rules = a.expected_shapes()
    for key, shape in params.items():
        hits = [s for pattern, s in rules if pattern.match(key)]
        assert hits == [shape], (key, shape, hits)
    assert sum(math.prod(s) for s in params.values()) == COUNTS[name]
    assert {n for _, n, _ in a.tensors()} <= set(params)
    # GPT-2 and BLOOM checkpoints often carry the names without `transformer.`
    if name in ("openai-community--gpt2-xl", "bigscience--bloom-560m"):
        bare = next(k for k in params if k.startswith("transformer.h.0.")).removeprefix("transformer.")
        assert any(p.match(bare) for p, _ in rules)


@pytest.mark.parametrize(
    ("name", "quantized", "kept"),
    [
        (
            "openai-community--gpt2-xl",
            {"attn.c_attn", "attn.c_proj", "mlp.c_fc", "mlp.c_proj"},
            {"transformer.wte.weight", "transformer.wpe.weight", "transformer.ln_f.weight"},
        ),
        (
            "facebook--opt-13b",
            {"self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.out_proj", "fc1", "fc2"},
            {"model.decoder.embed_tokens.weight", "model.decoder.embed_positions.weight"},
        ),
        (
            "bigscience--bloom-560m",
            {"self_attention.query_key_value", "self_attention.dense", "mlp.dense_h_to_4h", "mlp.dense_4h_to_h"},
            {"transformer.word_embeddings.weight", "transformer.word_embeddings_layernorm.weight"},
        ),
        (
            "EleutherAI--gpt-j-6b",
            {"attn.q_proj", "attn.k_proj", "attn.v_proj", "attn.out_proj", "mlp.fc_in", "mlp.fc_out"},
            {"transformer.wte.weight", "lm_head.weight", "lm_head.bias"},
        ),
        (
            "EleutherAI--gpt-neox-20b",
            {"attention.query_key_value", "attention.dense", "mlp.dense_h_to_4h", "mlp.dense_4h_to_h"},
            {"gpt_neox.embed_in.weight", "embed_out.weight"},
        ),
    ],
)
def test_quantized_tensor_names(name: str, quantized: set[str], kept: set[str]) -> None:
    """Layer 0's attention and MLP weights are quantized; embeddings, norms, biases and the LM head
    (tied in GPT-2/OPT/BLOOM, so absent from the tensor list) stay in the model dtype."""
    names = [n for _, n, _ in arch(name).tensors()]
    hits = {n for n in names if QUANTIZABLE.match(n)}
    layer0 = re.compile(r"^.*\.(?:h|layers)\.0\.(.+)\.weight$")
    assert {layer0.match(n).group(1) for n in hits} == quantized
    assert not any(QUANTIZABLE.match(k) for k in kept)
    assert not any(n.endswith(".bias") or "norm" in n or "ln_" in n for n in hits)
    assert ("lm_head.weight" in names) == (name == "EleutherAI--gpt-j-6b")


@pytest.mark.parametrize("name", FAMILIES)
def test_the_planner_and_the_quantizer_share_one_rule(name: str) -> None:
    """The planner counts int8 bytes for exactly the tensors the quantizer converts."""
    from neuronforge.pipeline.planner import _tensor_bytes
    from neuronforge.spec.target import Quantization

    int8 = Quantization(dtype="int8", method="per_tensor_symmetric")
    for _, tensor, shape in arch(name).tensors():
        as_int8 = _tensor_bytes(tensor, shape, 2, int8) < _tensor_bytes(tensor, shape, 2, Quantization())
        assert as_int8 == (bool(QUANTIZABLE.match(tensor)) and len(shape) == 2), tensor


def test_family_fields() -> None:
    gpt2 = arch("openai-community--gpt2-xl")
    assert (gpt2.hidden_size, gpt2.num_heads, gpt2.num_layers, gpt2.max_position_embeddings) == (1600, 25, 48, 1024)
    assert (gpt2.intermediate_size, gpt2.position_field, gpt2.tie_word_embeddings) == (6400, "n_positions", True)
    opt = arch("facebook--opt-30b")
    assert (opt.num_heads, opt.intermediate_size, opt.word_embed_proj_dim, opt.max_position_embeddings) == (
        56,
        28672,
        7168,
        2048,
    )
    bloom = arch("bigscience--bloom-7b1")
    assert (bloom.num_heads, bloom.hidden_size, bloom.position_embedding) == (32, 4096, "alibi")
    assert bloom.max_position_embeddings is None  # ALiBi: no limit from the config
    gptj = arch("EleutherAI--gpt-j-6b")
    assert (gptj.rotary_dim, gptj.qkv_bias, gptj.tie_word_embeddings, gptj.parallel_residual) == (
        64,
        False,
        False,
        True,
    )
    neox = arch("EleutherAI--gpt-neox-20b")
    assert (neox.rotary_dim, neox.parallel_residual, neox.head_dim) == (24, True, 96)  # 96 * 0.25
    assert not arch("EleutherAI--gpt-neox-20b", use_parallel_residual=False).parallel_residual
    assert all(a.num_kv_heads == a.num_heads for a in map(arch, FAMILIES))


def test_bloom_n_embed_alias_and_opt_projection() -> None:
    """BloomConfig reads the older `n_embed` (bloomz-560m's config.json); an OPT whose embeddings are
    narrower than hidden_size (opt-350m) has project_in/out and a post-norm layout."""
    data = config("bigscience--bloom-560m")
    data["n_embed"] = data.pop("hidden_size")
    assert ModelArch.from_config(data).parameter_count() == COUNTS["bigscience--bloom-560m"]
    opt350 = arch("facebook--opt-13b", hidden_size=1024, ffn_dim=4096, num_attention_heads=16, num_hidden_layers=24,
                  word_embed_proj_dim=512, do_layer_norm_before=False)  # fmt: skip
    names = {n for _, n, _ in opt350.tensors()}
    assert {"model.decoder.project_in.weight", "model.decoder.project_out.weight"} <= names
    assert "model.decoder.final_layer_norm.weight" not in names and not opt350.layer_norm_before
    assert opt350.parameter_count() == 331_196_416  # transformers' count for facebook/opt-350m


@pytest.mark.parametrize(
    ("name", "override", "message"),
    [
        ("openai-community--gpt2-xl", {"n_head": 24}, "n_embd 1600 is not divisible by n_head 24"),
        ("EleutherAI--gpt-neox-20b", {"rotary_pct": 1.5}, "rotary_pct must be a number in (0, 1]"),
        ("bigscience--bloom-560m", {"n_layer": "24"}, "n_layer must be a whole number"),
        ("EleutherAI--gpt-j-6b", {"n_positions": 0}, "n_positions = 0 is out of range"),
    ],
)
def test_bad_family_fields(name: str, override: dict, message: str) -> None:
    with pytest.raises(InvalidInput, match=re.escape(message)):
        arch(name, **override)


TINY = {  # each family's own field names, tiny dimensions
    "gpt2": {"n_embd": 32, "n_head": 4, "n_layer": 2, "n_positions": 64, "vocab_size": 128},
    "opt": {"hidden_size": 32, "num_attention_heads": 4, "num_hidden_layers": 2, "ffn_dim": 128,
            "word_embed_proj_dim": 32, "max_position_embeddings": 64, "vocab_size": 128},
    "bloom": {"hidden_size": 32, "n_head": 4, "n_layer": 2, "vocab_size": 128},
    "gptj": {"n_embd": 32, "n_head": 4, "n_layer": 2, "n_positions": 64, "rotary_dim": 4, "vocab_size": 128},
    "gpt_neox": {"hidden_size": 32, "num_attention_heads": 4, "num_hidden_layers": 2, "intermediate_size": 128,
                 "max_position_embeddings": 64, "vocab_size": 128},
}  # fmt: skip


@pytest.mark.parametrize("model_type", sorted(TINY))
def test_a_tiny_checkpoint_of_each_family_verifies(model_type: str, tmp_path: Path) -> None:
    """A checkpoint transformers writes for each family passes the checkpoint verifier, and the planner
    counts the same parameters from its headers as from its config."""
    transformers = pytest.importorskip("transformers")
    from neuronforge.checkpoints.checkpoint import verify_checkpoint
    from neuronforge.common.errors import CheckpointError
    from neuronforge.pipeline.planner import weight_bytes
    from neuronforge.spec.target import Quantization

    cfg = transformers.AutoConfig.for_model(model_type, **TINY[model_type])
    transformers.AutoModelForCausalLM.from_config(cfg).save_pretrained(tmp_path / "m", safe_serialization=True)
    v = verify_checkpoint(tmp_path / "m")
    assert v.arch.model_type == model_type
    headers = weight_bytes(v.arch, "bf16", Quantization(), v.tensors)
    assert headers == weight_bytes(v.arch, "bf16", Quantization())
    # a config that does not belong to the weights is refused
    data = json.loads((tmp_path / "m" / "config.json").read_text())
    layers = {"gpt2": "n_layer", "bloom": "n_layer", "gptj": "n_layer"}.get(model_type, "num_hidden_layers")
    (tmp_path / "m" / "config.json").write_text(json.dumps({**data, layers: 3}))
    with pytest.raises(CheckpointError, match="2 layers"):
        verify_checkpoint(tmp_path / "m")
