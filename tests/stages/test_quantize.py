"""Stage `quantize`: streamed into NxD Inference's quantized-checkpoint format, reused, refused on bad input."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from safetensors import safe_open
from safetensors.torch import load_file, save_file

from neuronforge import layout
from neuronforge.errors import CheckpointError, InvalidInput
from neuronforge.localcache import MARKER, lookup_local
from neuronforge.quantization import QUANTIZABLE, absmax, quantize_chunk, scale_from_absmax
from neuronforge.stages.fetch import FetchRequest, fetch
from neuronforge.stages.quantize import QuantizeRequest, dequantized_checkpoint, quantize
from neuronforge.stores import open_store
from neuronforge.target import Quantization
from tests.checkpoints import make_tiny_llama

PER_CHANNEL = Quantization(dtype="int8", method="per_channel_symmetric")


def _fetched(src: Path, tmp_path: Path):
    store = open_store(f"file://{tmp_path / 'store'}")
    return store, fetch(FetchRequest(str(src), store.root_uri, tmp_path / "work"), store)


def _request(fetched, tmp_path: Path, q: Quantization = PER_CHANNEL, **kw) -> QuantizeRequest:
    return QuantizeRequest(fetched.local_dir, fetched.source, q, kw.pop("dtype", "bf16"), tmp_path / "work", **kw)


def _load_all(folder: Path) -> dict[str, torch.Tensor]:
    out = {}
    for f in sorted(folder.glob("*.safetensors")):
        out.update(load_file(f))
    return out


def test_streamed_output_is_nxd_format_and_matches_whole_tensor_quantization(tmp_path: Path) -> None:
    src = make_tiny_llama(tmp_path / "m", shards=True)
    original = _load_all(src)
    store, fetched = _fetched(src, tmp_path)
    # Tiny shards and chunks force the multi-shard and multi-chunk paths.
    result = quantize(_request(fetched, tmp_path, max_shard_bytes=40_000, chunk_bytes=1024), store)
    out = result.local_dir
    assert not result.reused and result.ref is not None and out == lookup_local(result.ref, tmp_path / "work")
    assert result.prefix.endswith("/int8_per_channel-bf16")
    index = json.loads((out / "model.safetensors.index.json").read_text())
    assert len(set(index["weight_map"].values())) > 1
    got = _load_all(out)
    assert set(index["weight_map"]) == set(got)
    quantized = [k for k in original if QUANTIZABLE.match(k)]
    assert quantized and len(got) == len(original) + len(quantized)  # one scale per quantized weight
    for name, w in original.items():
        nxd = name.removeprefix("model.")
        if name in quantized:
            scale = scale_from_absmax(absmax(w.float(), True), PER_CHANNEL)
            assert torch.equal(got[nxd], quantize_chunk(w, scale, PER_CHANNEL))
            assert got[nxd].dtype == torch.int8 and torch.equal(got[nxd.replace(".weight", ".scale")], scale)
            assert result.manifest["tensors"][nxd]["rel_error"] < 0.02
        else:  # embeddings, norms, lm_head: kept, cast to the target dtype
            assert got[nxd].dtype == torch.bfloat16 and torch.equal(got[nxd], w.to(torch.bfloat16))
    assert "embed_tokens.weight" in got and "lm_head.weight" in got and "norm.weight" in got
    assert (out / "config.json").exists()
    listed = {f["path"] for f in result.manifest["files"]}
    assert listed == {p.name for p in out.iterdir()} - {layout.MANIFEST, MARKER}
    assert store.exists(f"{result.prefix}/{layout.MANIFEST}")

    again = quantize(_request(fetched, tmp_path, max_shard_bytes=40_000, chunk_bytes=1024), store)
    assert again.reused and again.local_dir == out
    # Another worker with an empty work dir reuses the store's copy.
    other = QuantizeRequest(fetched.local_dir, fetched.source, PER_CHANNEL, "bf16", tmp_path / "work2")
    assert quantize(other, store).reused


def test_modules_to_not_convert_and_per_tensor_fp8(tmp_path: Path) -> None:
    store, fetched = _fetched(make_tiny_llama(tmp_path / "m"), tmp_path)
    q = Quantization(dtype="f8e4m3", method="per_tensor_symmetric")
    result = quantize(_request(fetched, tmp_path, q, dtype="fp32", modules_to_not_convert=("mlp",)), store)
    got = _load_all(result.local_dir)
    assert got["layers.0.self_attn.q_proj.weight"].dtype == torch.float8_e4m3fn
    assert got["layers.0.self_attn.q_proj.scale"].shape == (1,)
    assert got["layers.0.mlp.up_proj.weight"].dtype == torch.float32 and "layers.0.mlp.up_proj.scale" not in got
    assert "-keep" in result.prefix


def _write_variant(src: Path, dest: Path, change) -> Path:
    dest.mkdir()
    for f in src.iterdir():
        if f.suffix != ".safetensors":
            (dest / f.name).write_bytes(f.read_bytes())
    tensors = load_file(src / "model.safetensors")
    change(tensors)
    save_file(tensors, dest / "model.safetensors")
    return dest


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda t: t.__setitem__("model.layers.0.mlp.up_proj.scale", torch.ones(1)), "already quantized"),
        (lambda t: t["model.layers.1.mlp.down_proj.weight"].__setitem__((0, 0), float("nan")), "NaN or Inf"),
    ],
)
def test_bad_input_is_refused_and_nothing_reaches_the_final_location(change, message, tmp_path: Path) -> None:
    src = _write_variant(make_tiny_llama(tmp_path / "m"), tmp_path / "bad", change)
    store = open_store(f"file://{tmp_path / 'store'}")
    from neuronforge.source import ModelSource

    source = ModelSource.parse(str(src)).pinned("d" * 64)
    req = QuantizeRequest(src, source, PER_CHANNEL, "bf16", tmp_path / "work")
    with pytest.raises(InvalidInput, match=message):
        quantize(req, store)
    prefix = layout.quantized_prefix(source, PER_CHANNEL, "bf16")
    assert store.list(prefix) == [] and not (tmp_path / "work" / prefix).exists()
    assert not [p for p in (tmp_path / "work").rglob("*") if p.is_file()]  # no staging leftovers


def test_a_non_2d_tensor_to_quantize_is_refused_before_reading_anything(tmp_path: Path) -> None:
    from neuronforge.checkpoint import TensorInfo
    from neuronforge.source import ModelSource
    from neuronforge.stages.quantize import plan

    tensors = {
        "model.layers.0.mlp.experts.0.up_proj.weight": TensorInfo("model.layers.0.mlp.experts.0.up_proj.weight",
                                                                  "BF16", (4, 16, 64), "model.safetensors"),
    }  # fmt: skip
    req = QuantizeRequest(tmp_path, ModelSource.parse(str(tmp_path)), PER_CHANNEL, "bf16", tmp_path)
    with pytest.raises(InvalidInput, match=r"has shape \[4, 16, 64\]; only 2-D"):
        plan(tensors, req)
    with pytest.raises(InvalidInput, match="unknown dtype 'int4'"):
        plan({}, QuantizeRequest(tmp_path, ModelSource.parse(str(tmp_path)), PER_CHANNEL, "int4", tmp_path))
    with pytest.raises(InvalidInput, match="quantization is 'none'"):
        plan({}, QuantizeRequest(tmp_path, ModelSource.parse(str(tmp_path)), Quantization(), "bf16", tmp_path))


def test_a_checkpoint_that_changes_under_us_is_refused(tmp_path: Path) -> None:
    store, fetched = _fetched(make_tiny_llama(tmp_path / "m"), tmp_path)
    manifest = json.loads((fetched.local_dir / layout.MANIFEST).read_text())
    for f in manifest["files"]:  # what the fetch recorded no longer matches the file's bytes
        if f["path"].endswith(".safetensors"):
            f["sha256"] = "0" * 64
    (fetched.local_dir / layout.MANIFEST).write_text(json.dumps(manifest))
    req = _request(fetched, tmp_path)
    with pytest.raises(CheckpointError, match="changed while it was read"):
        quantize(req, store)
    assert store.list(layout.quantized_prefix(fetched.source, PER_CHANNEL, "bf16")) == []


def test_dequantized_checkpoint_holds_q_times_scale(tmp_path: Path) -> None:
    store, fetched = _fetched(make_tiny_llama(tmp_path / "m"), tmp_path)
    result = quantize(_request(fetched, tmp_path, dtype="fp32"), store)
    deq = dequantized_checkpoint(result.local_dir, tmp_path / "deq", "fp32")
    q = _load_all(result.local_dir)
    with safe_open(str(deq / "model.safetensors"), framework="pt") as f:
        w = f.get_tensor("model.layers.0.mlp.gate_proj.weight")
        assert torch.equal(w, q["layers.0.mlp.gate_proj.weight"].float() * q["layers.0.mlp.gate_proj.scale"])
        assert "model.layers.0.mlp.gate_proj.scale" not in f.keys()  # noqa: SIM118
    from transformers import AutoModelForCausalLM

    AutoModelForCausalLM.from_pretrained(deq)  # a plain HF checkpoint again


@pytest.mark.parametrize("spec", ["int8:per_tensor", "int8:per_channel", "f8e4m3:per_channel"])
def test_the_compiled_kernel_writes_the_same_bytes_as_the_eager_one(spec: str, tmp_path: Path) -> None:
    _store, fetched = _fetched(make_tiny_llama(tmp_path / "m"), tmp_path)
    q = Quantization.parse(spec)
    eager = quantize(_request(fetched, tmp_path, q, chunk_bytes=4096, kernel="eager"), None)
    compiled_req = _request(fetched, tmp_path, q, chunk_bytes=4096, kernel="compiled")
    compiled_req.work_dir = tmp_path / "work-compiled"
    compiled = quantize(compiled_req, None)
    assert eager.manifest["kernel_chunks"]["compiled"] == 0
    assert compiled.manifest["kernel_chunks"]["eager"] == 0 and compiled.manifest["kernel_chunks"]["compiled"] > 10
    for f in eager.local_dir.glob("*.safetensors"):
        assert f.read_bytes() == (compiled.local_dir / f.name).read_bytes()
    for name, report in eager.manifest["tensors"].items():
        assert compiled.manifest["tensors"][name]["rel_error"] == pytest.approx(report["rel_error"], rel=1e-4)
