"""The quantized checkpoint's manifest: `quantized/<org>/<name>/<revision>/<variant>/MANIFEST.json`,
written last by the quantize stage. It says what NeuronConfig must be given to load the checkpoint
(`modules_to_not_convert`, `fp8_max`), so the nxdi backend refuses a checkpoint made for another
quantization before NxD Inference loads wrong numbers.

Version 2 (neuronforge after df5aa72) matches `modules_to_not_convert` as NxD's `convert` does and
records the modules kept and the fp8 bound; version 1 records read lifted (`_lift_v1`), with what
they never recorded left unknown, so a v1 checkpoint still differs from what a target needs now.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, Field

from neuronforge.records.base import StoredRecord
from neuronforge.records.parts import Seconds
from neuronforge.records.tree import StoredFile


class _Part(BaseModel):
    model_config = ConfigDict(frozen=True, extra="ignore")


class QuantizedOrigin(_Part):
    location: str
    revision: str | None = None


class QuantizationMade(_Part):
    dtype: str  # int8 | f8e4m3 | f8e5m2
    method: str  # per_tensor_symmetric | per_channel_symmetric


class InputFile(_Part):
    path: str
    sha256: str | None = None  # None: the input could not be hashed


class TensorReport(_Part):
    rel_error: float  # ‖w − deq(q)‖ / ‖w‖
    scale_shape: list[int] = Field(default_factory=list)


def _lift_v1(data: dict[str, Any]) -> dict[str, Any]:
    """Version 1 (before df5aa72) lacked `kept_modules` and `fp8_max`: neither is known for it."""
    return {**data, "kept_modules": None, "fp8_max": None}


class QuantizedManifest(StoredRecord):
    KIND: ClassVar[str] = "quantized checkpoint manifest"
    SCHEMA: ClassVar[int] = 2
    UPGRADES: ClassVar[dict[int, Callable[[dict[str, Any]], dict[str, Any]]]] = {1: _lift_v1}
    MAX_BYTES: ClassVar[int] = 16 * 1024 * 1024  # ~100 bytes per tensor and per file

    format: str = "nxd-quantized-checkpoint"
    source: QuantizedOrigin
    quantization: QuantizationMade
    dtype: str  # what the tensors left unquantized were cast to
    modules_to_not_convert: list[str]  # what NeuronConfig must be given (v1: HF names, as the user gave them)
    kept_modules: list[str] | None  # None: not recorded (version 1)
    fp8_max: float | None  # None: int8, or a version 1 fp8 checkpoint scaled to the OCP ±448
    inputs: list[InputFile]
    files: list[StoredFile]
    tensors: dict[str, TensorReport]
    max_rel_error: float
    kernel_chunks: dict[str, int] = Field(default_factory=dict)
    seconds: Seconds
    neuronforge_version: str
