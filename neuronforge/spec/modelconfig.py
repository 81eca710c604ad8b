"""What neuronforge understands of a Hugging Face `config.json`: the decoder-only architectures it
can plan for, their dimensions, the parameter tensors they hold and the shapes those must have.

Two kinds of family:
- the Llama layout (llama, mistral, mixtral, qwen2/3, granite, phi3, smollm3): embeddings, N decoder
  layers of attention + gated MLP or mixture-of-experts, RMS norm, LM head;
- the families of the transformers-neuronx guide (gpt2, opt, bloom, gptj, gpt_neox): each with its
  own config field names (GPT-2's `n_embd`/`n_head`/`n_layer`/`n_positions`, OPT's `ffn_dim`/
  `word_embed_proj_dim`, BLOOM's `n_head` and ALiBi, GPT-J's `rotary_dim`, GPT-NeoX's `rotary_pct`/
  `use_parallel_residual`), its own tensor names (`_family_tensors`), biases and LayerNorms.
One tensor list per model (`ModelArch.tensors`) gives the parameter count, the planner's weight bytes
and the checkpoint shape table; `tests/test_modelconfig_families.py` checks it name for name and
shape for shape against transformers' own models built on the meta device from the real configs.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from neuronforge.common.errors import CheckpointError, InvalidInput

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
    "gpt2": "GPT2LMHeadModel",
    "opt": "OPTForCausalLM",
    "bloom": "BloomForCausalLM",
    "gptj": "GPTJForCausalLM",
    "gpt_neox": "GPTNeoXForCausalLM",
}
_QKV_BIAS_BY_DEFAULT = {"qwen2"}
# The families whose layout is not Llama's (their own field and tensor names; LayerNorm with bias).
GPT_FAMILIES = frozenset({"gpt2", "opt", "bloom", "gptj", "gpt_neox"})
# How each family encodes positions: learned tables bound the sequence length, rotary embeddings
# are bounded by the trained max_position_embeddings, ALiBi has no table (no limit from the config).
POSITIONS = {"gpt2": "learned", "opt": "learned", "bloom": "alibi", "gptj": "rotary", "gpt_neox": "rotary"}

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
    max_position_embeddings: int | None
    tie_word_embeddings: bool
    qkv_bias: bool
    num_experts: int  # 0 for dense models
    expert_intermediate_size: int
    torch_dtype: str | None
    # Family details (defaults: the Llama layout). max_position_embeddings above is None for ALiBi
    # (BLOOM): the config sets no position limit.
    position_embedding: str = "rotary"  # rotary | learned | alibi
    rotary_dim: int | None = None  # GPT-J rotary_dim, GPT-NeoX head_dim * rotary_pct; None: whole head
    word_embed_proj_dim: int | None = None  # OPT: embeddings narrower than hidden_size (project_in/out)
    parallel_residual: bool = False  # GPT-NeoX use_parallel_residual (GPT-J's layout is parallel too)
    layer_norm_before: bool = True  # OPT do_layer_norm_before (False: opt-350m's post-norm)
    final_layer_norm: bool = True  # OPT _remove_final_layer_norm inverts it

    @property
    def is_moe(self) -> bool:
        return self.num_experts > 0

    @property
    def position_field(self) -> str:
        """The config field that sets the position limit (GPT-2 and GPT-J: n_positions)."""
        family = _FIELDS.get(self.model_type, {})
        return family.get("positions", ("max_position_embeddings", None))[0]

    @property
    def position_limit(self) -> int | None:
        """The longest sequence the config allows (None: no limit from the config, ALiBi)."""
        return self.max_position_embeddings

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
        if model_type in GPT_FAMILIES:
            return _gpt_family(config, where, model_type, archs)
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
    def tensors(self) -> list[tuple[int, str, tuple[int, ...]]]:
        """Every parameter tensor the config implies, as (how many, name, shape): one layer's tensors
        named with layer 0 (and expert 0), counted once per layer (and expert). The list stays a few
        dozen rows long however many layers or experts a config claims. Tied LM heads are absent
        (the checkpoint does not hold them)."""
        if self.model_type in GPT_FAMILIES:
            return [(k, n.replace("{L}", "0"), s) for k, n, s in _family_tensors(self)]
        return _llama_tensors(self)

    @property
    def embedding_names(self) -> tuple[str, ...]:
        """The token embedding's name(s) in a checkpoint: GPT-2 and BLOOM checkpoints may drop `transformer.`."""
        name = self.tensors()[0][1]
        return (name, name.removeprefix("transformer.")) if name.startswith("transformer.") else (name,)

    @property
    def lm_head_name(self) -> str:
        return "embed_out.weight" if self.model_type == "gpt_neox" else "lm_head.weight"

    @property
    def layer_pattern(self) -> re.Pattern[str]:
        """Matches a decoder layer's tensor name; group 1 is the layer index."""
        if self.model_type not in GPT_FAMILIES:
            return re.compile(r"model\.layers\.(\d+)\.")
        template = next(n for _, n, _ in _family_tensors(self) if "{L}" in n)
        prefix = re.escape(template.split("{L}")[0])
        if template.startswith("transformer."):
            prefix = r"(?:transformer\.)?" + prefix.removeprefix(r"transformer\.")
        return re.compile(prefix + r"(\d+)\.")

    def expected_shapes(self) -> list[tuple[re.Pattern[str], tuple[int, ...]]]:
        """(key pattern, shape) for the tensors whose shape follows from the config."""
        if self.model_type in GPT_FAMILIES:
            rows = []
            for _, name, shape in _family_tensors(self):
                pattern = re.escape(name).replace(r"\{L\}", r"\d+")
                if name.startswith("transformer."):  # GPT-2 and BLOOM checkpoints often drop the prefix
                    pattern = r"(?:transformer\.)?" + pattern.removeprefix(r"transformer\.")
                rows.append((re.compile(pattern + "$"), shape))
            return rows
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
        if self.model_type in GPT_FAMILIES:
            return sum(k * math.prod(s) for k, _, s in self.tensors())
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


# -- the transformers-neuronx guide's families -------------------------------------------------------
# (config field, transformers' default when the field is absent) per family and dimension; the
# defaults are those of transformers' GPT2Config / OPTConfig / BloomConfig / GPTJConfig /
# GPTNeoXConfig, which is what a config.json without the field means.
_FIELDS: dict[str, dict[str, tuple[str, int | None]]] = {
    "gpt2": {
        "hidden": ("n_embd", 768),
        "heads": ("n_head", 12),
        "layers": ("n_layer", 12),
        "positions": ("n_positions", 1024),
        "vocab": ("vocab_size", 50257),
    },
    "opt": {
        "hidden": ("hidden_size", 768),
        "heads": ("num_attention_heads", 12),
        "layers": ("num_hidden_layers", 12),
        "positions": ("max_position_embeddings", 2048),
        "vocab": ("vocab_size", 50272),
        "inter": ("ffn_dim", 3072),
    },
    "bloom": {
        "hidden": ("hidden_size", 64),
        "heads": ("n_head", 8),
        "layers": ("n_layer", 2),
        "vocab": ("vocab_size", 250880),
    },
    "gptj": {
        "hidden": ("n_embd", 4096),
        "heads": ("n_head", 16),
        "layers": ("n_layer", 28),
        "positions": ("n_positions", 2048),
        "vocab": ("vocab_size", 50400),
    },
    "gpt_neox": {
        "hidden": ("hidden_size", 6144),
        "heads": ("num_attention_heads", 64),
        "layers": ("num_hidden_layers", 44),
        "positions": ("max_position_embeddings", 2048),
        "vocab": ("vocab_size", 50432),
        "inter": ("intermediate_size", 24576),
    },
}
# Aliases transformers' configs accept (attribute_map, BloomConfig's `n_embed`).
_ALIASES = {
    "n_embd": ("hidden_size",),
    "n_head": ("num_attention_heads",),
    "n_layer": ("num_hidden_layers",),
    "n_positions": ("max_position_embeddings",),
    "hidden_size": ("n_embed",),
}


def _family_int(config: dict[str, Any], family: str, dim: str, where: str, **kw: Any) -> int:
    name, default = _FIELDS[family][dim]
    for alias in _ALIASES.get(name, ()):
        if config.get(name) is None and config.get(alias) is not None:
            return _int_field(config, alias, where, **kw)
    return _int_field(config, name, where, default=default, **kw)


def _gpt_family(config: dict[str, Any], where: str, model_type: str, archs: list[str]) -> ModelArch:
    hidden = _family_int(config, model_type, "hidden", where)
    heads = _family_int(config, model_type, "heads", where)
    layers = _family_int(config, model_type, "layers", where, maximum=MAX_LAYERS)
    vocab = _family_int(config, model_type, "vocab", where)
    heads_field = _FIELDS[model_type]["heads"][0]
    if hidden % heads:
        raise InvalidInput(
            f"{where}: {_FIELDS[model_type]['hidden'][0]} {hidden} is not divisible by {heads_field} {heads}; "
            "fix config.json"
        )
    head_dim = hidden // heads
    if "inter" in _FIELDS[model_type]:
        inter = _family_int(config, model_type, "inter", where)
    elif model_type in ("gpt2", "gptj"):  # n_inner: null means 4 * n_embd
        inter = _int_field(config, "n_inner", where, default=4 * hidden)
    else:  # BLOOM's MLP is always 4 * hidden_size
        inter = 4 * hidden
    positions = None
    if "positions" in _FIELDS[model_type]:
        positions = _family_int(config, model_type, "positions", where, maximum=MAX_DIM)
    rotary_dim = None
    if model_type == "gptj":
        rotary_dim = _int_field(config, "rotary_dim", where, default=64)  # GPTJConfig's default
    elif model_type == "gpt_neox":
        pct = config.get("rotary_pct", 0.25)
        if isinstance(pct, bool) or not isinstance(pct, int | float) or not 0 < pct <= 1:
            raise InvalidInput(f"{where}: rotary_pct must be a number in (0, 1], got {pct!r}; fix config.json")
        rotary_dim = int(head_dim * pct)  # transformers-neuronx gptneox/config.py: int(head_size * rotary_pct)
    proj = _int_field(config, "word_embed_proj_dim", where, default=hidden) if model_type == "opt" else None
    tie_default = model_type in ("gpt2", "opt", "bloom")  # GPT-J and GPT-NeoX have their own LM head
    dtype = config.get("torch_dtype") or config.get("dtype")
    if dtype is not None and not isinstance(dtype, str):
        raise InvalidInput(f'{where}: torch_dtype must be a string such as "float16", got {dtype!r}')
    return ModelArch(
        model_type=model_type,
        architecture=archs[0] if archs else ARCHITECTURES[model_type],
        hidden_size=hidden,
        num_layers=layers,
        num_heads=heads,
        num_kv_heads=heads,  # multi-head attention: every family here has one kv head per head
        head_dim=head_dim,
        intermediate_size=inter,
        vocab_size=vocab,
        max_position_embeddings=positions,
        tie_word_embeddings=_bool_field(config, "tie_word_embeddings", where, tie_default),
        qkv_bias=model_type != "gptj",
        num_experts=0,
        expert_intermediate_size=inter,
        torch_dtype=dtype,
        position_embedding=POSITIONS[model_type],
        rotary_dim=rotary_dim,
        word_embed_proj_dim=proj,
        parallel_residual=model_type == "gptj"
        or (model_type == "gpt_neox" and _bool_field(config, "use_parallel_residual", where, True)),
        layer_norm_before=_bool_field(config, "do_layer_norm_before", where, True) if model_type == "opt" else True,
        final_layer_norm=not _bool_field(config, "_remove_final_layer_norm", where, False),
    )


def _ln(name: str, h: int, count: int = 1) -> list[tuple[int, str, tuple[int, ...]]]:
    return [(count, f"{name}.weight", (h,)), (count, f"{name}.bias", (h,))]


def _linear(name: str, out: int, inp: int, count: int, bias: bool = True) -> list[tuple[int, str, tuple[int, ...]]]:
    return [(count, f"{name}.weight", (out, inp))] + ([(count, f"{name}.bias", (out,))] if bias else [])


def _family_tensors(arch: ModelArch) -> list[tuple[int, str, tuple[int, ...]]]:
    """The tensors of a GPT-family checkpoint, as transformers names them (`{L}`: the layer index):
    GPT2LMHeadModel, OPTForCausalLM, BloomForCausalLM, GPTJForCausalLM, GPTNeoXForCausalLM."""
    h, i, v, n, mt = arch.hidden_size, arch.intermediate_size, arch.vocab_size, arch.num_layers, arch.model_type
    out: list[tuple[int, str, tuple[int, ...]]] = []
    if mt == "gpt2":  # Conv1D layers: weights stored (in, out)
        out += [(1, "transformer.wte.weight", (v, h)), (1, "transformer.wpe.weight", (arch.max_position_embeddings, h))]
        p = "transformer.h.{L}."
        out += [*_ln(p + "ln_1", h, n), (n, p + "attn.c_attn.weight", (h, 3 * h))]
        out += [(n, p + "attn.c_attn.bias", (3 * h,))]
        out += [(n, p + "attn.c_proj.weight", (h, h)), (n, p + "attn.c_proj.bias", (h,)), *_ln(p + "ln_2", h, n)]
        out += [(n, p + "mlp.c_fc.weight", (h, i)), (n, p + "mlp.c_fc.bias", (i,))]
        out += [(n, p + "mlp.c_proj.weight", (i, h)), (n, p + "mlp.c_proj.bias", (h,)), *_ln("transformer.ln_f", h)]
        head = ("lm_head.weight", (v, h))
    elif mt == "opt":
        e = arch.word_embed_proj_dim or h
        # OPT's learned positions are offset by 2 (OPTLearnedPositionalEmbedding): max + 2 rows
        out += [(1, "model.decoder.embed_tokens.weight", (v, e))]
        out += [(1, "model.decoder.embed_positions.weight", (arch.max_position_embeddings + 2, h))]
        if e != h:
            out += _linear("model.decoder.project_out", e, h, 1, bias=False)
            out += _linear("model.decoder.project_in", h, e, 1, bias=False)
        if arch.layer_norm_before and arch.final_layer_norm:
            out += _ln("model.decoder.final_layer_norm", h)
        p = "model.decoder.layers.{L}."
        for proj in ("k", "v", "q", "out"):
            out += _linear(f"{p}self_attn.{proj}_proj", h, h, n)
        out += _ln(p + "self_attn_layer_norm", h, n) + _linear(p + "fc1", i, h, n) + _linear(p + "fc2", h, i, n)
        out += _ln(p + "final_layer_norm", h, n)
        head = ("lm_head.weight", (v, e))
    elif mt == "bloom":
        out += [(1, "transformer.word_embeddings.weight", (v, h)), *_ln("transformer.word_embeddings_layernorm", h)]
        p = "transformer.h.{L}."
        out += _ln(p + "input_layernorm", h, n) + _linear(p + "self_attention.query_key_value", 3 * h, h, n)
        out += _linear(p + "self_attention.dense", h, h, n) + _ln(p + "post_attention_layernorm", h, n)
        out += _linear(p + "mlp.dense_h_to_4h", i, h, n) + _linear(p + "mlp.dense_4h_to_h", h, i, n)
        out += _ln("transformer.ln_f", h)
        head = ("lm_head.weight", (v, h))
    elif mt == "gptj":
        out += [(1, "transformer.wte.weight", (v, h))]
        p = "transformer.h.{L}."
        out += _ln(p + "ln_1", h, n)
        for proj in ("k", "v", "q", "out"):
            out += _linear(f"{p}attn.{proj}_proj", h, h, n, bias=False)
        out += _linear(p + "mlp.fc_in", i, h, n) + _linear(p + "mlp.fc_out", h, i, n) + _ln("transformer.ln_f", h)
        if not arch.tie_word_embeddings:
            out += [(1, "lm_head.bias", (v,))]
        head = ("lm_head.weight", (v, h))
    else:  # gpt_neox
        out += [(1, "gpt_neox.embed_in.weight", (v, h))]
        p = "gpt_neox.layers.{L}."
        out += _ln(p + "input_layernorm", h, n) + _ln(p + "post_attention_layernorm", h, n)
        out += _linear(p + "attention.query_key_value", 3 * h, h, n) + _linear(p + "attention.dense", h, h, n)
        out += _linear(p + "mlp.dense_h_to_4h", i, h, n) + _linear(p + "mlp.dense_4h_to_h", h, i, n)
        out += _ln("gpt_neox.final_layer_norm", h)
        head = ("embed_out.weight", (v, h))
    if not arch.tie_word_embeddings:
        out.append((1, *head))
    return out


def _llama_tensors(arch: ModelArch) -> list[tuple[int, str, tuple[int, ...]]]:
    """The Llama layout's tensors (one layer, one expert), see `ModelArch.tensors`."""
    h, hd, layers = arch.hidden_size, arch.head_dim, arch.num_layers
    q, kv = arch.num_heads * hd, arch.num_kv_heads * hd
    out: list[tuple[int, str, tuple[int, ...]]] = [(1, "model.embed_tokens.weight", (arch.vocab_size, h))]
    if not arch.tie_word_embeddings:
        out.append((1, "lm_head.weight", (arch.vocab_size, h)))
    out.append((1, "model.norm.weight", (h,)))
    p = "model.layers.0."
    out += [
        (layers, p + "self_attn.q_proj.weight", (q, h)),
        (layers, p + "self_attn.k_proj.weight", (kv, h)),
        (layers, p + "self_attn.v_proj.weight", (kv, h)),
        (layers, p + "self_attn.o_proj.weight", (h, q)),
        (layers, p + "input_layernorm.weight", (h,)),
        (layers, p + "post_attention_layernorm.weight", (h,)),
    ]
    if arch.qkv_bias:
        out += [(layers, p + "self_attn.q_proj.bias", (q,)), (layers, p + "self_attn.k_proj.bias", (kv,))]
        out += [(layers, p + "self_attn.v_proj.bias", (kv,))]
    if arch.is_moe:
        e, n = arch.expert_intermediate_size, layers * arch.num_experts
        out.append((layers, p + "block_sparse_moe.gate.weight", (arch.num_experts, h)))
        ex = f"{p}block_sparse_moe.experts.0."
        out += [(n, ex + "w1.weight", (e, h)), (n, ex + "w3.weight", (e, h)), (n, ex + "w2.weight", (h, e))]
    else:
        i_ = arch.intermediate_size
        out += [(layers, p + "mlp.gate_proj.weight", (i_, h)), (layers, p + "mlp.up_proj.weight", (i_, h))]
        out += [(layers, p + "mlp.down_proj.weight", (h, i_))]
    return out


def load_config(path: Path) -> dict[str, Any]:
    """Read `config.json` from a folder or a file path."""
    path = path / "config.json" if path.is_dir() else path
    if not path.is_file():
        raise CheckpointError(f"{path} not found: a checkpoint needs a Hugging Face config.json")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise CheckpointError(f"{path} is not valid JSON: {exc}") from None
    if not isinstance(data, dict):
        raise CheckpointError(f"{path} must hold a JSON object")
    return data


# GPT-2's Conv1D weights are stored (in, out): their output channels, which per-channel scales
# follow, are the second dimension.
TRANSPOSED_LINEAR = re.compile(r"^(?:transformer\.)?h\.\d+\.(attn\.c_attn|attn\.c_proj|mlp\.c_fc|mlp\.c_proj)\.weight$")


def gqa_strategy(arch: ModelArch, tp: int) -> tuple[str, int]:
    """How NxD Inference lays GQA's kv heads over `tp` cores: (strategy name, effective kv heads
    across all cores). The planner sizes the kv cache with it; profiles render it."""
    kv = arch.num_kv_heads
    if kv % tp == 0:
        return "shard-over-heads", kv
    if tp % kv == 0:
        return "replicate-to-tp", tp
    return "convert-to-mha", arch.num_heads
