"""Weight quantization numerics, bit-identical to what NxD Inference's checkpoint quantizer produces,
and its key naming.

NxD Inference (`save_quantized_state_dict`) runs `torch.ao.quantization.quantize_dynamic` over the
whole model in host memory:
- int8 per tensor: torch's `default_dynamic_qconfig` — a symmetric `MinMaxObserver` (qint8):
  scale = max(|min|, |max|) / 127.5 (half the [-128, 127] range), at least float32 eps; then
  `quantize_per_tensor`: q = clamp(round_half_even(w * (1 / scale)), -128, 127) in float32.
- int8 per channel: neuronx-distributed's `PerChannelAbsMaxObserver(ch_axis=0)`: scale_row =
  max(absmax_row / 127, eps); then `quantize_per_channel`, which multiplies by 1/scale too.
- fp8 (float8_e4m3fn / float8_e5m2): scale = absmax / bound (per tensor, or per row with a 1e-5
  floor); q = clamp(w / scale, -bound, bound) cast to the fp8 dtype. The bound is neuronx-distributed's
  `DtypeBound` (quantization/quantization_config.py @ v2.26.0): ±240 for e4m3 — Neuron's FP8_EXP4,
  whose range is ±240, not the OCP e4m3fn's ±448 (values beyond ±240 may become NaN on the device;
  quantization/README_rescaling_fp8_for_neuron.md) — and torch's finfo max (57344) for e5m2. NxD
  Inference stores e4m3 weights as float8_e4m3fn and compiles with
  `--experimental-unsafe-fp8e4m3fn-as-fp8e4m3` (models/model_wrapper.py @ v0.6.10598), so the bits
  are the same; only the range differs.
These functions compute the same numbers elementwise, so they can run on row chunks of a tensor
(the streaming quantizer never holds a float32 copy of a whole tensor) and do not depend on
torch's quantized tensor types, which torch has deprecated. `tests/test_quantization.py` checks
them bit for bit against `torch.ao.quantization` on the same tensors.
"""

from __future__ import annotations

import functools
import logging
import re
from concurrent.futures import Future, ThreadPoolExecutor

import torch

from neuronforge.errors import InvalidInput
from neuronforge.target import Quantization

log = logging.getLogger(__name__)
FLOAT32_EPS = torch.finfo(torch.float32).eps
FP8_SCALE_FLOOR = 1e-5  # neuronx-distributed's floor for per-channel fp8 scales
STORAGE_DTYPES: dict[str, torch.dtype] = {
    "int8": torch.int8,
    "f8e4m3": torch.float8_e4m3fn,
    "f8e5m2": torch.float8_e5m2,
}
# Linear weights NxD Inference loads quantized (HF names); everything else stays in the target dtype.
QUANTIZABLE = re.compile(
    r"^model\.layers\.\d+\.(self_attn\.(q|k|v|o|qkv)_proj|mlp\.(gate|up|down|gate_up)_proj"
    r"|block_sparse_moe\.experts\.\d+\.w[123]|mlp\.experts\.\d+\.(gate|up|down)_proj)\.weight$"
)


# neuronx-distributed v2.26.0 quantization/quantization_config.py `DtypeBound`: the largest value an
# fp8 weight may hold after scaling. e4m3 is Neuron's ±240 (README_rescaling_fp8_for_neuron.md).
FP8_BOUNDS: dict[str, float] = {"f8e4m3": 240.0, "f8e5m2": float(torch.finfo(torch.float8_e5m2).max)}


def storage_dtype(q: Quantization) -> torch.dtype:
    if not q.enabled:
        raise InvalidInput("quantization is 'none': nothing to quantize")
    return STORAGE_DTYPES[q.dtype]


def per_channel(q: Quantization) -> bool:
    return q.method == "per_channel_symmetric"


def fp8_bound(dtype: str) -> float:
    """The range an fp8 weight is scaled into: Neuron's, not the storage dtype's finfo (whose e4m3fn
    max, 448, overflows Neuron's ±240 e4m3)."""
    return FP8_BOUNDS[dtype]


def scale_from_absmax(absmax: torch.Tensor, q: Quantization) -> torch.Tensor:
    """float32 scale(s) from the absolute maximum — of the tensor ([1]) or of each row ([out, 1])."""
    absmax = absmax.to(torch.float32)
    if q.dtype == "int8":
        scale = absmax / (127.0 if per_channel(q) else 255.0 / 2)
        return torch.clamp(scale, min=FLOAT32_EPS)
    scale = absmax / fp8_bound(q.dtype)  # neuronx-distributed quantize_fp8_per_{tensor,channel}
    if per_channel(q):
        return torch.clamp(scale, min=FP8_SCALE_FLOOR)
    return torch.where(absmax > 0, scale, torch.ones_like(scale))  # an all-zero tensor: no 0/0


def absmax(chunk: torch.Tensor, per_channel: bool) -> torch.Tensor:
    """|max| of a chunk: one value (shape [1]) or one per row (shape [rows, 1])."""
    if per_channel:
        return chunk.abs().amax(dim=1, keepdim=True).to(torch.float32)
    lo, hi = torch.aminmax(chunk)
    return torch.maximum(-lo, hi).to(torch.float32).reshape(1)


def quantize_chunk(chunk: torch.Tensor, scale: torch.Tensor, q: Quantization) -> torch.Tensor:
    """Rows of a weight quantized with `scale` ([1], or [rows, 1] for these rows)."""
    return _quantize_float(chunk.to(torch.float32, copy=True), scale, q)[0]


def _quantize_float(x: torch.Tensor, scale: torch.Tensor, q: Quantization) -> tuple[torch.Tensor, torch.Tensor]:
    """Quantize a float32 buffer in place (overwritten, to keep the passes over memory few): returns
    the quantized tensor and the buffer, which then holds the rounding residual y - q (in units of
    the scale) where y = w * (1 / scale) for int8 or w / scale (clamped) for fp8."""
    if q.dtype == "int8":
        x.mul_(1.0 / scale)
        rounded = torch.round(x).clamp_(-128, 127)
        return rounded.to(torch.int8), x.sub_(rounded)
    storage, bound = storage_dtype(q), fp8_bound(q.dtype)
    x.div_(scale).clamp_(-bound, bound)
    qc = x.to(storage)
    return qc, x.sub_(qc.to(torch.float32))


def quantize_with_error(chunk: torch.Tensor, scale: torch.Tensor, q: Quantization) -> tuple[torch.Tensor, float, float]:
    """`quantize_chunk` plus the chunk's squared error ‖w − deq(q)‖² and squared norm ‖w‖², in
    eager operations, mostly in place (on CPU each is a memory-bound pass)."""
    x = chunk.to(torch.float32, copy=True)
    ref = float(torch.linalg.vector_norm(x)) ** 2
    qc, residual = _quantize_float(x, scale, q)
    err = float(torch.linalg.vector_norm(residual.mul_(scale))) ** 2  # (y - q) * scale = w - deq(q)
    return qc, err, ref


@functools.cache
def fused_kernel(dtype: str):
    """The same computation as `quantize_with_error`, compiled by TorchInductor into one loop per
    chunk (about 6x faster on CPU than the eager operations, which each make a pass over memory).
    `KernelSwitch` checks it against the eager form before using it."""

    def int8(chunk: torch.Tensor, scale: torch.Tensor):
        x = chunk.to(torch.float32)
        qf = torch.clamp(torch.round(x * (1.0 / scale)), -128, 127)
        err = x - qf * scale
        return qf.to(torch.int8), (err * err).sum(), (x * x).sum()

    def fp8(chunk: torch.Tensor, scale: torch.Tensor):
        storage, bound = STORAGE_DTYPES[dtype], fp8_bound(dtype)
        x = chunk.to(torch.float32)
        qc = torch.clamp(x / scale, -bound, bound).to(storage)
        err = x - qc.to(torch.float32) * scale
        return qc, (err * err).sum(), (x * x).sum()

    return torch.compile(int8 if dtype == "int8" else fp8, dynamic=True)


class KernelSwitch:
    """Quantizes chunks with the eager form until the compiled kernel is ready — it compiles on a
    background thread from the start of the run, so its one-time cost (seconds) overlaps real work
    — then switches to it after checking it bit for bit against the eager form on a real chunk.
    Any failure (no C++ compiler, a mismatch) keeps the eager form, which is always right."""

    def __init__(self, q: Quantization, input_dtype: torch.dtype, use_compiled: bool, wait: bool = False) -> None:
        self.q, self.compiled, self.wait = q, None, wait  # wait: block on the compile at the first chunk
        self.chunks = {"compiled": 0, "eager": 0}
        self._future: Future | None = None
        if use_compiled:
            pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="quantize-compile")
            self._future = pool.submit(self._prepare, input_dtype)
            pool.shutdown(wait=False)

    def _prepare(self, input_dtype: torch.dtype):
        kernel = fused_kernel(self.q.dtype)
        rows = 16
        scale = torch.full((rows, 1) if per_channel(self.q) else (1,), 1e-3)
        kernel(torch.full((rows, 64), 0.01, dtype=input_dtype), scale)  # compiles now, off the main thread
        return kernel

    def _take_compiled(self, chunk: torch.Tensor, scale: torch.Tensor):
        future, self._future = self._future, None
        try:
            kernel = future.result()
            got = kernel(chunk, scale)
        except Exception as exc:
            log.warning("quantize: compiled kernel unavailable (%s); staying with eager operations", exc)
            return None
        if not torch.equal(got[0].view(torch.uint8), quantize_chunk(chunk, scale, self.q).view(torch.uint8)):
            log.warning("quantize: compiled kernel differs from the eager definition; staying with eager operations")
            return None
        self.compiled = kernel
        return got

    def __call__(self, chunk: torch.Tensor, scale: torch.Tensor) -> tuple[torch.Tensor, float, float]:
        got = None
        if self._future is not None and (self.wait or self._future.done()):
            got = self._take_compiled(chunk, scale)
        elif self.compiled is not None:
            got = self.compiled(chunk, scale)
        if got is not None:
            self.chunks["compiled"] += 1
            return got[0], float(got[1]), float(got[2])
        self.chunks["eager"] += 1
        return quantize_with_error(chunk, scale, self.q)


def dequantize(q: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    return q.to(torch.float32) * scale


# Where each quantizable HF weight lives in NxD Inference 0.6's own model (the module tree that
# neuronx-distributed's `convert` walks): GroupQueryAttention_QKV holds q/k/v as `qkv_proj.Wqkv`
# (fused_qkv, neuronforge's default) or `qkv_proj.{q,k,v}_proj`, GroupQueryAttention_O holds
# `o_proj.o_proj` (modules/attention/gqa.py, attention_base.py @ v0.6.10598); an MoE layer's experts
# are two fused modules, `mlp.expert_mlps.mlp_op.{gate_up,down}_proj` (the converters in
# models/mixtral/modeling_mixtral.py and models/qwen3_moe/modeling_qwen3_moe.py @ v0.6.10598).
_NEURON_MODULES: tuple[tuple[re.Pattern[str], tuple[str, ...]], ...] = (
    (re.compile(r"^(layers\.\d+\.self_attn)\.([qkv]_proj)$"), (r"\1.qkv_proj.Wqkv", r"\1.qkv_proj.\2")),
    (re.compile(r"^(layers\.\d+\.self_attn)\.o_proj$"), (r"\1.o_proj.o_proj",)),
    (
        re.compile(r"^(layers\.\d+)\.block_sparse_moe\.experts\.\d+\.w[13]$"),
        (r"\1.mlp.expert_mlps.mlp_op.gate_up_proj",),
    ),
    (re.compile(r"^(layers\.\d+)\.block_sparse_moe\.experts\.\d+\.w2$"), (r"\1.mlp.expert_mlps.mlp_op.down_proj",)),
    (re.compile(r"^(layers\.\d+\.mlp)\.experts\.\d+\.(gate|up)_proj$"), (r"\1.expert_mlps.mlp_op.gate_up_proj",)),
    (re.compile(r"^(layers\.\d+\.mlp)\.experts\.\d+\.down_proj$"), (r"\1.expert_mlps.mlp_op.down_proj",)),
)
EXPERT_WEIGHT = re.compile(r"\.(block_sparse_moe|mlp)\.experts\.\d+\.")
QKV_WEIGHT = re.compile(r"^(?:model\.)?(layers\.\d+\.self_attn)\.[qkv]_proj\.weight$")


def module_name(name: str) -> str:
    """A `modules_to_not_convert` entry in the form NxD matches it: without HF's `model.` prefix.

    neuronx-distributed's `convert` (quantization/quantize.py @ v2.26.0) matches each entry as a
    substring of the module's dotted path in the Neuron model, which has no `model.` (that model
    *is* the decoder); NxD Inference's own quantizer matches the same list against the HF names
    (quantization_utils.py `_normalize_modules_to_not_convert_paths`), which contain the prefix-less
    form too. `model.layers.0.mlp` would match only the latter: NxD Inference would then build
    quantized layers for weights left unquantized and fail on the missing scales."""
    return name.removeprefix("model.")


def neuron_modules(hf_weight: str) -> tuple[str, ...]:
    """The dotted path(s) in NxD Inference's model of the module a quantizable HF weight loads into:
    two for q/k/v (fused Wqkv, or not), else one. `modules_to_not_convert` is matched against these."""
    module = nxd_key(hf_weight).removesuffix(".weight")
    for pattern, paths in _NEURON_MODULES:
        if pattern.match(module):
            return tuple(pattern.sub(p, module) for p in paths)
    return (module,)


def matches(path: str, modules_to_not_convert: tuple[str, ...]) -> bool:
    """Whether NxD leaves the module at `path` unconverted: any entry is a substring of the path
    (neuronx-distributed quantization/quantize.py @ v2.26.0,
    `_convert_initialized_float_to_initialized_quantized`)."""
    return any(m in path for m in modules_to_not_convert)


def nxd_key(hf_key: str) -> str:
    """NxD Inference's state-dict names: decoder keys without the `model.` prefix; `lm_head.*` kept."""
    return hf_key.removeprefix("model.")


def hf_key(nxd: str) -> str:
    return nxd if nxd.startswith("lm_head.") else f"model.{nxd}"
