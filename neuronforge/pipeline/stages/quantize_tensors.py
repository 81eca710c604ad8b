"""The quantize stage's tensor work (torch): plan each tensor's fate, stream the quantized
checkpoint into its shards (`write_quantized`), and the dequantized checkpoint the cpu backend
compiles (`dequantized_checkpoint`). Imported only when a stage quantizes, so that the stage's
declaration (`neuronforge.pipeline.stages.quantize`) stays light where DAG files are parsed."""

from __future__ import annotations

import json
import logging
import shutil
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from math import prod
from pathlib import Path
from typing import Any

import torch
from filelock import FileLock

import neuronforge
from neuronforge.artifacts import layout
from neuronforge.checkpoints.checkpoint import TensorInfo, verify_checkpoint
from neuronforge.checkpoints.formats.safetensors_stream import (
    PlannedTensor,
    ShardWriter,
    StoredTensor,
    plan_shards,
    read_layout,
    read_rows,
    write_index,
)
from neuronforge.checkpoints.quantization import (
    KernelSwitch,
    absmax,
    dequantize,
    per_channel,
    scale_from_absmax,
    storage_dtype,
)
from neuronforge.checkpoints.quantized_names import (
    FP8_BOUNDS,
    QKV_WEIGHT,
    QUANTIZABLE,
    hf_key,
    matches,
    neuron_modules,
    nxd_key,
)
from neuronforge.common.errors import CheckpointError, InvalidInput
from neuronforge.common.progress import step as progress_step
from neuronforge.compilation.backends.child import TOKENIZER_FILES
from neuronforge.pipeline.stages.quantize_request import MIB, QuantizeRequest
from neuronforge.records.checkpoint import CheckpointManifest
from neuronforge.records.local import read_local, write_local
from neuronforge.records.quantized import (
    InputFile,
    QuantizationMade,
    QuantizedManifest,
    QuantizedOrigin,
    TensorReport,
)
from neuronforge.records.tree import StoredFile
from neuronforge.spec.source import list_relative, sha256_file
from neuronforge.spec.target import Quantization

log = logging.getLogger(__name__)
COMPILE_FROM_BYTES = 8 * 1024 * MIB  # the compiled kernel's ~4 s fixed cost pays off above ~4 GB
FLOAT_TORCH = {"BF16": torch.bfloat16, "F16": torch.float16, "F32": torch.float32}
TARGET_DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}
COPIED = ("config.json", *TOKENIZER_FILES)  # beside the weights, as the checkpoint had them
# Tensor names a quantizer leaves behind: such a checkpoint must not be quantized again.
QUANTIZED_MARKERS = (".scale", ".weight_scale", ".qweight", ".qzeros", ".g_idx", ".input_scale")


@dataclass
class _Job:
    info: TensorInfo
    quantize: bool
    outputs: list[PlannedTensor]


def plan(tensors: dict[str, TensorInfo], req: QuantizeRequest) -> list[_Job]:
    """Decide every tensor's fate and refuse bad input, before any tensor is read."""
    if not req.quantization.enabled:
        raise InvalidInput("quantize: quantization is 'none'; use int8, f8e4m3 or f8e5m2")
    if req.dtype not in TARGET_DTYPES:
        raise InvalidInput(
            f"quantize: unknown dtype {req.dtype!r} for the unquantized tensors; use {list(TARGET_DTYPES)}"
        )
    storage = storage_dtype(req.quantization)
    keep = req.not_converted
    used: set[str] = set()
    jobs = []
    for name in sorted(tensors, key=lambda n: (tensors[n].file, n)):
        info = tensors[name]
        if info.dtype in ("I8", "U8", "F8_E4M3", "F8_E5M2") or name.endswith(QUANTIZED_MARKERS):
            raise InvalidInput(
                f"quantize: the checkpoint is already quantized ({name} is {info.dtype}); quantize the original "
                "floating-point checkpoint"
            )
        quantize = bool(QUANTIZABLE.match(name)) and not _kept(name, keep, used)
        if quantize and len(info.shape) != 2:
            raise InvalidInput(
                f"quantize: {name} is to be quantized but has shape {list(info.shape)}; only 2-D weights"
            )
        out = nxd_key(name)
        if quantize:
            scale_shape = (info.shape[0], 1) if per_channel(req.quantization) else (1,)
            outputs = [
                PlannedTensor(out, storage, info.shape),
                PlannedTensor(out.removesuffix(".weight") + ".scale", torch.float32, scale_shape),
            ]
        else:
            outputs = [PlannedTensor(out, TARGET_DTYPES[req.dtype], info.shape)]
        jobs.append(_Job(info, quantize, outputs))
    unused = [m for m in keep if m not in used and m != "lm_head"]  # lm_head: absent when tied
    if unused:
        raise InvalidInput(
            f"quantize: modules_to_not_convert {unused} match no quantized linear; an entry is matched as NxD "
            "Inference matches it, as a substring of the module path in its model (e.g. layers.0.mlp.gate_proj, "
            "layers.0.self_attn.o_proj.o_proj, layers.0.mlp.expert_mlps.mlp_op.gate_up_proj; HF-only names such "
            "as block_sparse_moe or experts.3 never match)"
        )
    return jobs


def _kept(name: str, keep: tuple[str, ...], used: set[str]) -> bool:
    """Whether a quantizable weight stays unquantized: as NxD Inference decides for its module
    (`neuronforge.checkpoints.quantized_names.matches`). An entry that keeps part of one NxD module (q but not
    k, say: q/k/v are one fused Wqkv) is refused, and so is keeping q/k/v under any entry but
    `layers.<i>.self_attn`: NxD Inference's fused-QKV converter concatenates the q/k/v scales
    unless exactly that entry is in the list (models/llama/modeling_llama.py
    `convert_state_dict_to_fused_qkv` @ v0.6.10598), and would fail on the missing scales."""
    paths = neuron_modules(name)
    hits = [matches(p, keep) for p in paths]
    if any(hits) != all(hits):
        raise InvalidInput(
            f"quantize: modules_to_not_convert {list(keep)} keep part of {paths[0]} (NxD Inference fuses "
            "q, k and v into it) but not all of it; keep the layer's attention whole with "
            + paths[0].split(".qkv_proj")[0]
        )
    if not hits[0]:
        return False
    used.update(m for m in keep for p in paths if m in p)
    if (qkv := QKV_WEIGHT.match(name)) and qkv[1] not in keep:
        raise InvalidInput(
            f"quantize: modules_to_not_convert {list(keep)} keep {qkv[1]}'s q/k/v projections without naming "
            f"{qkv[1]} itself; NxD Inference's fused-QKV converter needs exactly {qkv[1]!r} in the list to skip "
            "their scales — list it (once per layer)"
        )
    return True


def _kept_modules(jobs: list[_Job]) -> list[str]:
    """The NxD Inference module paths the checkpoint holds unquantized that NxD would otherwise
    convert: the quantizable linears kept, and lm_head when the checkpoint has one."""
    kept = {p for j in jobs if not j.quantize and QUANTIZABLE.match(j.info.name) for p in neuron_modules(j.info.name)}
    if any(j.info.name == "lm_head.weight" for j in jobs):
        kept.add("lm_head")
    return sorted(kept)


def _row_step(shape: tuple[int, ...], chunk_bytes: int) -> int:
    """Rows per chunk so that one chunk's float32 copy is about `chunk_bytes`."""
    row = max(1, prod(shape[1:]) if len(shape) > 1 else 1) * 4
    return max(1, chunk_bytes // row)


def _chunks(f, t: StoredTensor, chunk_bytes: int):
    """Row chunks of a stored tensor, read with plain file reads (never the whole tensor, and no
    mmap'd file pages counted in our resident memory)."""
    if not t.shape:
        yield read_rows(f, t, 0, 1)
        return
    step = _row_step(t.shape, chunk_bytes)
    for r0 in range(0, t.shape[0], step):
        yield read_rows(f, t, r0, min(t.shape[0], r0 + step))


def _checked_absmax(chunk: torch.Tensor, per_row: bool, name: str) -> torch.Tensor:
    peak = absmax(chunk, per_row)
    if not torch.isfinite(peak).all():  # amax propagates NaN and Inf: no separate pass needed
        raise InvalidInput(f"quantize: {name} holds NaN or Inf weights; the checkpoint is corrupt")
    return peak


def _quantize_tensor(
    f, t: StoredTensor, job: _Job, q: Quantization, writer: ShardWriter, chunk_bytes: int, kernel: KernelSwitch
) -> TensorReport:
    info, (weight_out, scale_out) = job.info, job.outputs
    err = ref = 0.0
    if per_channel(q):
        scales = []
        writer.begin(weight_out.name)
        for chunk in _chunks(f, t, chunk_bytes):
            scale = scale_from_absmax(_checked_absmax(chunk, True, info.name), q)
            qc, e, r = kernel(chunk, scale)
            writer.write(qc)
            scales.append(scale)
            err, ref = err + e, ref + r
        writer.end()
        scale = torch.cat(scales)
    else:
        peak, kept, kept_bytes = torch.zeros(1), [], 0
        for chunk in _chunks(f, t, chunk_bytes):  # pass 1: the tensor's absmax
            peak = torch.maximum(peak, _checked_absmax(chunk, False, info.name))
            kept_bytes += chunk.numel() * chunk.element_size()
            kept = [*kept, chunk] if kept_bytes <= chunk_bytes else []  # a small tensor is not read twice
        scale = scale_from_absmax(peak, q)
        writer.begin(weight_out.name)
        for chunk in kept or _chunks(f, t, chunk_bytes):  # pass 2: quantize
            qc, e, r = kernel(chunk, scale)
            writer.write(qc)
            err, ref = err + e, ref + r
        writer.end()
    writer.begin(scale_out.name)
    writer.write(scale.reshape(scale_out.shape).to(torch.float32))
    writer.end()
    return TensorReport(rel_error=(err / ref) ** 0.5 if ref else 0.0, scale_shape=list(scale_out.shape))


def _cast_tensor(f, t: StoredTensor, job: _Job, writer: ShardWriter, chunk_bytes: int) -> None:
    (out,) = job.outputs
    writer.begin(out.name)
    for chunk in _chunks(f, t, chunk_bytes):
        if chunk.is_floating_point() and chunk.numel():
            _checked_absmax(chunk, False, job.info.name)
        writer.write(chunk.to(out.dtype))
    writer.end()


class _InputHasher(threading.Thread):
    """sha256 of the input shards on a second core while the main thread quantizes (hashlib
    releases the GIL), compared at the end with what the fetch stage recorded."""

    def __init__(self, folder: Path, files: list[str]) -> None:
        super().__init__(daemon=True)
        self.folder, self.files, self.digests, self.error = folder, files, {}, None

    def run(self) -> None:
        try:
            for f in self.files:
                self.digests[f] = sha256_file(self.folder / f)
        except OSError as exc:
            self.error = exc


def _expected_digests(folder: Path) -> dict[str, str]:
    manifest = folder / layout.MANIFEST
    if not manifest.exists():
        return {}
    return {f.path: f.sha256 for f in read_local(CheckpointManifest, manifest).files}


def write_quantized(
    req: QuantizeRequest, out: Path, progress: Callable[[str], None] | None = None
) -> QuantizedManifest:
    """Quantize `req.checkpoint_dir` into the empty folder `out`; returns the manifest (also written
    there, last). No store involved: the benchmark calls this directly."""
    started = time.monotonic()
    verified = verify_checkpoint(req.checkpoint_dir)
    jobs = plan(verified.tensors, req)
    shards = plan_shards([t for j in jobs for t in j.outputs], req.max_shard_bytes)
    inputs = sorted({j.info.file for j in jobs})
    hasher = _InputHasher(req.checkpoint_dir, inputs)
    hasher.start()
    out.mkdir(parents=True)
    by_output = {t.name: s for s in shards for t in s.tensors}
    writers: dict[str, ShardWriter] = {}
    shard_digests: dict[str, str] = {}
    report: dict[str, TensorReport] = {}
    handles: dict[str, Any] = {}
    layouts: dict[str, dict[str, StoredTensor]] = {}
    quantized_bytes = sum(j.info.numel for j in jobs if j.quantize) * 2
    use_compiled = req.kernel == "compiled" or (req.kernel == "auto" and quantized_bytes >= COMPILE_FROM_BYTES)
    first = next((j for j in jobs if j.quantize), None)
    input_dtype = FLOAT_TORCH.get(first.info.dtype, torch.bfloat16) if first else torch.bfloat16
    # Waits for the compile at the first quantized chunk: compiling in the background measured
    # slower on 2 cores (dynamo holds the GIL while the main thread has Python work to do).
    kernel = KernelSwitch(req.quantization, input_dtype, use_compiled, wait=True)
    try:
        with progress_step(f"quantizing {req.source} ({req.quantization.slug})", len(jobs), "tensors") as step:
            for job in jobs:
                shard = by_output[job.outputs[0].name]
                if shard.file not in writers:
                    for done in [w for w in writers.values() if w.shard is not shard]:  # shards are written in order
                        shard_digests[done.shard.file] = done.close()
                        del writers[done.shard.file]
                    writers[shard.file] = ShardWriter(out, shard)
                if job.info.file not in handles:
                    for h in handles.values():  # one input shard open at a time
                        h.close()
                    handles.clear()
                    path = req.checkpoint_dir / job.info.file
                    handles[job.info.file] = open(path, "rb", buffering=0)  # noqa: SIM115 - closed when the next opens
                    layouts[job.info.file] = read_layout(path)
                f, stored = handles[job.info.file], layouts[job.info.file][job.info.name]
                if job.quantize:
                    report[job.outputs[0].name] = _quantize_tensor(
                        f, stored, job, req.quantization, writers[shard.file], req.chunk_bytes, kernel
                    )
                else:
                    _cast_tensor(f, stored, job, writers[shard.file], req.chunk_bytes)
                if progress:
                    progress(job.info.name)
                step.advance()
        for w in writers.values():
            shard_digests[w.shard.file] = w.close()
    finally:
        for h in handles.values():
            h.close()
        for w in writers.values():
            w.abort()
        hasher.join()
    expected = _expected_digests(req.checkpoint_dir)
    changed = [f for f in inputs if f in expected and hasher.digests.get(f) != expected[f]]
    if hasher.error or changed:
        raise CheckpointError(
            f"quantize: the checkpoint changed while it was read ({', '.join(changed) or hasher.error}: sha256 "
            "differs from its MANIFEST.json); fetch it again"
        )
    write_index(out, shards)
    for name in COPIED:
        if (req.checkpoint_dir / name).exists():
            shutil.copyfile(req.checkpoint_dir / name, out / name)
    files = [
        StoredFile(path=rel, size=(out / rel).stat().st_size, sha256=shard_digests.get(rel) or sha256_file(out / rel))
        for rel in list_relative(out)
    ]
    manifest = QuantizedManifest(
        source=QuantizedOrigin(location=req.source.location, revision=req.source.resolved_revision),
        quantization=QuantizationMade(dtype=req.quantization.dtype, method=req.quantization.method),
        dtype=req.dtype,
        modules_to_not_convert=list(req.not_converted),  # what NeuronConfig must be given
        kept_modules=_kept_modules(jobs),
        fp8_max=FP8_BOUNDS.get(req.quantization.dtype),
        inputs=[InputFile(path=f, sha256=hasher.digests.get(f)) for f in inputs],
        files=files,
        tensors=report,
        max_rel_error=max((t.rel_error for t in report.values()), default=0.0),
        kernel_chunks=dict(kernel.chunks),
        seconds=round(time.monotonic() - started, 3),
        neuronforge_version=neuronforge.__version__,
    )
    write_local(manifest, out / layout.MANIFEST)
    return manifest


def dequantized_checkpoint(quantized: Path, out: Path, dtype: str, chunk_bytes: int = 8 * MIB) -> Path:
    """An HF checkpoint holding the dequantized weights (q × scale, in `dtype`) — what the cpu
    backend compiles, so a quantized target runs end to end without Neuron hardware."""
    if (out / "config.json").exists():
        return out
    out.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(str(out.with_name(out.name + ".lock"))):
        if (out / "config.json").exists():
            return out  # another task on this host wrote it while we waited
        tmp = out.with_name(f".{out.name}.{uuid.uuid4().hex[:8]}")
        try:
            _write_dequantized(quantized, tmp, dtype, chunk_bytes)
            shutil.rmtree(out, ignore_errors=True)
            tmp.rename(out)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    return out


def _hf_names_prefixed(quantized: Path) -> bool:
    """Whether the family's HF tensor names start with `model.` (which `nxd_key` stripped), read from
    the config.json the quantized checkpoint carries: its embedding's name says (Llama's
    `model.embed_tokens`, OPT's `model.decoder.embed_tokens`; GPT-2's `transformer.wte`, GPT-NeoX's
    `gpt_neox.embed_in` are not). Without a readable config: prefixed, as every NxD family is."""
    from neuronforge.spec.modelconfig import ModelArch

    try:
        arch = ModelArch.from_config(json.loads((quantized / "config.json").read_text(encoding="utf-8")))
    except (OSError, ValueError, InvalidInput):
        return True
    return arch.embedding_names[0].startswith("model.")


def _write_dequantized(quantized: Path, tmp: Path, dtype: str, chunk_bytes: int) -> None:
    tmp.mkdir(parents=True)
    layouts = {p.name: read_layout(p) for p in sorted(quantized.glob("*.safetensors"))}
    prefixed = _hf_names_prefixed(quantized)
    planned, sources = [], {}
    for f, stored in layouts.items():
        for name, t in stored.items():
            if not name.endswith(".scale"):
                planned.append(PlannedTensor(hf_key(name, prefixed), TARGET_DTYPES[dtype], t.shape))
                sources[hf_key(name, prefixed)] = (f, name)
    shards = plan_shards(planned, 10 * 10**9)
    for shard in shards:
        writer = ShardWriter(tmp, shard)
        for t in shard.tensors:
            f, name = sources[t.name]
            stored = layouts[f]
            with open(quantized / f, "rb") as h:
                scale = None
                scale_name = name.removesuffix(".weight") + ".scale"
                if name.endswith(".weight") and scale_name in stored:
                    scale = read_rows(h, stored[scale_name], 0, stored[scale_name].shape[0])
                writer.begin(t.name)
                r0 = 0
                for chunk in _chunks(h, stored[name], chunk_bytes):
                    if scale is not None:
                        rows = scale[r0 : r0 + chunk.shape[0]] if scale.shape[0] > 1 else scale
                        chunk = dequantize(chunk, rows)
                    writer.write(chunk.to(t.dtype))
                    r0 += chunk.shape[0]
                writer.end()
        writer.close()
    write_index(tmp, shards)
    for name in COPIED:
        if (quantized / name).exists():
            shutil.copyfile(quantized / name, tmp / name)
