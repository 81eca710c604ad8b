"""The `optimum` backend: optimum-neuron's export on Neuron workers.

Written against optimum-neuron 0.4.5 (huggingface/optimum-neuron, tag v0.4.5):

    neuron_config = NeuronModelForCausalLM.get_neuron_config(model_path, config=config,
        instance_type=…, batch_size=…, sequence_length=…, tensor_parallel_size=…)
    model = NeuronModelForCausalLM.export(model_path, neuron_config, config=config, load_weights=False)
    model.save_pretrained(out)              # neuron_config.json, config.json, model.pt, checkpoint/weights/
    NeuronModelForCausalLM.from_pretrained(out).generate(…)

Its output directory *is* the published Optimum-format artifact. optimum-neuron's export and load
paths need the Neuron SDK (`neuronx_distributed`), so they run only in the SDK image's own
interpreter (`neuronforge_toolchain.optimum`), never in the Airflow worker; this module imports
anywhere. What `get_neuron_config` cannot express (buckets, a context length below the sequence
length, quantization, a non-default logical core config, extra options) is refused at plan time by
`unsupported`, with the backend that can do it.
"""

from __future__ import annotations

import logging
from typing import Any, ClassVar

from neuronforge.common.errors import InvalidInput
from neuronforge.compilation.backends.base import Backend, CompileJob, neuron_compile_env
from neuronforge.compilation.backends.child import copy_served_files
from neuronforge.compilation.compile_cache import CacheUse
from neuronforge.compilation.detect import NEURON_SDK_PACKAGES
from neuronforge.spec.target import TORCH_DTYPE_NAMES, TargetSpec

log = logging.getLogger(__name__)


def unsupported(target: TargetSpec) -> list[str]:
    """Target fields optimum-neuron 0.4.5's export API (`get_neuron_config`) has no parameter for,
    each with the fix: profile vllm-neuron (NxD Inference) expresses all of them."""
    t = target.normalized()
    problems = []
    if t.context_encoding_buckets or t.token_generation_buckets:
        problems.append(
            "optimum-neuron: get_neuron_config has no bucket parameters; use profile vllm-neuron for buckets"
        )
    if t.max_context_length != t.sequence_length:
        problems.append(
            f"optimum-neuron: max_context_length={t.max_context_length} must equal sequence_length "
            f"({t.sequence_length}) in optimum-neuron's export; drop it or use profile vllm-neuron"
        )
    if t.quantization.enabled:
        problems.append(
            f"optimum-neuron: optimum-neuron 0.4.5 does not export quantized decoders "
            f"({t.quantization.slug}); use profile vllm-neuron"
        )
    if t.logical_nc_config != t.instance.default_lnc:
        problems.append(
            f"optimum-neuron: logical_nc_config={t.logical_nc_config} is not configurable in optimum-neuron; "
            f"use the default ({t.instance.default_lnc}) or profile vllm-neuron"
        )
    if t.backend_options:
        problems.append(f"optimum-neuron: takes no backend_options (got {sorted(t.backend_options)})")
    return problems


def export_kwargs(target: TargetSpec) -> dict[str, Any]:
    """`get_neuron_config` keyword arguments (plus the dtype it reads from the model config)."""
    problems = unsupported(target)
    if problems:
        raise InvalidInput("; ".join(problems))
    t = target.normalized()
    return {
        "instance_type": t.instance.family,  # optimum normalises inf2/trn1n to its trn1 target itself
        "batch_size": t.batch_size,
        "sequence_length": t.sequence_length,
        "tensor_parallel_size": t.tp_degree,
        "dtype": TORCH_DTYPE_NAMES[t.dtype],
    }


class OptimumBackend(Backend):
    """optimum-neuron's exporter (`NeuronModelForCausalLM.export`), in child processes."""

    name = "optimum"
    library = "optimum-neuron"
    packages = ("optimum-neuron", *NEURON_SDK_PACKAGES)
    # optimum-neuron 0.4.5 registers these for `text-generation` inference
    # (optimum/neuron/models/inference/auto_models.py; note: no `mistral` there), each in its folder.
    modeling_modules: ClassVar[dict[str, str]] = {
        mt: f"optimum.neuron.models.inference.{folder}"
        for mt, folder in {
            "granite": "granite",
            "llama": "llama",
            "llama4_text": "llama4",
            "mixtral": "mixtral",
            "phi3": "phi3",
            "qwen2": "qwen2",
            "qwen3": "qwen3",
            "qwen3_moe": "qwen3_moe",
            "smollm3": "smollm3",
        }.items()
    }
    architectures = frozenset(modeling_modules)

    toolchain_module = "optimum"

    def compile_request(self, job: CompileJob) -> tuple[dict[str, Any], dict[str, str]]:
        spec = {"model_path": str(job.checkpoint_dir), "out": str(job.out), "export": export_kwargs(job.target)}
        return spec, neuron_compile_env(job.target, job.cache.root, job.flags)

    def finish_build(self, job: CompileJob, use: CacheUse) -> None:
        copy_served_files(job.checkpoint_dir, job.out, config=False)  # the tokenizer, as optimum-cli ships it

    # `generate`: the base's — `NeuronModelForCausalLM.from_pretrained(<published folder>)`, nothing
    # else (model.pt, the neuron_config.json it checks versions against, the pre-sharded weights).


BACKEND = OptimumBackend()
