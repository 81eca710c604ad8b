"""The `nxdi` backend: NxD Inference (neuronx-distributed-inference) on Neuron workers.

Written against NxD Inference's public API (SDK 2.26; aws-neuron/neuronx-distributed-inference):

    neuron_config = NeuronConfig(tp_degree=…, batch_size=…, seq_len=…, …)   # MoENeuronConfig for MoE
    config = <Arch>InferenceConfig(neuron_config, load_config=load_pretrained_config(model_path))
    model = Neuron<Arch>ForCausalLM(model_path, config)
    model.compile(out)                      # NEFFs via the persistent cache, neuron_config.json, model.pt
    model.load(out); HuggingFaceGenerationAdapter(model).generate(…)

The Neuron SDK is imported only inside the child process (`python -m neuronforge.backends.nxdi`),
never by the Airflow worker: this module imports anywhere, and `neuron_config_kwargs` (the
TargetSpec → NeuronConfig mapping) is plain data that tests check field by field.
"""

from __future__ import annotations

import importlib
import json
import logging
import sys
from collections.abc import Collection
from pathlib import Path
from typing import Any, ClassVar

from neuronforge.backends.base import Backend, CompileJob, CompileResult, GenerateJob, Generation
from neuronforge.backends.child import cache_graphs, copy_served_files, generation_rows
from neuronforge.backends.nxdi_quantization import neuron_config_quantization
from neuronforge.compile_cache import CacheUse, compile_through_cache
from neuronforge.errors import InvalidInput
from neuronforge.target import TORCH_DTYPE_NAMES, TargetSpec
from neuronforge.toolchain import NEURON_SDK_PACKAGES

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
        "fused_qkv": bool(options.pop("fused_qkv", True)),
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


def compile_nxdi(
    checkpoint: Path,
    model_type: str,
    target: TargetSpec,
    out: Path,
    cache,
    flags: tuple[str, ...],
    timeout_s: float,
    preseed: list[str] | None = None,
    neuron_config: dict[str, Any] | None = None,
) -> CacheUse:
    """Compile in a child process against the local persistent cache, pre-seeded with `preseed`,
    with the NeuronConfig keyword arguments `neuron_config` (default: `neuron_config_kwargs`)."""
    from neuronforge.backends.child import run_child

    out.mkdir(parents=True, exist_ok=True)
    spec_path = out.parent / f"{out.name}.nxdi-spec.json"
    kwargs = neuron_config if neuron_config is not None else neuron_config_kwargs(target)
    spec_path.write_text(json.dumps(child_spec(model_type, checkpoint, out, kwargs)))
    env = {"NEURON_COMPILE_CACHE_URL": str(cache.local.parent), "NEURON_CC_FLAGS": " ".join(flags)}
    return compile_through_cache(
        cache,
        lambda: run_child(
            "neuronforge.backends.nxdi",
            ["compile", str(spec_path)],
            env=env,
            timeout_s=timeout_s,
            what=f"nxdi compile {target.slug}",
        ),
        preseed,
    )


def generate_nxdi(
    checkpoint: Path,
    model_type: str,
    compiled: Path,
    prompt_ids: list[list[int]],
    max_new_tokens: int,
    timeout_s: float,
) -> list[dict[str, Any]]:
    """Load the compiled model in a fresh child (the runtime holds cores until exit) and generate."""
    from neuronforge.backends.child import generation_results, run_child

    spec = child_spec(model_type, checkpoint, compiled, {})
    spec.update(prompt_ids=prompt_ids, max_new_tokens=max_new_tokens)
    spec_path = compiled.parent / f"{compiled.name}.nxdi-generate.json"
    spec_path.write_text(json.dumps(spec))
    lines = run_child(
        "neuronforge.backends.nxdi", ["generate", str(spec_path)], timeout_s=timeout_s, what="nxdi smoke load"
    )
    return generation_results(lines)


# -- in the child process only ---------------------------------------------------------------------
def _build(spec: dict[str, Any]):
    import torch
    from neuronx_distributed_inference.models.config import MoENeuronConfig, NeuronConfig, OnDeviceSamplingConfig
    from neuronx_distributed_inference.utils.hf_adapter import load_pretrained_config

    kw = dict(spec["neuron_config"])
    kw["torch_dtype"] = getattr(torch, kw["torch_dtype"])
    if kw.get("on_device_sampling_config") is not None:
        kw["on_device_sampling_config"] = OnDeviceSamplingConfig(**kw["on_device_sampling_config"])
    neuron_config = (MoENeuronConfig if spec["moe"] else NeuronConfig)(**kw)
    module = importlib.import_module(spec["module"])
    config = getattr(module, spec["config_class"])(
        neuron_config, load_config=load_pretrained_config(spec["model_path"])
    )
    return getattr(module, spec["model_class"])(spec["model_path"], config)


def _compile(spec: dict[str, Any]) -> None:
    model = _build(spec)
    print(f"compiling {spec['model_class']} into {spec['out']}", flush=True)
    model.compile(spec["out"])
    print("compile finished", flush=True)


def _generate(spec: dict[str, Any]) -> None:
    """Load the compiled model and greedily generate; prints one JSON line per prompt."""
    import time

    from neuronx_distributed_inference.utils.hf_adapter import HuggingFaceGenerationAdapter

    from neuronforge.backends.child import report_generations

    t0 = time.perf_counter()
    module = importlib.import_module(spec["module"])
    model = getattr(module, spec["model_class"])(spec["out"])
    model.load(spec["out"])
    load_s = time.perf_counter() - t0
    adapter = HuggingFaceGenerationAdapter(model)
    report_generations(adapter.generate, spec["prompt_ids"], spec["max_new_tokens"], load_s)


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

    def compile(self, job: CompileJob) -> CompileResult:

        kwargs = job.settings.get("neuron_config") or neuron_config_kwargs(job.target, job.quantized_dir)
        use = compile_nxdi(
            job.checkpoint_dir,
            job.model_type,
            job.target,
            job.out,
            job.cache,
            job.flags,
            timeout_s=job.timeout_s,
            preseed=job.preseed,
            neuron_config=kwargs,
        )
        # NxD's output (neuron_config.json, model.pt, weights/) plus the HF config and tokenizer,
        # which vLLM and the HF generation adapter read from the same folder.
        copy_served_files(job.checkpoint_dir, job.out)
        return CompileResult(cache_graphs(use), len(use.created))

    def generate(self, job: GenerateJob) -> Generation:
        results = generate_nxdi(
            job.checkpoint_dir, job.model_type, job.build_dir, job.prompt_ids, job.max_new_tokens, job.timeout_s
        )
        return generation_rows(job.prompt_ids, results)


BACKEND = NxdiBackend()

if __name__ == "__main__":
    from neuronforge.backends.child import child_entry

    sys.exit(child_entry({"compile": _compile, "generate": _generate}, sys.argv[1:]))
