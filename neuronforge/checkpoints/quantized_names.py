"""Which weights NxD Inference loads quantized and under which names: the tensor and module naming
the quantizer, the NxD Inference backend and the `vllm-neuron` profile's rules share, and the fp8
ranges. Pure data and string rules (no torch), so profile declarations and the DAG files that read
them stay light; the numerics are `neuronforge.checkpoints.quantization`'s.
"""

from __future__ import annotations

import re

# Linear weights NxD Inference loads quantized (HF names); everything else stays in the target dtype.
QUANTIZABLE = re.compile(
    r"^model\.layers\.\d+\.(self_attn\.(q|k|v|o|qkv)_proj|mlp\.(gate|up|down|gate_up)_proj"
    r"|block_sparse_moe\.experts\.\d+\.w[123]|mlp\.experts\.\d+\.(gate|up|down)_proj)\.weight$"
    # the transformers-neuronx guide's families (transformers' names; GPT-2 and BLOOM checkpoints may
    # drop the `transformer.` prefix): attention and MLP linears. Embeddings, position tables,
    # LayerNorms, biases, OPT's project_in/out and the LM head (tied to the embeddings in GPT-2, OPT
    # and BLOOM; GPT-J's lm_head, GPT-NeoX's embed_out) stay in the model dtype — what
    # transformers-neuronx's int8 weight quantization covers too (attention and MLP weights only).
    r"|^(?:transformer\.)?h\.\d+\.(attn\.c_attn|attn\.c_proj|mlp\.c_fc|mlp\.c_proj)\.weight$"
    r"|^model\.decoder\.layers\.\d+\.(self_attn\.(q|k|v|out)_proj|fc1|fc2)\.weight$"
    r"|^(?:transformer\.)?h\.\d+\.(self_attention\.(query_key_value|dense)|mlp\.(dense_h_to_4h|dense_4h_to_h))\.weight$"
    r"|^transformer\.h\.\d+\.(attn\.(q|k|v|out)_proj|mlp\.(fc_in|fc_out))\.weight$"
    r"|^gpt_neox\.layers\.\d+\.(attention\.(query_key_value|dense)|mlp\.(dense_h_to_4h|dense_4h_to_h))\.weight$"
)

# neuronx-distributed v2.26.0 quantization/quantization_config.py `DtypeBound`: the largest value an
# fp8 weight may hold after scaling. e4m3 is Neuron's ±240 (README_rescaling_fp8_for_neuron.md); e5m2
# is torch.finfo(torch.float8_e5m2).max (tests/test_quantization.py checks it against torch).
FP8_BOUNDS: dict[str, float] = {"f8e4m3": 240.0, "f8e5m2": 57344.0}


# Where each quantizable HF weight lives in NxD Inference 0.6's own model (the module tree that
# neuronx-distributed's `convert` walks): GroupQueryAttention_QKV holds q/k/v as `qkv_proj.Wqkv`
# (fused_qkv, neuronforge's default but for per-tensor targets) or `qkv_proj.{q,k,v}_proj`, GroupQueryAttention_O holds
# `o_proj.o_proj` (modules/attention/gqa.py, attention_base.py @ v0.6.10598); an MoE layer's experts
# are two fused modules, `mlp.expert_mlps.mlp_op.{gate_up,down}_proj` (the converters in
# models/mixtral/modeling_mixtral.py and models/qwen3_moe/modeling_qwen3_moe.py @ v0.6.10598).
_NEURON_MODULES: tuple[tuple[re.Pattern[str], tuple[str, ...]], ...] = (
    (re.compile(r"^(layers\.\d+\.self_attn)\.([qkv]_proj)$"), (r"\1.qkv_proj.Wqkv", r"\1.qkv_proj.\2")),
    (re.compile(r"^(layers\.\d+\.self_attn)\.o_proj$"), (r"\1.o_proj.o_proj",)),
    (
        re.compile(r"^(layers\.\d+)\.block_sparse_moe\.experts\.\d+\.w[13]$"),
        (r"\1.mlp.expert_mlps.mlp_op.gate_up_proj",),
    ),
    (re.compile(r"^(layers\.\d+)\.block_sparse_moe\.experts\.\d+\.w2$"), (r"\1.mlp.expert_mlps.mlp_op.down_proj",)),
    (re.compile(r"^(layers\.\d+\.mlp)\.experts\.\d+\.(gate|up)_proj$"), (r"\1.expert_mlps.mlp_op.gate_up_proj",)),
    (re.compile(r"^(layers\.\d+\.mlp)\.experts\.\d+\.down_proj$"), (r"\1.expert_mlps.mlp_op.down_proj",)),
)
EXPERT_WEIGHT = re.compile(r"\.(block_sparse_moe|mlp)\.experts\.\d+\.")
QKV_WEIGHT = re.compile(r"^(?:model\.)?(layers\.\d+\.self_attn)\.[qkv]_proj\.weight$")


def module_name(name: str) -> str:
    """A `modules_to_not_convert` entry in the form NxD matches it: without HF's `model.` prefix.

    neuronx-distributed's `convert` (quantization/quantize.py @ v2.26.0) matches each entry as a
    substring of the module's dotted path in the Neuron model, which has no `model.` (that model
    *is* the decoder); NxD Inference's own quantizer matches the same list against the HF names
    (quantization_utils.py `_normalize_modules_to_not_convert_paths`), which contain the prefix-less
    form too. `model.layers.0.mlp` would match only the latter: NxD Inference would then build
    quantized layers for weights left unquantized and fail on the missing scales."""
    return name.removeprefix("model.")


def neuron_modules(hf_weight: str) -> tuple[str, ...]:
    """The dotted path(s) in NxD Inference's model of the module a quantizable HF weight loads into:
    two for q/k/v (fused Wqkv, or not), else one. `modules_to_not_convert` is matched against these."""
    module = nxd_key(hf_weight).removesuffix(".weight")
    for pattern, paths in _NEURON_MODULES:
        if pattern.match(module):
            return tuple(pattern.sub(p, module) for p in paths)
    return (module,)


def matches(path: str, modules_to_not_convert: tuple[str, ...]) -> bool:
    """Whether NxD leaves the module at `path` unconverted: any entry is a substring of the path
    (neuronx-distributed quantization/quantize.py @ v2.26.0,
    `_convert_initialized_float_to_initialized_quantized`)."""
    return any(m in path for m in modules_to_not_convert)


def nxd_key(hf_key: str) -> str:
    """NxD Inference's state-dict names: decoder keys without the `model.` prefix; `lm_head.*` kept."""
    return hf_key.removeprefix("model.")


def hf_key(nxd: str, prefixed: bool = True) -> str:
    """The HF name of an NxD state-dict name. `prefixed`: the family's HF names carry `model.` (Llama
    and its kin, OPT's `model.decoder.`); GPT-2, BLOOM, GPT-J (`transformer.`) and GPT-NeoX
    (`gpt_neox.`) names never did, so `nxd_key` left them as they were."""
    return nxd if not prefixed or nxd.startswith("lm_head.") else f"model.{nxd}"
