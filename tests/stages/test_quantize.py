"""Stage `quantize`: streamed into NxD Inference's quantized-checkpoint format, reused, refused on bad input."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from safetensors import safe_open
from safetensors.torch import load_file, save_file

from neuronforge.artifacts import layout
from neuronforge.artifacts.localcache import MARKER, lookup_local
from neuronforge.checkpoints.quantization import absmax, quantize_chunk, scale_from_absmax
from neuronforge.checkpoints.quantized_names import QUANTIZABLE
from neuronforge.common.errors import CheckpointError, InvalidInput
from neuronforge.pipeline.stages.fetch import FetchRequest, fetch
from neuronforge.pipeline.stages.quantize import QuantizeRequest, quantize
from neuronforge.pipeline.stages.quantize_tensors import dequantized_checkpoint
from neuronforge.spec.source import ModelSource
from neuronforge.spec.target import Quantization
from neuronforge.stores import open_store
from tests.checkpoints import make_tiny_llama

PER_CHANNEL = Quantization(dtype="int8", method="per_channel_symmetric")


def _fetched(src: Path, tmp_path: Path):
    store = open_store(f"file://{tmp_path / 'store'}")
    return store, fetch(FetchRequest(str(src), tmp_path / "work"), store)


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
            assert result.manifest.tensors[nxd].rel_error < 0.02
        else:  # embeddings, norms, lm_head: kept, cast to the target dtype
            assert got[nxd].dtype == torch.bfloat16 and torch.equal(got[nxd], w.to(torch.bfloat16))
    assert "embed_tokens.weight" in got and "lm_head.weight" in got and "norm.weight" in got
    assert (out / "config.json").exists()
    listed = {f.path for f in result.manifest.files}
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
    from neuronforge.spec.source import ModelSource

    source = ModelSource.parse(str(src)).pinned("d" * 64)
    req = QuantizeRequest(src, source, PER_CHANNEL, "bf16", tmp_path / "work")
    with pytest.raises(InvalidInput, match=message):
        quantize(req, store)
    prefix = layout.quantized_prefix(source, PER_CHANNEL, "bf16")
    assert store.list(prefix) == [] and not (tmp_path / "work" / prefix).exists()
    assert not [p for p in (tmp_path / "work").rglob("*") if p.is_file()]  # no staging leftovers


def test_a_non_2d_tensor_to_quantize_is_refused_before_reading_anything(tmp_path: Path) -> None:
    from neuronforge.checkpoints.checkpoint import TensorInfo
    from neuronforge.pipeline.stages.quantize_tensors import plan
    from neuronforge.spec.source import ModelSource

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


@pytest.mark.parametrize("model_type", ["opt", "gpt2", "bloom", "gptj", "gpt_neox"])
def test_a_dequantized_checkpoint_has_the_originals_names(model_type: str, tmp_path: Path) -> None:
    """The quantized checkpoint drops Llama's and OPT's `model.` (NxD names); dequantizing puts it back
    only where the family had it: GPT-2 / BLOOM / GPT-J (`transformer.`) and GPT-NeoX (`gpt_neox.`)
    names come back as they were, so transformers loads every weight of the reference."""
    from tests.backends.tiny_families import make_tiny

    src = make_tiny(model_type, tmp_path / "m", tokenizer=False)
    store, fetched = _fetched(src, tmp_path)
    result = quantize(_request(fetched, tmp_path, dtype="fp32"), store)
    deq = dequantized_checkpoint(result.local_dir, tmp_path / "deq", "fp32")
    assert set(_load_all(deq)) == set(_load_all(src))
    assert any(n.endswith(".scale") for n in _load_all(result.local_dir))  # something was quantized


@pytest.mark.parametrize("spec", ["int8:per_tensor", "int8:per_channel", "f8e4m3:per_channel"])
def test_the_compiled_kernel_writes_the_same_bytes_as_the_eager_one(spec: str, tmp_path: Path) -> None:
    _store, fetched = _fetched(make_tiny_llama(tmp_path / "m"), tmp_path)
    q = Quantization.parse(spec)
    eager = quantize(_request(fetched, tmp_path, q, chunk_bytes=4096, kernel="eager"), None)
    compiled_req = _request(fetched, tmp_path, q, chunk_bytes=4096, kernel="compiled")
    compiled_req.work_dir = tmp_path / "work-compiled"
    compiled = quantize(compiled_req, None)
    assert eager.manifest.kernel_chunks["compiled"] == 0
    assert compiled.manifest.kernel_chunks["eager"] == 0 and compiled.manifest.kernel_chunks["compiled"] > 10
    for f in eager.local_dir.glob("*.safetensors"):
        assert f.read_bytes() == (compiled.local_dir / f.name).read_bytes()
    for name, report in eager.manifest.tensors.items():
        assert compiled.manifest.tensors[name].rel_error == pytest.approx(report.rel_error, rel=1e-4)


def _quantization(spec: str = "int8:per_channel", keep: tuple[str, ...] = ()) -> Quantization:
    parsed = Quantization.parse(spec)
    return Quantization(dtype=parsed.dtype, method=parsed.method, modules_to_not_convert=keep)


def test_the_targets_modules_to_not_convert_are_kept_and_recorded(tmp_path: Path) -> None:
    """The pipeline passes only the target's Quantization: its list is what NeuronConfig is given
    (neuronx-distributed v2.26.0 quantization/quantize.py matches each entry as a substring of the
    module path, which has no `model.`), so the quantizer keeps exactly those modules."""
    store, fetched = _fetched(make_tiny_llama(tmp_path / "m"), tmp_path)
    q = _quantization(keep=("model.layers.1.mlp",))
    result = quantize(QuantizeRequest(fetched.local_dir, fetched.source, q, "bf16", tmp_path / "work"), store)
    got = _load_all(result.local_dir)
    for proj in ("gate_proj", "up_proj", "down_proj"):
        assert got[f"layers.1.mlp.{proj}.weight"].dtype == torch.bfloat16 and f"layers.1.mlp.{proj}.scale" not in got
        assert got[f"layers.0.mlp.{proj}.weight"].dtype == torch.int8 and f"layers.0.mlp.{proj}.scale" in got
    assert got["layers.1.self_attn.q_proj.weight"].dtype == torch.int8
    assert got["lm_head.weight"].dtype == torch.bfloat16 and "lm_head.scale" not in got
    assert result.manifest.modules_to_not_convert == ["layers.1.mlp", "lm_head"]
    assert result.manifest.kept_modules == [
        "layers.1.mlp.down_proj",
        "layers.1.mlp.gate_proj",
        "layers.1.mlp.up_proj",
        "lm_head",
    ]
    stored = json.loads((result.local_dir / layout.MANIFEST).read_text())
    assert stored["schema_version"] == 2 and "-keep" in result.prefix


def test_the_store_prefix_tells_kept_lists_and_the_fp8_range_apart(tmp_path: Path) -> None:
    def variant(spec: str = "int8:per_channel", keep: tuple[str, ...] = (), extra: tuple[str, ...] = ()) -> str:
        q = _quantization(spec, keep)
        return QuantizeRequest(tmp_path, ModelSource.parse(str(tmp_path)), q, "bf16", tmp_path, extra).variant

    assert variant() == variant(keep=("lm_head",)) == "bf16"  # what earlier versions wrote for int8
    lists = [("mlp",), ("layers.0.mlp",), ("layers.1.mlp",), ("layers.0.self_attn", "layers.1.self_attn")]
    assert len({variant(keep=k) for k in lists} | {variant()}) == len(lists) + 1
    # Spellings NxD Inference matches the same way share the files; the CLI's list adds to the target's.
    assert variant(keep=("model.layers.0.mlp",)) == variant(keep=("layers.0.mlp", "lm_head"))
    assert variant(extra=("layers.0.mlp",)) == variant(keep=("layers.0.mlp",))
    # e4m3 checkpoints scaled to the OCP ±448 (earlier versions) are never reused.
    assert variant("f8e4m3") == "bf16-fp8max240" and variant("f8e5m2") == "bf16"


@pytest.mark.parametrize(
    ("keep", "message"),
    [
        (("q_proj",), "keep part of layers.0.self_attn.qkv_proj.Wqkv"),  # q/k/v are one fused module
        (("self_attn",), "needs exactly 'layers.0.self_attn'"),  # modeling_llama.py convert_state_dict_to_fused_qkv
        (("block_sparse_moe",), "match no quantized linear"),  # an HF-only name NxD never matches
    ],
)
def test_lists_nxd_inference_would_load_wrongly_are_refused(keep, message, tmp_path: Path) -> None:
    from neuronforge.checkpoints.checkpoint import verify_checkpoint
    from neuronforge.pipeline.stages.quantize_tensors import plan

    src = make_tiny_llama(tmp_path / "m")
    req = QuantizeRequest(src, ModelSource.parse(str(src)), _quantization(keep=keep), "bf16", tmp_path)
    with pytest.raises(InvalidInput, match=message):
        plan(verify_checkpoint(src).tensors, req)


@pytest.mark.parametrize("method", ["per_tensor_symmetric", "per_channel_symmetric"])
def test_f8e4m3_checkpoint_and_its_dequantized_reference_use_the_240_range(method: str, tmp_path: Path) -> None:
    """neuronx-distributed v2.26.0 README_rescaling_fp8_for_neuron.md / DtypeBound: e4m3 on Neuron is
    ±240; the cpu smoke test's dequantized reference is q × the same scales."""
    store, fetched = _fetched(make_tiny_llama(tmp_path / "m"), tmp_path)
    original = _load_all(fetched.local_dir)
    q = Quantization(dtype="f8e4m3", method=method)
    result = quantize(_request(fetched, tmp_path, q, dtype="fp32"), store)
    assert result.manifest.fp8_max == 240.0 and result.prefix.endswith("-fp8max240")
    got = _load_all(result.local_dir)
    deq = dequantized_checkpoint(result.local_dir, tmp_path / "deq", "fp32")
    with safe_open(str(deq / "model.safetensors"), framework="pt") as f:
        for name, w in original.items():
            if not QUANTIZABLE.match(name):
                continue
            nxd = name.removeprefix("model.")
            qw, scale = got[nxd].to(torch.float32), got[nxd.replace(".weight", ".scale")]
            peak = (
                w.float().abs().amax(dim=1, keepdim=True)
                if q.method == "per_channel_symmetric"
                else w.float().abs().max()
            )
            assert torch.allclose(scale, torch.clamp(peak / 240, min=1e-5).reshape(scale.shape))
            assert qw.abs().max() == 240.0 and (qw.abs() <= 240).all()
            assert torch.equal(f.get_tensor(name), qw * scale)
            assert torch.allclose(f.get_tensor(name), w.float(), rtol=0.07, atol=float(scale.max()) * 8)


def test_the_files_copied_from_the_checkpoint_are_copied_inside_the_store(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The config and tokenizer the quantized checkpoint shares with the checkpoint are copied from the
    checkpoint's mirror inside the store, not uploaded a second time."""
    store, fetched = _fetched(make_tiny_llama(tmp_path / "src", tokenizer=True), tmp_path)
    copies: list[tuple[str, str]] = []
    copy_keys = store.copy_keys
    monkeypatch.setattr(store, "copy_keys", lambda pairs: copies.extend(pairs) or copy_keys(pairs))
    result = quantize(_request(fetched, tmp_path), store)
    mirror = layout.checkpoint_prefix(fetched.source)
    copied = {dst.rsplit("/", 1)[1]: src for src, dst in copies}
    assert {"config.json", "tokenizer.json"} <= set(copied)
    assert all(src == f"{mirror}/{name}" for name, src in copied.items())
    assert not any(name.endswith(".safetensors") for name in copied)  # the quantized weights are new bytes
    for name in copied:
        assert store.get_bytes(f"{result.prefix}/{name}") == (fetched.local_dir / name).read_bytes()
