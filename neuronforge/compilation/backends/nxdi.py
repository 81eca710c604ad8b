"""The `nxdi` backend: NxD Inference (neuronx-distributed-inference) on Neuron workers.

Written against NxD Inference's public API (SDK 2.26; aws-neuron/neuronx-distributed-inference):

    neuron_config = NeuronConfig(tp_degree=…, batch_size=…, seq_len=…, …)   # MoENeuronConfig for MoE
    config = <Arch>InferenceConfig(neuron_config, load_config=load_pretrained_config(model_path))
    model = Neuron<Arch>ForCausalLM(model_path, config)
    model.compile(out)                      # NEFFs via the persistent cache, neuron_config.json, model.pt
    model.load(out); HuggingFaceGenerationAdapter(model).generate(…)

The Neuron SDK is imported only in the SDK image's own interpreter (`neuronforge_toolchain.nxdi`),
never by the Airflow worker: this module imports anywhere, and `neuron_config_kwargs` (the
TargetSpec → NeuronConfig mapping) is plain data that tests check field by field.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Collection
from pathlib import Path
from typing import Any, ClassVar

from neuronforge.common.errors import InvalidInput
from neuronforge.compilation.backends.base import Backend, CompileJob, GenerateJob, neuron_compile_env
from neuronforge.compilation.backends.child import copy_served_files
from neuronforge.compilation.backends.nxdi_quantization import neuron_config_quantization
from neuronforge.compilation.compile_cache import CacheUse
from neuronforge.compilation.detect import NEURON_SDK_PACKAGES
from neuronforge.spec.target import TORCH_DTYPE_NAMES, TargetSpec

log = logging.getLogger(__name__)
PACKAGE = "neuronx_distributed_inference"
# model_type -> (module under neuronx_distributed_inference.models, model class, config class)
ARCHITECTURES: dict[str, tuple[str, str, str]] = {
    "llama": ("llama.modeling_llama", "NeuronLlamaForCausalLM", "LlamaInferenceConfig"),
    # NxD Inference serves Mistral checkpoints with its Llama implementation (as vLLM-neuron does).
    "mistral": ("llama.modeling_llama", "NeuronLlamaForCausalLM", "LlamaInferenceConfig"),
    "mixtral": ("mixtral.modeling_mixtral", "NeuronMixtralForCausalLM", "MixtralInferenceConfig"),
    "qwen2": ("qwen2.modeling_qwen2", "NeuronQwen2ForCausalLM", "Qwen2InferenceConfig"),
    "qwen3": ("qwen3.modeling_qwen3", "NeuronQwen3ForCausalLM", "Qwen3InferenceConfig"),
    "qwen3_moe": ("qwen3_moe.modeling_qwen3_moe", "NeuronQwen3MoeForCausalLM", "Qwen3MoeInferenceConfig"),
}
MOE = {"mixtral", "qwen3_moe"}
# backend_options neuronforge passes through to NeuronConfig (anything else is refused)
PASSTHROUGH_OPTIONS = {"fused_qkv", "flash_decoding_enabled", "sequence_parallel_enabled", "kv_cache_quant"}


def architecture(model_type: str) -> tuple[str, str, str]:
    try:
        return ARCHITECTURES[model_type]
    except KeyError:
        raise InvalidInput(
            f"nxdi backend: no NxD Inference model class for model_type {model_type!r}; "
            f"supported: {', '.join(sorted(ARCHITECTURES))}"
        ) from None


def neuron_config_kwargs(
    target: TargetSpec, quantized_checkpoint: Path | None = None, handled: Collection[str] = ()
) -> dict[str, Any]:
    """NeuronConfig keyword arguments for a target: every field that changes compilation.

    `handled` names backend_options the caller (a serving profile) maps to NeuronConfig itself, e.g.
    the vllm-neuron profile's `prefix_caching`: they are left out here instead of refused as unknown."""
    t = target.normalized()
    options = {k: v for k, v in t.backend_options.items() if k not in handled}
    unknown = set(options) - PASSTHROUGH_OPTIONS - {"on_device_sampling"}
    if unknown:
        raise InvalidInput(
            f"nxdi backend: unknown backend_options {sorted(unknown)}; known: "
            f"{sorted(PASSTHROUGH_OPTIONS | {'on_device_sampling', *handled})}"
        )
    kw: dict[str, Any] = {
        "tp_degree": t.tp_degree,
        "batch_size": t.batch_size,
        "seq_len": t.sequence_length,
        "max_context_length": t.max_context_length,
        "torch_dtype": TORCH_DTYPE_NAMES[t.dtype],
        "logical_nc_config": t.logical_nc_config,
        "enable_bucketing": bool(t.context_encoding_buckets or t.token_generation_buckets),
        "fused_qkv": fused_qkv(t, options.pop("fused_qkv", None)),
        # Greedy sampling on device: the smoke test compares greedy tokens.
        "on_device_sampling_config": {"do_sample": False} if options.pop("on_device_sampling", True) else None,
        # Save the sharded weights with the compiled model, so the artifact loads without the checkpoint.
        "save_sharded_checkpoint": True,
    }
    if t.context_encoding_buckets:
        kw["context_encoding_buckets"] = list(t.context_encoding_buckets)
    if t.token_generation_buckets:
        kw["token_generation_buckets"] = list(t.token_generation_buckets)
    kw.update(neuron_config_quantization(t, quantized_checkpoint))
    kw.update(options)
    return kw


# NxD Inference v0.6.10598 (e07f0567) models/llama/modeling_llama.py `convert_state_dict_to_fused_qkv`
# torch.cat's the q/k/v `scale` tensors of a quantized layer into `Wqkv.scale`: three per-tensor
# scales (shape [1] each) become a [3] tensor, while the fused per-tensor quantized layer's scale
# parameter is [1] (neuronx-distributed v2.26.0 quantization layers), so loading fails. Per-channel
# scales ([out, 1]) concatenate into the fused layer's [q+k+v, 1] and load.
FUSED_QKV_PER_TENSOR = (
    "NxD Inference 0.6.10598 models/llama/modeling_llama.py convert_state_dict_to_fused_qkv concatenates "
    "the q/k/v scales into a [3] tensor, the per-tensor quantized Wqkv's scale is [1]"
)


def per_tensor_quantized(target: TargetSpec) -> bool:
    q = target.quantization
    return q.enabled and q.method == "per_tensor_symmetric"


def fused_qkv(target: TargetSpec, asked: Any = None) -> bool:
    """Fused QKV unless asked otherwise — and never for a per-tensor quantized target
    (`FUSED_QKV_PER_TENSOR`): off by default there, refused when asked for."""
    if per_tensor_quantized(target):
        if asked:
            raise InvalidInput(
                f"nxdi backend: backend_options fused_qkv=true with quantization {target.quantization.slug}: "
                f"{FUSED_QKV_PER_TENSOR}; drop fused_qkv (it is off for per-tensor targets) or quantize per_channel"
            )
        return False
    return True if asked is None else bool(asked)


def child_spec(model_type: str, model_path: Path, out: Path, kwargs: dict[str, Any]) -> dict[str, Any]:
    module, model_class, config_class = architecture(model_type)
    return {
        "module": f"{PACKAGE}.models.{module}",
        "model_class": model_class,
        "config_class": config_class,
        "moe": model_type in MOE,
        "model_path": str(model_path),
        "out": str(out),
        "neuron_config": kwargs,
    }


class NxdiBackend(Backend):
    """NxD Inference (`Neuron<Arch>ForCausalLM.compile/load`), in child processes. What it is told
    to build (the NeuronConfig) comes from the serving profile (`settings["neuron_config"]`)."""

    name = "nxdi"
    library = "neuronx-distributed-inference"
    packages = ("neuronx-distributed-inference", *NEURON_SDK_PACKAGES)
    architectures = frozenset(ARCHITECTURES)
    # the package holding each model type's modeling code (`llama.modeling_llama` -> `…models.llama`)
    modeling_modules: ClassVar[dict[str, str]] = {
        mt: f"{PACKAGE}.models.{module.split('.', 1)[0]}" for mt, (module, _, _) in ARCHITECTURES.items()
    }
    reads_quantized = True

    toolchain_module = "nxdi"

    def compile_request(self, job: CompileJob) -> tuple[dict[str, Any], dict[str, str]]:
        kwargs = job.settings.get("neuron_config") or neuron_config_kwargs(job.target, job.quantized_dir)
        spec = child_spec(job.model_type, job.checkpoint_dir, job.out, kwargs)
        return spec, neuron_compile_env(job.target, job.cache.root, job.flags)

    def finish_build(self, job: CompileJob, use: CacheUse) -> None:
        # NxD's output (neuron_config.json, model.pt, weights/) plus the HF config and tokenizer,
        # which vLLM and the HF generation adapter read from the same folder.
        copy_served_files(job.checkpoint_dir, job.out)

    def generate_request(self, job: GenerateJob) -> tuple[dict[str, Any], dict[str, str]]:
        """`Neuron<Arch>ForCausalLM(<published folder>).load(<published folder>)`: the folder alone,
        as vLLM's NEURON_COMPILED_ARTIFACTS loads it (its neuron_config.json, model.pt, weights/)."""
        spec, env = super().generate_request(job)
        config = json.loads((job.model_dir / "config.json").read_text(encoding="utf-8"))
        module, model_class, _ = architecture(str(config.get("model_type")))
        return {**spec, "module": f"{PACKAGE}.models.{module}", "model_class": model_class}, env


BACKEND = NxdiBackend()
