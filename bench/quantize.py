"""Streaming quantization vs loading the whole model (NxD's way) vs sha256 of the same files.

Generates a seeded synthetic Llama-shaped checkpoint (TinyLlama-1.1B's shapes by default: 22 layers,
hidden 2048, intermediate 5632, vocab 32000, bf16, ~2.2 GB in ~500 MB shards), then measures, each
in a fresh child process so peak RSS (`ru_maxrss` of the child) is its own:
  (a) neuronforge's streaming quantizer (`stages.quantize.write_quantized`);
  (b) the anchor: what NxD Inference's `save_quantized_state_dict` does — the whole model loaded
      into host memory with transformers (float32, as `from_pretrained` loads by default), then
      `torch.ao.quantization.quantize_dynamic` over every nn.Linear with the same observer, the
      int8 state dict built and saved;
  (c) sha256 over the same files: the disk-speed reference.
Printed: wall time, input GB/s, peak RSS, and the ratios. Goals (issue 5): (a) peak RSS
<= 2 x largest tensor + 500 MB; (a) throughput >= 0.8 x (c); (a) clearly less memory than (b).

    .venv/bin/python bench/quantize.py [--layers 22] [--method per_channel] [--rounds 1]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
GB = 1e9
MIB = 1024**2


def make_checkpoint(dest: Path, layers: int, hidden: int, inter: int, vocab: int, shard_bytes: int) -> int:
    """Seeded random bf16 weights in Llama layout, HF-sharded; returns the largest tensor's bytes."""
    import torch
    from safetensors.torch import save_file

    dest.mkdir(parents=True)
    config = {
        "architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": hidden,
        "intermediate_size": inter, "num_hidden_layers": layers, "num_attention_heads": hidden // 64,
        "num_key_value_heads": 4, "vocab_size": vocab, "max_position_embeddings": 2048, "rms_norm_eps": 1e-5,
        "torch_dtype": "bfloat16", "tie_word_embeddings": False, "hidden_act": "silu",
    }  # fmt: skip
    (dest / "config.json").write_text(json.dumps(config))
    kv = 4 * 64
    shapes = {"model.embed_tokens.weight": (vocab, hidden)}
    for i in range(layers):
        p = f"model.layers.{i}"
        shapes.update({
            f"{p}.self_attn.q_proj.weight": (hidden, hidden), f"{p}.self_attn.k_proj.weight": (kv, hidden),
            f"{p}.self_attn.v_proj.weight": (kv, hidden), f"{p}.self_attn.o_proj.weight": (hidden, hidden),
            f"{p}.mlp.gate_proj.weight": (inter, hidden), f"{p}.mlp.up_proj.weight": (inter, hidden),
            f"{p}.mlp.down_proj.weight": (hidden, inter), f"{p}.input_layernorm.weight": (hidden,),
            f"{p}.post_attention_layernorm.weight": (hidden,),
        })  # fmt: skip
    shapes.update({"model.norm.weight": (hidden,), "lm_head.weight": (vocab, hidden)})
    g = torch.Generator().manual_seed(0)
    shards, current, size = [], {}, 0
    for name, shape in shapes.items():
        t = (torch.randn(shape, generator=g) * 0.02).to(torch.bfloat16)
        if current and size + t.numel() * 2 > shard_bytes:
            shards.append(current)
            current, size = {}, 0
        current[name] = t
        size += t.numel() * 2
    shards.append(current)
    weight_map = {}
    for i, shard in enumerate(shards, 1):
        fname = f"model-{i:05d}-of-{len(shards):05d}.safetensors"
        save_file(shard, dest / fname, metadata={"format": "pt"})
        weight_map.update(dict.fromkeys(shard, fname))
    index = {
        "metadata": {"total_size": sum(v.numel() * 2 for s in shards for v in s.values())},
        "weight_map": weight_map,
    }
    (dest / "model.safetensors.index.json").write_text(json.dumps(index))
    return max(math.prod(shape) * 2 for shape in shapes.values())


# -- the three measured jobs, each run as `python bench/quantize.py --child JOB CKPT OUT METHOD` ----------
def child_streaming(ckpt: Path, out: Path, method: str) -> None:
    from neuronforge.pipeline.stages.quantize import QuantizeRequest
    from neuronforge.pipeline.stages.quantize_tensors import write_quantized
    from neuronforge.spec.source import ModelSource
    from neuronforge.spec.target import Quantization

    q = Quantization.parse(f"int8:{method}")
    req = QuantizeRequest(ckpt, ModelSource.parse(str(ckpt)).pinned("b" * 64), q, "bf16", out.parent)
    write_quantized(req, out)


def child_anchor(ckpt: Path, out: Path, method: str) -> None:
    import torch
    import torch.ao.nn.quantized.dynamic as nnqd
    from safetensors.torch import save_file
    from torch.ao.quantization import QConfig, default_dynamic_qconfig, default_observer
    from transformers import AutoModelForCausalLM

    class PerChannelAbsMax(torch.ao.quantization.observer.UniformQuantizationObserverBase):
        """neuronx-distributed's PerChannelAbsMaxObserver (ch_axis=0)."""

        def __init__(self, **_: object) -> None:
            super().__init__(dtype=torch.qint8, qscheme=torch.per_channel_symmetric)
            self.ch_axis = 0
            self.register_buffer("max_val", torch.tensor([]))

        def forward(self, x):
            self.max_val = torch.amax(torch.abs(torch.flatten(x.detach().float(), start_dim=1)), dim=1, keepdim=True)
            return x

        def calculate_qparams(self):
            scale = torch.max(self.max_val / float(self.quant_max), self.eps)
            return scale.squeeze(1), torch.zeros(scale.shape[0], dtype=torch.int64)

    model = AutoModelForCausalLM.from_pretrained(ckpt)  # float32, the whole model in memory
    if method == "per_channel":
        qconfig = QConfig(activation=default_observer, weight=PerChannelAbsMax)
    else:
        qconfig = default_dynamic_qconfig
    skip = {"lm_head": None}
    qmodel = torch.ao.quantization.quantize_dynamic(
        model,
        qconfig_spec={torch.nn.Linear: qconfig, **skip},
        mapping={torch.nn.Linear: nnqd.Linear},
        dtype=torch.qint8,
    )
    state = {}
    for name, value in qmodel.state_dict().items():
        if name.endswith("_packed_params._packed_params"):
            w = value[0]
            base = name.removesuffix("_packed_params._packed_params")
            state[base + "weight"] = torch.int_repr(w)
            scales = (
                w.q_per_channel_scales() if w.qscheme() == torch.per_channel_affine else torch.tensor([w.q_scale()])
            )
            state[base + "scale"] = (
                scales.to(torch.float32).reshape(-1, 1) if method == "per_channel" else scales.float()
            )
        elif isinstance(value, torch.Tensor) and not name.endswith(("zero_point", "scale", "dtype")):
            state[name] = value.to(torch.bfloat16) if value.is_floating_point() else value
    out.mkdir(parents=True)
    save_file({k: v.contiguous() for k, v in state.items()}, out / "model.safetensors")


def child_sha256(ckpt: Path, out: Path, method: str) -> None:
    from neuronforge.spec.source import sha256_file

    for f in sorted(ckpt.glob("*.safetensors")):
        sha256_file(f)


def child_write(ckpt: Path, out: Path, nbytes: str) -> None:
    """The disk's sequential-write floor for the quantized output's size (64 MiB plain writes)."""
    block = os.urandom(64 * MIB)
    out.mkdir(parents=True)
    left = int(nbytes)
    with open(out / "write-floor.bin", "wb") as f:
        while left > 0:
            f.write(block[: min(left, len(block))])
            left -= len(block)


CHILDREN = {"streaming": child_streaming, "anchor": child_anchor, "sha256": child_sha256, "write": child_write}


def run_child(job: str, ckpt: Path, out: Path, method: str) -> tuple[float, int]:
    """Wall seconds and peak RSS bytes of one job in a fresh process."""
    shutil.rmtree(out, ignore_errors=True)
    code = (
        f"import sys, time; sys.path.insert(0, {str(ROOT)!r}); import bench.quantize as b; "
        f"t = time.perf_counter(); b.CHILDREN[{job!r}](b.Path({str(ckpt)!r}), b.Path({str(out)!r}), {method!r}); "
        "print(time.perf_counter() - t, b.peak_rss())"
    )
    os.sync()
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    if done.returncode:
        raise SystemExit(f"{job} failed:\n{done.stderr[-3000:]}")
    seconds, rss = done.stdout.split()[-2:]
    return float(seconds), int(rss)


def peak_rss() -> int:
    """This process's resident-memory high-water mark (VmHWM). Not `ru_maxrss`: Linux carries the
    parent's high-water mark into a forked child, which would charge it the checkpoint generator's."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError("no VmHWM in /proc/self/status")


def baseline_rss() -> int:
    code = (
        f"import sys; sys.path.insert(0, {str(ROOT)!r}); import torch, safetensors, bench.quantize as b; "
        "print(b.peak_rss())"
    )
    return int(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--layers", type=int, default=22)
    ap.add_argument("--hidden", type=int, default=2048)
    ap.add_argument("--intermediate", type=int, default=5632)
    ap.add_argument("--vocab", type=int, default=32000)
    ap.add_argument("--shard-mib", type=int, default=500)
    ap.add_argument("--method", choices=["per_tensor", "per_channel"], default="per_channel")
    ap.add_argument("--jobs", nargs="+", default=["sha256", "streaming", "write", "anchor"])
    ap.add_argument("--dir", default=None)
    args = ap.parse_args()
    scratch = Path(tempfile.mkdtemp(prefix="nf-bench-quant-", dir=args.dir))
    try:
        ckpt = scratch / "ckpt"
        t0 = time.perf_counter()
        largest = make_checkpoint(ckpt, args.layers, args.hidden, args.intermediate, args.vocab, args.shard_mib * MIB)
        total = sum(p.stat().st_size for p in ckpt.glob("*.safetensors"))
        print(
            f"checkpoint: {total / GB:.2f} GB in {len(list(ckpt.glob('*.safetensors')))} shards, largest tensor "
            f"{largest / MIB:.0f} MiB, generated in {time.perf_counter() - t0:.0f}s; int8 {args.method}; "
            f"{os.cpu_count()} cores; python+torch baseline RSS {baseline_rss() / MIB:.0f} MiB"
        )
        results, out_bytes = {}, int(total * 0.55)
        shm = Path(tempfile.mkdtemp(prefix="nf-bench-quant-", dir="/dev/shm")) if Path("/dev/shm").is_dir() else None
        for job in args.jobs:
            runs = [(job, scratch / f"out-{job}")]
            if job == "streaming" and shm is not None:
                runs.append(("streaming-shm", shm / "out"))  # output in memory: without the disk's write limit
            for label, out in runs:
                seconds, rss = run_child(job, ckpt, out, str(out_bytes) if job == "write" else args.method)
                results[label] = (seconds, rss)
                if label == "streaming":
                    out_bytes = sum(p.stat().st_size for p in out.glob("*.safetensors"))
                shutil.rmtree(out, ignore_errors=True)
                rate = total / GB / seconds
                print(f"  {label:14s} {seconds:7.1f} s  {rate:6.2f} GB/s of input  peak RSS {rss / MIB:7.0f} MiB")
        if shm is not None:
            shutil.rmtree(shm, ignore_errors=True)
        for label in ("streaming", "streaming-shm"):
            if {label, "sha256"} <= results.keys():
                print(f"{label} throughput / sha256: {results['sha256'][0] / results[label][0]:.2f}x (goal >= 0.8)")
        if {"streaming", "write"} <= results.keys():
            print(f"streaming time / writing its output alone: {results['streaming'][0] / results['write'][0]:.2f}x")
        if "streaming" in results:
            bound = 2 * largest + 500 * MIB
            rss = results["streaming"][1]
            print(f"streaming peak RSS {rss / MIB:.0f} MiB vs bound 2 x largest + 500 MB = {bound / MIB:.0f} MiB: "
                  f"{'within' if rss <= bound else 'OVER'}")  # fmt: skip
        if {"streaming", "anchor"} <= results.keys():
            print(f"anchor / streaming peak RSS: {results['anchor'][1] / results['streaming'][1]:.1f}x; "
                  f"wall: {results['anchor'][0] / results['streaming'][0]:.2f}x")  # fmt: skip
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
