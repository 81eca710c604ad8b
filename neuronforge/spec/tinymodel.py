"""Tiny, real checkpoints generated on the spot: the embedded default model of the demo and the
tests (no network, a few hundred KB). transformers' own classes write them, so they are exactly
what `save_pretrained` produces for a full-size model."""

from __future__ import annotations

from pathlib import Path


def make_tiny_tokenizer(dest: Path) -> None:
    """A character-level tokenizer (printable ASCII + 4 specials = 99 ids, fits the 128-id vocab),
    saved in the `tokenizer.json` format every Hugging Face loader reads."""
    import string

    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {"<unk>": 0, "<s>": 1, "</s>": 2, "<pad>": 3}
    for ch in string.printable[:95]:
        vocab.setdefault(ch, len(vocab))
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Split(pattern="", behavior="isolated")
    tok.decoder = decoders.Fuse()
    PreTrainedTokenizerFast(
        tokenizer_object=tok, bos_token="<s>", eos_token="</s>", unk_token="<unk>", pad_token="<pad>"
    ).save_pretrained(dest)


def make_tiny_llama(
    dest: Path, *, seed: int = 0, shards: bool = False, model_type: str = "llama", tokenizer: bool = False
) -> Path:
    """A 2-layer, hidden-64 Llama (or Mistral, or Qwen3) with 4 heads / 2 kv heads, saved as safetensors
    (several shards and an index with `shards=True`), with a tiny tokenizer when asked."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM, MistralConfig, MistralForCausalLM

    torch.manual_seed(seed)
    if model_type == "llama":
        config_cls, model_cls = LlamaConfig, LlamaForCausalLM
    elif model_type == "mistral":
        config_cls, model_cls = MistralConfig, MistralForCausalLM
    elif model_type == "qwen3":
        from transformers import Qwen3Config, Qwen3ForCausalLM

        config_cls, model_cls = Qwen3Config, Qwen3ForCausalLM
    else:
        raise ValueError(f"tiny models exist for llama, mistral and qwen3, not {model_type!r}")
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
    if tokenizer:
        make_tiny_tokenizer(dest)
    return dest
