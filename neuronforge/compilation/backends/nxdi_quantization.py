"""How a quantized target is declared to NxD Inference (NeuronConfig's quantization fields), and
which quantizations NxD Inference cannot load. Sources: aws-neuron/neuronx-distributed-inference@e07f0567
(v0.6.10598) and aws-neuron/neuronx-distributed@fecfe75b (v2.26.0); each rule below names the file it
comes from."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from neuronforge.artifacts import layout
from neuronforge.checkpoints.quantized_names import FP8_BOUNDS, matches, module_name
from neuronforge.common.errors import InvalidInput
from neuronforge.records.base import RecordError
from neuronforge.records.local import read_local
from neuronforge.records.quantized import QuantizedManifest
from neuronforge.spec.target import Quantization, TargetSpec

# Model types whose NxD Inference 0.6 state-dict converter copies the expert weights into the fused
# `mlp.expert_mlps.mlp_op.{gate_up,down}_proj` tensors but never reads their scales
# (models/mixtral/modeling_mixtral.py `convert_mixtral_to_neuron_state_dict`,
# models/qwen3_moe/modeling_qwen3_moe.py `convert_qwen3_moe_hf_to_neuron_state_dict` @ v0.6.10598):
# quantized experts load without scales, so they must stay unquantized.
MOE_WITHOUT_EXPERT_SCALES = frozenset({"mixtral", "qwen3_moe"})
# The two expert modules of one MoE layer, as neuronx-distributed's `convert` sees them, minus the
# `layers.<i>.` prefix: an entry that is a substring of both keeps every layer's experts.
EXPERT_MODULES = ("mlp.expert_mlps.mlp_op.gate_up_proj", "mlp.expert_mlps.mlp_op.down_proj")


def modules_to_not_convert(q: Quantization) -> list[str]:
    """NeuronConfig.modules_to_not_convert for a quantization: every entry the quantizer kept, in the
    form NxD matches (no `model.` prefix; `neuronforge.checkpoints.quantized_names.module_name`), always with
    `lm_head`. neuronx-distributed's `convert` (quantization/quantize.py @ v2.26.0) builds a quantized
    layer for every parallel linear not named here — lm_head included — and loading then fails on
    the scale our checkpoint does not have ("Cannot find lm_head.scale in state_dict")."""
    return sorted({module_name(m) for m in (*q.modules_to_not_convert, "lm_head")})


def neuron_config_quantization(target: TargetSpec, quantized_checkpoint: Path | None) -> dict[str, Any]:
    """NeuronConfig keyword arguments for the target's quantization (empty when unquantized).

    When the checkpoint folder holds the quantize stage's MANIFEST.json, it must have been made for
    this quantization — same dtype, method, kept modules and fp8 bound — since NxD Inference builds
    its layers from these arguments, not from the checkpoint, and a mismatch loads wrong numbers
    or fails on missing scales."""
    q = target.quantization
    if not q.enabled:
        return {}
    if quantized_checkpoint is None:
        raise InvalidInput("nxdi backend: a quantized target needs the quantized checkpoint (quantize stage)")
    if q.dtype == "f8e5m2":  # never hand NxD Inference a config it silently builds as int8
        raise InvalidInput(f"nxdi backend: {quantization_problems(target, None)[0]}")
    keep = modules_to_not_convert(q)
    _check_manifest(quantized_checkpoint, q, keep)
    return {
        "quantized": True,
        "quantized_checkpoints_path": str(quantized_checkpoint),
        "quantization_dtype": q.dtype,
        "quantization_type": q.method,
        "modules_to_not_convert": keep,
    }


def _check_manifest(folder: Path, q: Quantization, keep: list[str]) -> None:
    try:
        manifest = read_local(QuantizedManifest, folder / layout.MANIFEST)
    except OSError:
        return  # not the quantize stage's folder (a hand-made checkpoint): nothing to compare
    except RecordError as exc:
        raise InvalidInput(f"nxdi backend: {exc}; quantize the checkpoint again") from None
    expected = {
        "dtype": q.dtype,
        "method": q.method,
        "modules_to_not_convert": keep,
        "fp8_max": FP8_BOUNDS.get(q.dtype),
    }
    found = {
        "dtype": manifest.quantization.dtype,
        "method": manifest.quantization.method,
        "modules_to_not_convert": manifest.modules_to_not_convert,
        "fp8_max": manifest.fp8_max,
    }
    wrong = {k: found[k] for k in expected if found[k] != expected[k]}
    if wrong:
        raise InvalidInput(
            f"nxdi backend: the quantized checkpoint {folder} was made for {wrong}, the target needs "
            f"{ {k: expected[k] for k in wrong} }; quantize again (a checkpoint from before the fp8 ±240 "
            "rescaling or the NxD-style modules_to_not_convert has no fp8_max / a different list)"
        )


def quantization_problems(target: TargetSpec, model_type: str | None) -> list[str]:
    """Quantizations NxD Inference 0.6 would build wrongly or fail to load, each with the reason and
    what to do instead (empty when it loads). The vllm-neuron profile's planner checks call this."""
    q = target.quantization
    if not q.enabled:
        return []
    problems = []
    if q.dtype == "f8e5m2":
        # models/model_wrapper.py @ v0.6.10598 sets q_config["quantized_dtype"] = F8E4M3 only when
        # quantization_dtype == "f8e4m3"; otherwise the default qconfig's INT8 stays
        # (neuronx-distributed quantization_config.py @ v2.26.0), so f8e5m2 weights would be loaded
        # into int8 layers.
        problems.append(
            "quantization f8e5m2: NxD Inference 0.6 builds int8 layers for it (model_wrapper.py selects "
            "quantized layers only for f8e4m3 and int8), so the e5m2 weights would be read as int8; "
            "use f8e4m3 or int8"
        )
    if model_type in MOE_WITHOUT_EXPERT_SCALES and not _experts_kept(q):
        keep = modules_to_not_convert(q)
        problems.append(
            f"quantization {q.slug} of a {model_type} model: NxD Inference 0.6's {model_type} converter reads the "
            "expert weights but not their scales, so quantized experts load without them; keep the experts "
            f"unquantized with modules_to_not_convert {sorted({*keep, 'expert_mlps'})} (NxD Inference then "
            "builds them unquantized and the rest stays quantized), or do not quantize this model"
        )
    return problems


def _experts_kept(q: Quantization) -> bool:
    """Whether the list keeps every MoE layer's experts: an entry, independent of the layer number,
    that NxD matches in both expert modules (e.g. `expert_mlps`, `mlp`). Entries naming single
    layers cannot be checked without the layer count, so they do not count."""
    keep = tuple(modules_to_not_convert(q))
    return all(matches(m, keep) for m in EXPERT_MODULES)
