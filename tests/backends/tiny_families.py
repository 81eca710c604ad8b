"""Tiny real checkpoints of the transformers-neuronx families LMI serves besides Llama (GPT-2, OPT,
BLOOM, GPT-J, GPT-NeoX, Mistral, Mixtral): written by transformers' own classes, a few hundred KB."""

from __future__ import annotations

from pathlib import Path
from typing import Any

# model_type -> (transformers config class, its tiny fields); vocab 128 fits the tiny tokenizer
TINY: dict[str, tuple[str, dict[str, Any]]] = {
    "gpt2": ("GPT2Config", {"n_embd": 32, "n_layer": 2, "n_head": 4, "n_positions": 256}),
    "opt": (
        "OPTConfig",
        {"hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 4, "ffn_dim": 128,
         "max_position_embeddings": 256, "word_embed_proj_dim": 32},
    ),
    "bloom": ("BloomConfig", {"hidden_size": 32, "n_layer": 2, "n_head": 4}),
    "gptj": ("GPTJConfig", {"n_embd": 32, "n_layer": 2, "n_head": 4, "rotary_dim": 4, "n_positions": 256}),
    "gpt_neox": (
        "GPTNeoXConfig",
        {"hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 4, "intermediate_size": 128,
         "max_position_embeddings": 256},
    ),
    "mistral": (
        "MistralConfig",
        {"hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
         "intermediate_size": 64, "max_position_embeddings": 256},
    ),
    "mixtral": (
        "MixtralConfig",
        {"hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
         "intermediate_size": 64, "max_position_embeddings": 256, "num_local_experts": 2},
    ),
}  # fmt: skip


def make_tiny(model_type: str, dest: Path, *, tokenizer: bool = True, **overrides: Any) -> Path:
    """A tiny `model_type` checkpoint (safetensors, float32) in `dest`, with the tiny tokenizer."""
    import torch
    import transformers
    from transformers import AutoModelForCausalLM

    from neuronforge.spec.tinymodel import make_tiny_tokenizer

    torch.manual_seed(0)
    name, fields = TINY[model_type]
    config = getattr(transformers, name)(vocab_size=128, bos_token_id=1, eos_token_id=2, **{**fields, **overrides})
    model = AutoModelForCausalLM.from_config(config).to(torch.float32).eval()
    model.save_pretrained(dest, safe_serialization=True)
    if tokenizer:
        make_tiny_tokenizer(dest)
    return dest


# Fields that size a model (and its token ids, which must fit the tiny tokenizer): what `make_scaled`
# takes from TINY; every other field of the real config (activation, rotary fraction, parallel residual,
# tied embeddings, ALiBi, layer-norm placement, ...) is kept as the real model has it.
SIZE_FIELDS = frozenset({
    "n_embd", "n_layer", "n_head", "n_positions", "n_ctx", "n_inner", "hidden_size", "num_hidden_layers",
    "num_attention_heads", "num_key_value_heads", "intermediate_size", "ffn_dim", "word_embed_proj_dim",
    "max_position_embeddings", "rotary_dim", "vocab_size", "bos_token_id", "eos_token_id", "pad_token_id",
    "unk_token_id", "num_local_experts", "torch_dtype", "_name_or_path", "transformers_version", "architectures",
})  # fmt: skip


def make_scaled(real_config: Path, dest: Path, **overrides: Any) -> Path:
    """A tiny checkpoint of the family of `real_config` (a real model's config.json): its own fields,
    scaled down to TINY's sizes (vocab 128, the tiny tokenizer's bos/eos; a pad id that fits is kept)."""
    import json

    real = json.loads(real_config.read_text())
    kept = {k: v for k, v in real.items() if k not in SIZE_FIELDS and k != "model_type"}
    pad = real.get("pad_token_id")
    if isinstance(pad, int) and pad < 128:
        kept["pad_token_id"] = pad
    if real["model_type"] == "gpt2" and "n_ctx" in real:
        kept["n_ctx"] = TINY["gpt2"][1]["n_positions"]
    return make_tiny(real["model_type"], dest, **{**kept, **overrides})
