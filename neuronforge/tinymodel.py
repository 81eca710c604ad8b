"""Tiny, real checkpoints generated on the spot: the embedded default model of the demo and the
tests (no network, a few hundred KB). transformers' own classes write them, so they are exactly
what `save_pretrained` produces for a full-size model."""

from __future__ import annotations

from pathlib import Path


def make_tiny_llama(dest: Path, *, seed: int = 0, shards: bool = False, model_type: str = "llama") -> Path:
    """A 2-layer, hidden-64 Llama (or Mistral) with 4 heads / 2 kv heads, saved as safetensors
    (several shards and an index with `shards=True`)."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM, MistralConfig, MistralForCausalLM

    torch.manual_seed(seed)
    if model_type == "llama":
        config_cls, model_cls = LlamaConfig, LlamaForCausalLM
    elif model_type == "mistral":
        config_cls, model_cls = MistralConfig, MistralForCausalLM
    else:
        raise ValueError(f"tiny models exist for llama and mistral, not {model_type!r}")
    config = config_cls(
        vocab_size=128,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=256,
        tie_word_embeddings=False,
    )
    model = model_cls(config).to(torch.float32).eval()
    model.save_pretrained(dest, safe_serialization=True, max_shard_size="60KB" if shards else "10GB")
    return dest
