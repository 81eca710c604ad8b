"""How a quantized target is declared to NxD Inference (NeuronConfig's quantization fields), and
which quantizations NxD Inference cannot load. Sources: shared/reference/CONSUMERS.md, "NxD Inference 0.6"."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from neuronforge.errors import InvalidInput
from neuronforge.target import TargetSpec


def neuron_config_quantization(target: TargetSpec, quantized_checkpoint: Path | None) -> dict[str, Any]:
    """NeuronConfig keyword arguments for the target's quantization (empty when unquantized)."""
    q = target.quantization
    if not q.enabled:
        return {}
    if quantized_checkpoint is None:
        raise InvalidInput("nxdi backend: a quantized target needs the quantized checkpoint (quantize stage)")
    return {
        "quantized": True,
        "quantized_checkpoints_path": str(quantized_checkpoint),
        "quantization_dtype": q.dtype,
        "quantization_type": q.method,
    }


def quantization_problems(target: TargetSpec, model_type: str | None) -> list[str]:
    """Quantizations NxD Inference would build wrongly or fail to load, each with the reason."""
    return []
