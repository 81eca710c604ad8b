"""Generators of tiny checkpoints (real transformers models, a few hundred KB) and of broken ones."""

from __future__ import annotations

import json
import struct
from pathlib import Path


def make_tiny_llama(dest: Path, *, seed: int = 0, shards: bool = False, model_type: str = "llama") -> Path:
    """A 2-layer, hidden-64 Llama (or Mistral) saved with `save_pretrained` as safetensors."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM, MistralConfig, MistralForCausalLM

    torch.manual_seed(seed)
    cls_cfg, cls_model = (
        (LlamaConfig, LlamaForCausalLM) if model_type == "llama" else (MistralConfig, MistralForCausalLM)
    )
    config = cls_cfg(
        vocab_size=128,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=256,
        tie_word_embeddings=False,
    )
    model = cls_model(config).to(torch.float32).eval()
    model.save_pretrained(dest, safe_serialization=True, max_shard_size="60KB" if shards else "10GB")
    return dest


def safetensors_header(path: Path) -> tuple[dict, int]:
    raw = path.read_bytes()
    (n,) = struct.unpack("<Q", raw[:8])
    return json.loads(raw[8 : 8 + n]), n


def rewrite_header(path: Path, header: dict) -> None:
    """Replace a safetensors header keeping the data section (used to make a lying header)."""
    raw = path.read_bytes()
    (n,) = struct.unpack("<Q", raw[:8])
    data = raw[8 + n :]
    new = json.dumps(header, separators=(",", ":")).encode()
    new += b" " * ((8 - len(new) % 8) % 8)
    path.write_bytes(struct.pack("<Q", len(new)) + new + data)
