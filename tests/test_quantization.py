"""Quantization numerics, bit for bit against the reference methods NxD Inference uses:
torch.ao's dynamic quantization (per tensor), neuronx-distributed's PerChannelAbsMaxObserver +
torch's quantize (per channel, the observer re-stated here from its source), and its fp8 formulas."""

from __future__ import annotations

import warnings

import hypothesis.strategies as st
import pytest
import torch
from hypothesis import given, settings

from neuronforge.checkpoints.quantization import absmax, dequantize, quantize_chunk, scale_from_absmax
from neuronforge.checkpoints.quantized_names import hf_key, nxd_key
from neuronforge.spec.target import Quantization

warnings.filterwarnings("ignore", message=".*quantize_per_.*deprecated.*")


def _reference_int8_per_tensor(w: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """What `save_quantized_state_dict` stores: quantize_dynamic(default_dynamic_qconfig) over nn.Linear."""
    import torch.ao.nn.quantized.dynamic as nnqd
    from torch.ao.quantization import default_dynamic_qconfig

    lin = torch.nn.Linear(w.shape[1], w.shape[0], bias=False)
    lin.weight.data = w.clone()
    lin.qconfig = default_dynamic_qconfig
    qw = nnqd.Linear.from_float(lin).weight()
    return qw.int_repr(), torch.tensor([qw.q_scale()])


class _PerChannelAbsMax(torch.ao.quantization.observer.UniformQuantizationObserverBase):
    """neuronx-distributed's PerChannelAbsMaxObserver (ch_axis=0), re-stated for the test."""

    def __init__(self) -> None:
        super().__init__(dtype=torch.qint8, qscheme=torch.per_channel_symmetric)
        self.ch_axis = 0
        self.register_buffer("max_val", torch.tensor([]))

    def forward(self, x):
        self.max_val = torch.amax(torch.abs(torch.flatten(x.detach().float(), start_dim=1)), dim=1, keepdim=True)
        return x

    def calculate_qparams(self):
        scale = torch.max(self.max_val / float(self.quant_max), self.eps)
        return scale.squeeze(1), torch.zeros(scale.shape[0], dtype=torch.int64)


def _reference_int8_per_channel(w: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    from torch.ao.nn.quantized.dynamic.modules.linear import _quantize_weight

    obs = _PerChannelAbsMax()
    obs(w)
    qw = _quantize_weight(w.float(), obs)
    return qw.int_repr(), qw.q_per_channel_scales().to(torch.float32).view(-1, 1)


# neuronx-distributed v2.26.0 quantization/quantization_config.py `DtypeBound`, re-stated: Neuron's
# e4m3 (FP8_EXP4) is bounded at ±240, not the OCP e4m3fn's 448 (README_rescaling_fp8_for_neuron.md).
_DTYPE_BOUND = {torch.float8_e4m3fn: 240.0, torch.float8_e5m2: torch.finfo(torch.float8_e5m2).max}


def _reference_fp8(w: torch.Tensor, dtype: torch.dtype, per_channel: bool) -> tuple[torch.Tensor, torch.Tensor]:
    """neuronx-distributed v2.26.0 quantization_utils.py quantize_fp8_per_tensor / quantize_fp8_per_channel."""
    fmax = _DTYPE_BOUND[dtype]
    if per_channel:
        t = w.to(torch.float32)
        scales = torch.max(torch.amax(torch.abs(t), dim=1, keepdim=True) / fmax, torch.ones(w.shape[0], 1) * 1e-05)
        return torch.clamp(t / scales, -fmax, fmax).to(dtype), scales
    scale = torch.max(torch.abs(w)) / fmax
    return torch.clamp(w / scale, -fmax, fmax).to(dtype), scale.reshape(1)


def _ours(w: torch.Tensor, q: Quantization, rows_per_chunk: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Chunked like the streaming quantizer: per-tensor absmax over all chunks, then each chunk."""
    pc = q.method == "per_channel_symmetric"
    chunks = list(w.split(rows_per_chunk))
    if pc:
        scales = [scale_from_absmax(absmax(c, True), q) for c in chunks]
        return torch.cat([quantize_chunk(c, s, q) for c, s in zip(chunks, scales, strict=True)]), torch.cat(scales)
    peak = torch.stack([absmax(c, False) for c in chunks]).amax(0)
    scale = scale_from_absmax(peak, q)
    return torch.cat([quantize_chunk(c, scale, q) for c in chunks]), scale


def _weights(rows: int, cols: int, seed: int, spread: float) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    w = torch.randn(rows, cols, generator=g) * spread
    w[seed % rows] *= 40  # an outlier row, as real checkpoints have
    return w.to(torch.bfloat16).to(torch.float32)  # checkpoints are bf16; NxD quantizes the fp32 upcast


shapes = st.tuples(st.integers(1, 96), st.integers(1, 300), st.integers(0, 10_000), st.sampled_from([1e-3, 0.02, 3.0]))


@settings(max_examples=60, deadline=None)
@given(shapes, st.integers(1, 40))
def test_int8_per_tensor_is_bit_identical_to_torch_dynamic_quantization(shape, rows_per_chunk) -> None:
    w = _weights(*shape)
    ref_q, ref_scale = _reference_int8_per_tensor(w)
    q, scale = _ours(w, Quantization(dtype="int8", method="per_tensor_symmetric"), rows_per_chunk)
    assert torch.equal(q, ref_q) and torch.equal(scale, ref_scale)


@settings(max_examples=60, deadline=None)
@given(shapes, st.integers(1, 40))
def test_int8_per_channel_is_bit_identical_to_the_abs_max_observer(shape, rows_per_chunk) -> None:
    w = _weights(*shape)
    ref_q, ref_scale = _reference_int8_per_channel(w)
    q, scale = _ours(w, Quantization(dtype="int8", method="per_channel_symmetric"), rows_per_chunk)
    assert torch.equal(q, ref_q) and torch.equal(scale, ref_scale)


@pytest.mark.parametrize("dtype", ["f8e4m3", "f8e5m2"])
@pytest.mark.parametrize("method", ["per_tensor_symmetric", "per_channel_symmetric"])
@settings(max_examples=25, deadline=None)
@given(shape=shapes, rows_per_chunk=st.integers(1, 40))
def test_fp8_matches_neuronx_distributed(dtype: str, method: str, shape, rows_per_chunk) -> None:
    q = Quantization(dtype=dtype, method=method)
    w = _weights(*shape)
    storage = {"f8e4m3": torch.float8_e4m3fn, "f8e5m2": torch.float8_e5m2}[dtype]
    ref_q, ref_scale = _reference_fp8(w, storage, method == "per_channel_symmetric")
    got_q, got_scale = _ours(w, q, rows_per_chunk)
    assert got_q.dtype == storage
    assert torch.equal(got_q.view(torch.uint8), ref_q.view(torch.uint8)) and torch.equal(got_scale, ref_scale)


@pytest.mark.parametrize("method", ["per_tensor_symmetric", "per_channel_symmetric"])
def test_f8e4m3_uses_neurons_240_range_not_ocp_448(method: str) -> None:
    """neuronx-distributed v2.26.0 quantization/README_rescaling_fp8_for_neuron.md: values beyond ±240
    may become NaN on Neuron; DtypeBound.F8E4M3_MAX = 240 for both per-tensor and per-channel scales."""
    q = Quantization(dtype="f8e4m3", method=method)
    w = _weights(32, 64, 7, 0.02)
    got_q, scale = _ours(w, q, 8)
    peak = w.abs().amax(dim=1, keepdim=True) if method == "per_channel_symmetric" else w.abs().max().reshape(1)
    assert torch.equal(scale, torch.clamp(peak / 240.0, min=1e-5) if method == "per_channel_symmetric" else peak / 240)
    values = got_q.to(torch.float32)
    assert values.abs().max() == 240.0  # the tensor's (or each row's) peak lands on the bound
    assert (values.abs() <= 240.0).all()
    # Values scaled past the bound clamp to ±240 (they would reach 448 in e4m3fn otherwise).
    clamped = quantize_chunk(torch.tensor([[1.0, -3.0, 0.5]]), torch.tensor([1 / 240]), q)
    assert clamped.to(torch.float32).tolist() == [[240.0, -240.0, 120.0]]


def test_round_trip_error_is_small_and_reported_in_scale_units() -> None:
    w = _weights(64, 128, 1, 0.02)
    q = Quantization(dtype="int8", method="per_channel_symmetric")
    qw, scale = _ours(w, q, 16)
    assert scale.shape == (64, 1) and qw.dtype == torch.int8
    assert (dequantize(qw, scale) - w).abs().le(scale * 0.5001).all()  # half a step (+ float rounding)


def test_all_zero_fp8_tensor_gets_a_finite_scale() -> None:
    q = Quantization(dtype="f8e4m3", method="per_tensor_symmetric")
    scale = scale_from_absmax(absmax(torch.zeros(4, 4), False), q)
    assert torch.equal(scale, torch.ones(1)) and not quantize_chunk(torch.zeros(4, 4), scale, q).float().any()


def test_nxd_key_names() -> None:
    assert nxd_key("model.layers.0.self_attn.q_proj.weight") == "layers.0.self_attn.q_proj.weight"
    assert nxd_key("lm_head.weight") == "lm_head.weight" and hf_key("lm_head.weight") == "lm_head.weight"
    assert hf_key("embed_tokens.weight") == "model.embed_tokens.weight"


def test_the_fp8_bounds_without_torch_are_torchs() -> None:
    """`quantized_names` spells e5m2's range as a number (it imports no torch): it is torch's."""
    from neuronforge.checkpoints.quantized_names import FP8_BOUNDS

    assert FP8_BOUNDS["f8e5m2"] == float(torch.finfo(torch.float8_e5m2).max)
