"""What neuronforge understands of a Hugging Face `config.json`: the decoder-only architectures it
can plan for, their dimensions, the parameter tensors they hold and the shapes those must have.

The families below share the Llama layout (embeddings, N decoder layers of attention + MLP or
mixture-of-experts, final norm, LM head), which is what lets one formula count parameters and one
table check checkpoint shapes.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from neuronforge.errors import CheckpointError, InvalidInput

# model_type -> the architectures[] class name transformers writes
ARCHITECTURES: dict[str, str] = {
    "llama": "LlamaForCausalLM",
    "mistral": "MistralForCausalLM",
    "mixtral": "MixtralForCausalLM",
    "qwen2": "Qwen2ForCausalLM",
    "qwen3": "Qwen3ForCausalLM",
    "qwen3_moe": "Qwen3MoeForCausalLM",
    "granite": "GraniteForCausalLM",
    "phi3": "Phi3ForCausalLM",
    "smollm3": "SmolLM3ForCausalLM",
}
_QKV_BIAS_BY_DEFAULT = {"qwen2"}

# Upper bounds on what a config.json may claim: far above any real model (the largest published
# hidden sizes are ~2**14, layer counts ~2**7, expert counts ~2**8), low enough that the planner's
# arithmetic stays exact and its per-layer loops stay short.
MAX_DIM = 2**31
MAX_LAYERS = 10_000
MAX_EXPERTS = 4096


def _int_field(
    config: dict[str, Any],
    name: str,
    where: str,
    *,
    default: int | None = None,
    minimum: int = 1,
    maximum: int = MAX_DIM,
) -> int:
    """A whole number in [minimum, maximum]: an integral float (`2.0`) is accepted, a fraction, a
    boolean, a string, NaN/infinity (`1e999` in JSON) or an out-of-range number is refused."""
    value = config.get(name)
    if value is None:
        if default is None:
            raise InvalidInput(f"{where}: required field {name!r} is missing; add it to config.json")
        return default
    whole: int | None = None
    if isinstance(value, int) and not isinstance(value, bool):
        whole = value
    elif isinstance(value, float) and math.isfinite(value) and value.is_integer():
        whole = int(value)
    if whole is None:
        kind = type(value).__name__
        if isinstance(value, float) and not math.isfinite(value):
            kind = "JSON NaN, or a number too large for a float (1e999) read as infinity"
        raise InvalidInput(f"{where}: {name} must be a whole number, got {value!r} ({kind}); fix config.json")
    if not minimum <= whole <= maximum:
        raise InvalidInput(
            f"{where}: {name} = {value!r} is out of range: it must be between {minimum} and {maximum}; fix config.json"
        )
    return whole


def _bool_field(config: dict[str, Any], name: str, where: str, default: bool) -> bool:
    value = config.get(name)
    if value is None:
        return default
    if not isinstance(value, bool):
        raise InvalidInput(f"{where}: {name} must be true or false, got {value!r}; fix config.json")
    return value


@dataclass(frozen=True)
class ModelArch:
    """The dimensions the planner and the checkpoint verifier need."""

    model_type: str
    architecture: str
    hidden_size: int
    num_layers: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    intermediate_size: int
    vocab_size: int
    max_position_embeddings: int
    tie_word_embeddings: bool
    qkv_bias: bool
    num_experts: int  # 0 for dense models
    expert_intermediate_size: int
    torch_dtype: str | None

    @property
    def is_moe(self) -> bool:
        return self.num_experts > 0

    @classmethod
    def from_config(cls, config: dict[str, Any], where: str = "config.json") -> ModelArch:
        model_type = config.get("model_type")
        archs = config.get("architectures") or []
        if not isinstance(model_type, str) or model_type not in ARCHITECTURES:
            known = ", ".join(sorted(ARCHITECTURES))
            raise InvalidInput(
                f"{where}: model_type {model_type!r} (architectures {archs}) is not an architecture "
                f"neuronforge knows; supported model types: {known}"
            )
        if not isinstance(archs, list) or not all(isinstance(a, str) for a in archs):
            raise InvalidInput(
                f"{where}: architectures must be a list of class names, got {archs!r}; "
                f'fix config.json (e.g. ["{ARCHITECTURES[model_type]}"])'
            )
        hidden = _int_field(config, "hidden_size", where)
        heads = _int_field(config, "num_attention_heads", where)
        layers = _int_field(config, "num_hidden_layers", where, maximum=MAX_LAYERS)
        inter = _int_field(config, "intermediate_size", where)
        vocab = _int_field(config, "vocab_size", where)
        kv_heads = _int_field(config, "num_key_value_heads", where, default=heads)
        if kv_heads > heads or heads % kv_heads:
            raise InvalidInput(
                f"{where}: num_attention_heads {heads} is not a multiple of num_key_value_heads {kv_heads}; "
                "each key/value head must serve a whole group of attention heads: fix config.json"
            )
        if config.get("head_dim") is None and hidden % heads:
            raise InvalidInput(
                f"{where}: hidden_size {hidden} is not divisible by num_attention_heads {heads} and no head_dim "
                "is given; fix config.json (or set head_dim)"
            )
        head_dim = _int_field(config, "head_dim", where, default=hidden // heads)
        max_pos = _int_field(config, "max_position_embeddings", where, default=2048)
        experts_field = "num_local_experts" if config.get("num_local_experts") else "num_experts"
        experts = _int_field(config, experts_field, where, default=0, minimum=0, maximum=MAX_EXPERTS)
        expert_inter = _int_field(config, "moe_intermediate_size", where, default=inter)
        dtype = config.get("torch_dtype") or config.get("dtype")
        if dtype is not None and not isinstance(dtype, str):
            raise InvalidInput(f'{where}: torch_dtype must be a string such as "bfloat16", got {dtype!r}')
        return cls(
            model_type=model_type,
            architecture=archs[0] if archs else ARCHITECTURES[model_type],
            hidden_size=hidden,
            num_layers=layers,
            num_heads=heads,
            num_kv_heads=kv_heads,
            head_dim=head_dim,
            intermediate_size=inter,
            vocab_size=vocab,
            max_position_embeddings=max_pos,
            tie_word_embeddings=_bool_field(config, "tie_word_embeddings", where, False),
            qkv_bias=_bool_field(config, "attention_bias", where, model_type in _QKV_BIAS_BY_DEFAULT),
            num_experts=experts,
            expert_intermediate_size=expert_inter,
            torch_dtype=dtype,
        )

    # -- parameter tensors ----------------------------------------------------------------------
    def expected_shapes(self) -> list[tuple[re.Pattern[str], tuple[int, ...]]]:
        """(key pattern, shape) for the tensors whose shape follows from the config."""
        h, hd, i, e = self.hidden_size, self.head_dim, self.intermediate_size, self.expert_intermediate_size
        q, kv = self.num_heads * hd, self.num_kv_heads * hd
        layer = r"model\.layers\.\d+\."
        rows = [
            (r"model\.embed_tokens\.weight", (self.vocab_size, h)),
            (r"lm_head\.weight", (self.vocab_size, h)),
            (layer + r"self_attn\.q_proj\.weight", (q, h)),
            (layer + r"self_attn\.k_proj\.weight", (kv, h)),
            (layer + r"self_attn\.v_proj\.weight", (kv, h)),
            (layer + r"self_attn\.o_proj\.weight", (h, q)),
            (layer + r"self_attn\.qkv_proj\.weight", (q + 2 * kv, h)),
            (layer + r"mlp\.gate_proj\.weight", (i, h)),
            (layer + r"mlp\.up_proj\.weight", (i, h)),
            (layer + r"mlp\.down_proj\.weight", (h, i)),
            (layer + r"mlp\.gate_up_proj\.weight", (2 * i, h)),
            (layer + r"block_sparse_moe\.experts\.\d+\.w[13]\.weight", (i, h)),
            (layer + r"block_sparse_moe\.experts\.\d+\.w2\.weight", (h, i)),
            (layer + r"block_sparse_moe\.gate\.weight", (self.num_experts, h)),
            (layer + r"mlp\.experts\.\d+\.(gate|up)_proj\.weight", (e, h)),
            (layer + r"mlp\.experts\.\d+\.down_proj\.weight", (h, e)),
            (layer + r"mlp\.gate\.weight", (self.num_experts, h)),
        ]
        if self.is_moe and self.model_type == "qwen3_moe":  # dense `mlp.*_proj` do not exist there
            rows = [r for r in rows if "mlp\\.gate_proj" not in r[0] and "mlp\\.up_proj" not in r[0]]
        return [(re.compile(p + r"$"), s) for p, s in rows]

    def parameter_count(self) -> int:
        """Parameters from the config alone (used when no safetensors headers are at hand)."""
        h, hd, layers = self.hidden_size, self.head_dim, self.num_layers
        q, kv = self.num_heads * hd, self.num_kv_heads * hd
        attn = h * q + 2 * h * kv + q * h + (q + 2 * kv if self.qkv_bias else 0)
        if self.is_moe:
            mlp = self.num_experts * 3 * h * self.expert_intermediate_size + self.num_experts * h
        else:
            mlp = 3 * h * self.intermediate_size
        norms = 2 * h
        embed = self.vocab_size * h
        head = 0 if self.tie_word_embeddings else self.vocab_size * h
        return embed + head + h + layers * (attn + mlp + norms)


def load_config(path: Path) -> dict[str, Any]:
    """Read `config.json` from a folder or a file path."""
    path = path / "config.json" if path.is_dir() else path
    if not path.is_file():
        raise CheckpointError(f"{path} not found: a checkpoint needs a Hugging Face config.json")
    try:
        data = json.loads(path.read_text())
    except json.JSONDecodeError as exc:
        raise CheckpointError(f"{path} is not valid JSON: {exc}") from None
    if not isinstance(data, dict):
        raise CheckpointError(f"{path} must hold a JSON object")
    return data


# Linear weights that weight quantization converts (NxD Inference quantizes decoder linears and
# keeps embeddings, norms and the LM head in the model dtype).
QUANTIZED_LINEAR = re.compile(
    r"^model\.layers\.\d+\.(self_attn\.(q|k|v|o|qkv)_proj|mlp\.(gate|up|down|gate_up)_proj"
    r"|block_sparse_moe\.experts\.\d+\.w[123]|mlp\.experts\.\d+\.(gate|up|down)_proj)\.weight$"
)


def gqa_strategy(arch: ModelArch, tp: int) -> tuple[str, int]:
    """How NxD Inference lays GQA's kv heads over `tp` cores: (strategy name, effective kv heads
    across all cores). The planner sizes the kv cache with it; profiles render it."""
    kv = arch.num_kv_heads
    if kv % tp == 0:
        return "shard-over-heads", kv
    if tp % kv == 0:
        return "replicate-to-tp", tp
    return "convert-to-mha", arch.num_heads
