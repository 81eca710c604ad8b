"""Checkpoint verification on tiny generated checkpoints and deliberately broken ones."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from neuronforge.checkpoints.checkpoint import verify_checkpoint
from neuronforge.common.errors import CheckpointError
from tests.checkpoints import make_tiny_llama, rewrite_header, safetensors_header


def test_valid_checkpoint_passes(tiny_llama: Path) -> None:
    v = verify_checkpoint(tiny_llama)
    assert v.arch.model_type == "llama" and v.arch.num_layers == 2
    assert "model.embed_tokens.weight" in v.tensors and v.tensors["lm_head.weight"].shape == (128, 64)


def test_sharded_checkpoint_with_index_passes(tmp_path: Path) -> None:
    folder = make_tiny_llama(tmp_path / "sharded", shards=True)
    v = verify_checkpoint(folder)
    assert len({t.file for t in v.tensors.values()}) > 1


def test_truncated_safetensors_is_rejected(tiny_llama: Path) -> None:
    f = tiny_llama / "model.safetensors"
    f.write_bytes(f.read_bytes()[:-100])
    with pytest.raises(CheckpointError, match=r"model.safetensors: .*truncated"):
        verify_checkpoint(tiny_llama)


def test_trailing_bytes_are_rejected(tiny_llama: Path) -> None:
    f = tiny_llama / "model.safetensors"
    f.write_bytes(f.read_bytes() + b"\0" * 16)
    with pytest.raises(CheckpointError, match=r"trailing bytes"):
        verify_checkpoint(tiny_llama)


def test_header_lying_about_sizes_is_rejected(tiny_llama: Path) -> None:
    f = tiny_llama / "model.safetensors"
    header, _ = safetensors_header(f)
    header["model.norm.weight"]["shape"] = [65]  # 65 floats claimed, 64 stored
    rewrite_header(f, header)
    with pytest.raises(CheckpointError, match=r"'model.norm.weight' claims 256 bytes .* lies about sizes"):
        verify_checkpoint(tiny_llama)


def test_header_that_is_not_json_is_rejected(tiny_llama: Path) -> None:
    f = tiny_llama / "model.safetensors"
    raw = bytearray(f.read_bytes())
    raw[8:12] = b"\xff\xfe{{"
    f.write_bytes(bytes(raw))
    with pytest.raises(CheckpointError, match=r"header is not valid JSON"):
        verify_checkpoint(tiny_llama)


def test_index_naming_a_missing_file_is_rejected(tmp_path: Path) -> None:
    folder = make_tiny_llama(tmp_path / "sharded", shards=True)
    index = json.loads((folder / "model.safetensors.index.json").read_text())
    victim = sorted(set(index["weight_map"].values()))[-1]
    (folder / victim).unlink()
    with pytest.raises(CheckpointError, match=rf"names files that do not exist: {victim}"):
        verify_checkpoint(folder)


def test_index_not_covering_every_tensor_is_rejected(tmp_path: Path) -> None:
    folder = make_tiny_llama(tmp_path / "sharded", shards=True)
    path = folder / "model.safetensors.index.json"
    index = json.loads(path.read_text())
    del index["weight_map"]["model.norm.weight"]
    path.write_text(json.dumps(index))
    with pytest.raises(CheckpointError, match=r"does not cover every tensor: 1 unmapped"):
        verify_checkpoint(folder)


def test_missing_config_is_rejected(tiny_llama: Path) -> None:
    (tiny_llama / "config.json").unlink()
    with pytest.raises(CheckpointError, match=r"config.json not found"):
        verify_checkpoint(tiny_llama)


def test_unknown_architecture_is_rejected(tiny_llama: Path) -> None:
    cfg = json.loads((tiny_llama / "config.json").read_text())
    cfg.update(model_type="gpt_bigcode", architectures=["GPTBigCodeForCausalLM"])
    (tiny_llama / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(CheckpointError, match=r"model_type 'gpt_bigcode' .* not an architecture neuronforge knows"):
        verify_checkpoint(tiny_llama)


def test_config_and_weights_that_disagree_are_rejected(tiny_llama: Path) -> None:
    cfg = json.loads((tiny_llama / "config.json").read_text())
    cfg["num_key_value_heads"] = 4  # weights were saved with 2
    (tiny_llama / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(
        CheckpointError, match=r"k_proj.weight' has shape \[32, 64\] but config.json implies \[64, 64\]"
    ):
        verify_checkpoint(tiny_llama)


def test_layer_count_mismatch_is_rejected(tiny_llama: Path) -> None:
    cfg = json.loads((tiny_llama / "config.json").read_text())
    cfg["num_hidden_layers"] = 3
    (tiny_llama / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(CheckpointError, match=r"num_hidden_layers=3"):
        verify_checkpoint(tiny_llama)


def test_dtype_disagreement_is_a_warning(tiny_llama: Path) -> None:
    cfg = json.loads((tiny_llama / "config.json").read_text())
    cfg["torch_dtype"] = "bfloat16"
    (tiny_llama / "config.json").write_text(json.dumps(cfg))
    v = verify_checkpoint(tiny_llama)
    assert any("torch_dtype=bfloat16" in w for w in v.warnings)


def _pickle_only(folder: Path) -> None:
    import torch
    from safetensors.torch import load_file

    state = load_file(folder / "model.safetensors")
    torch.save(state, folder / "pytorch_model.bin")
    (folder / "model.safetensors").unlink()


def test_pickle_only_checkpoint_is_refused_by_default(tiny_llama: Path) -> None:
    _pickle_only(tiny_llama)
    with pytest.raises(CheckpointError, match=r"only pickle weights found \(pytorch_model.bin\).*allow_pickle"):
        verify_checkpoint(tiny_llama)
    assert (tiny_llama / "pytorch_model.bin").exists()  # nothing touched


def test_pickle_allowed_is_converted_to_safetensors(tiny_llama: Path) -> None:
    import torch
    from safetensors.torch import load_file

    before = load_file(tiny_llama / "model.safetensors")
    _pickle_only(tiny_llama)
    v = verify_checkpoint(tiny_llama, allow_pickle=True)
    assert not (tiny_llama / "pytorch_model.bin").exists()
    after = load_file(tiny_llama / "model.safetensors")
    assert set(after) == set(before) and all(torch.equal(after[k], before[k]) for k in before)
    assert any("converted pickle" in w for w in v.warnings)


def test_pickle_with_code_is_refused_even_when_allowed(tiny_llama: Path) -> None:
    import pickle

    class Evil:
        def __reduce__(self):
            return (print, ("pwned",))

    (tiny_llama / "model.safetensors").unlink()
    with open(tiny_llama / "pytorch_model.bin", "wb") as f:
        pickle.dump({"x": Evil()}, f)
    with pytest.raises(CheckpointError, match=r"refused by torch.load\(weights_only=True\)"):
        verify_checkpoint(tiny_llama, allow_pickle=True)
