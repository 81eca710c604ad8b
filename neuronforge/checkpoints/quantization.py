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
from concurrent.futures import Future, ThreadPoolExecutor

import torch

from neuronforge.checkpoints.quantized_names import FP8_BOUNDS
from neuronforge.common.errors import InvalidInput
from neuronforge.spec.target import Quantization

log = logging.getLogger(__name__)
FLOAT32_EPS = torch.finfo(torch.float32).eps
FP8_SCALE_FLOOR = 1e-5  # neuronx-distributed's floor for per-channel fp8 scales
STORAGE_DTYPES: dict[str, torch.dtype] = {
    "int8": torch.int8,
    "f8e4m3": torch.float8_e4m3fn,
    "f8e5m2": torch.float8_e5m2,
}


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
