"""What the quantize stage is asked for (`QuantizeRequest`): the checkpoint, the quantization, the
dtype kept tensors are cast to, and what names its output (`variant`). Light, so that the stage's
declaration and its tensor work (`quantize_tensors`) both read it without one importing the other.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path

from neuronforge.checkpoints.quantized_names import FP8_BOUNDS, module_name
from neuronforge.common import settings
from neuronforge.spec.source import ModelSource
from neuronforge.spec.target import Quantization

MIB = 1024**2


@dataclass
class QuantizeRequest:
    checkpoint_dir: Path  # verified (fetch stage); its MANIFEST.json holds the expected sha256
    source: ModelSource  # pinned: names the store prefix
    quantization: Quantization
    dtype: str  # what the tensors left unquantized are cast to: bf16 | fp16 | fp32
    work_dir: Path
    # Added to `quantization.modules_to_not_convert` (the CLI passes them here); see `not_converted`.
    modules_to_not_convert: tuple[str, ...] = ()
    max_shard_bytes: int = 10 * 10**9
    # float32 bytes of one chunk of rows: small enough that the eager operations' passes stay in
    # the CPU caches (8 MiB ran 3.5x faster than 44 MiB here), big enough to amortize per-op costs
    chunk_bytes: int = 8 * MIB
    # "compiled" (TorchInductor fused loop; ~6 s to import and compile, cached on disk after the
    # first time), "eager", or "auto": compiled once the weights to quantize repay that
    kernel: str = field(default_factory=lambda: settings.current().quant_kernel)

    @property
    def not_converted(self) -> tuple[str, ...]:
        """Every entry left unquantized, in NxD's form (no `model.` prefix), sorted, with `lm_head`
        (never quantized here; NxD Inference converts it unless told). NeuronConfig must be given
        exactly this list: what the quantizer keeps and what NxD Inference builds unquantized are
        then the same modules."""
        names = {*self.quantization.modules_to_not_convert, *self.modules_to_not_convert, "lm_head"}
        return tuple(sorted({module_name(m) for m in names}))

    @property
    def variant(self) -> str:
        """What else changes the files (`layout.quantized_prefix`): the dtype kept tensors are cast
        to; the kept list (hashed with its matching rule, so a list matched the old way — substrings
        of HF names — never reuses a checkpoint matched the new way); the e4m3 bound (checkpoints
        scaled to the OCP ±448 must not be reused)."""
        v = self.dtype
        if self.not_converted != ("lm_head",):  # lm_head alone: the files every earlier version wrote
            material = {"modules_to_not_convert": self.not_converted, "match": "nxd-module-path-substring"}
            v += "-keep" + hashlib.sha256(json.dumps(material, sort_keys=True).encode()).hexdigest()[:8]
        if self.quantization.dtype == "f8e4m3":
            v += f"-fp8max{FP8_BOUNDS['f8e4m3']:g}"
        return v
