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

    from neuronforge.tinymodel import make_tiny_tokenizer

    torch.manual_seed(0)
    name, fields = TINY[model_type]
    config = getattr(transformers, name)(vocab_size=128, bos_token_id=1, eos_token_id=2, **{**fields, **overrides})
    model = AutoModelForCausalLM.from_config(config).to(torch.float32).eval()
    model.save_pretrained(dest, safe_serialization=True)
    if tokenizer:
        make_tiny_tokenizer(dest)
    return dest
