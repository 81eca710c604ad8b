"""The `optimum` backend: optimum-neuron's export on Neuron workers.

Written against optimum-neuron 0.4.5 (huggingface/optimum-neuron, tag v0.4.5):

    neuron_config = NeuronModelForCausalLM.get_neuron_config(model_path, config=config,
        instance_type=…, batch_size=…, sequence_length=…, tensor_parallel_size=…)
    model = NeuronModelForCausalLM.export(model_path, neuron_config, config=config, load_weights=False)
    model.save_pretrained(out)              # neuron_config.json, config.json, model.pt, checkpoint/weights/
    NeuronModelForCausalLM.from_pretrained(out).generate(…)

Its output directory *is* the published Optimum-format artifact. optimum-neuron's export and load
paths need the Neuron SDK (`neuronx_distributed`), so they run only in child processes
(`python -m neuronforge.backends.optimum`), never in the Airflow worker; this module imports
anywhere. What `get_neuron_config` cannot express (buckets, a context length below the sequence
length, quantization, a non-default logical core config, extra options) is refused at plan time by
`unsupported`, with the backend that can do it.
"""

from __future__ import annotations

import json
import logging
import sys
from pathlib import Path
from typing import Any, ClassVar

from neuronforge.backends.base import Backend, CompileJob, CompileResult, GenerateJob, Generation
from neuronforge.backends.child import cache_graphs, generation_rows
from neuronforge.compile_cache import CacheUse, compile_through_cache
from neuronforge.errors import InvalidInput
from neuronforge.target import TORCH_DTYPE_NAMES, TargetSpec
from neuronforge.toolchain import NEURON_SDK_PACKAGES

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


def child_env(target: TargetSpec, cache_root: Path, flags: tuple[str, ...]) -> dict[str, str]:
    """optimum's export refuses to compile for another platform unless NEURON_PLATFORM_TARGET_OVERRIDE
    names the target, so cross-compiling (e.g. trn2 graphs on a trn1 worker) sets it explicitly."""
    return {
        "NEURON_COMPILE_CACHE_URL": str(cache_root),
        "NEURON_CC_FLAGS": " ".join(flags),
        "NEURON_PLATFORM_TARGET_OVERRIDE": target.instance.compile_target,
    }


def compile_optimum(
    checkpoint: Path,
    target: TargetSpec,
    out: Path,
    cache,
    flags: tuple[str, ...],
    timeout_s: float,
    preseed: list[str] | None = None,
) -> CacheUse:
    """Export in a child process against the local persistent cache, pre-seeded with `preseed`."""
    from neuronforge.backends.child import run_child

    spec = {"model_path": str(checkpoint), "out": str(out), "export": export_kwargs(target)}
    out.mkdir(parents=True, exist_ok=True)
    spec_path = out.parent / f"{out.name}.optimum-spec.json"
    spec_path.write_text(json.dumps(spec))
    return compile_through_cache(
        cache,
        lambda: run_child(
            "neuronforge.backends.optimum",
            ["compile", str(spec_path)],
            env=child_env(target, cache.local.parent, flags),
            timeout_s=timeout_s,
            what=f"optimum export {target.slug}",
        ),
        preseed,
    )


def generate_optimum(
    compiled: Path, prompt_ids: list[list[int]], max_new_tokens: int, timeout_s: float
) -> list[dict[str, Any]]:
    """Load the exported model in a fresh child (the runtime holds cores until exit) and generate."""
    from neuronforge.backends.child import generation_results, run_child

    spec_path = compiled.parent / f"{compiled.name}.optimum-generate.json"
    spec_path.write_text(json.dumps({"out": str(compiled), "prompt_ids": prompt_ids, "max_new_tokens": max_new_tokens}))
    lines = run_child(
        "neuronforge.backends.optimum", ["generate", str(spec_path)], timeout_s=timeout_s, what="optimum smoke load"
    )
    return generation_results(lines)


# -- in the child process only ---------------------------------------------------------------------
def _compile(spec: dict[str, Any]) -> None:
    import shutil

    import torch
    from optimum.neuron import NeuronModelForCausalLM
    from transformers import AutoConfig

    kw = dict(spec["export"])
    config = AutoConfig.from_pretrained(spec["model_path"]).get_text_config()
    config.dtype = getattr(torch, kw.pop("dtype"))  # get_neuron_config takes the dtype from the config
    neuron_config = NeuronModelForCausalLM.get_neuron_config(spec["model_path"], config=config, **kw)
    print(f"exporting with {neuron_config}", flush=True)
    model = NeuronModelForCausalLM.export(spec["model_path"], neuron_config, config=config, load_weights=False)
    model.save_pretrained(spec["out"])
    from neuronforge.backends.cpu import TOKENIZER_FILES

    for name in TOKENIZER_FILES:  # the tokenizer travels with the artifact, as optimum-cli does
        if (Path(spec["model_path"]) / name).exists():
            shutil.copyfile(Path(spec["model_path"]) / name, Path(spec["out"]) / name)
    print("export finished", flush=True)


def _generate(spec: dict[str, Any]) -> None:
    """Load the exported model and greedily generate; prints one JSON line per prompt."""
    import time

    from optimum.neuron import NeuronModelForCausalLM

    from neuronforge.backends.child import report_generations

    t0 = time.perf_counter()
    model = NeuronModelForCausalLM.from_pretrained(spec["out"])
    load_s = time.perf_counter() - t0
    report_generations(model.generate, spec["prompt_ids"], spec["max_new_tokens"], load_s)


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

    def compile(self, job: CompileJob) -> CompileResult:
        use = compile_optimum(job.checkpoint_dir, job.target, job.out, job.cache, job.flags, job.timeout_s, job.preseed)
        return CompileResult(cache_graphs(use), len(use.created))

    def generate(self, job: GenerateJob) -> Generation:
        return generation_rows(
            job.prompt_ids, generate_optimum(job.build_dir, job.prompt_ids, job.max_new_tokens, job.timeout_s)
        )


BACKEND = OptimumBackend()

if __name__ == "__main__":
    from neuronforge.backends.child import child_entry

    sys.exit(child_entry({"compile": _compile, "generate": _generate}, sys.argv[1:]))
