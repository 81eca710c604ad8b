"""The `tnx` backend: transformers-neuronx 0.13 (Neuron SDK 2.21.1) on Neuron workers.

Written against transformers-neuronx's public API (aws-neuron/transformers-neuronx, the 0.13 line;
main 1ade6d74 = the 0.13.380 release of SDK 2.21.1):

    neuron_config = NeuronConfig(group_query_attention=…, quant=QuantizationConfig(…), …)
    model = <Arch>ForSampling.from_pretrained(checkpoint, batch_size=…, tp_degree=…, n_positions=…,
                                              amp=…, context_length_estimate=…, neuron_config=…)
    model.to_neuron()        # one NEFF per bucket, through libneuronxla's persistent cache
    model.sample(input_ids, sequence_length, top_k=1)

Unlike the other Neuron backends, the build holds no NEFFs: transformers-neuronx (and LMI on top of
it) finds them at load time in the persistent compile cache, under the hash of the HLO that the SAME
load settings produce. So the backend is told the exact load (`settings["tnx"]`, a `TnxLoad` the
serving profile derives from what its consumer will pass) and records it in the build
(`tnx-load.json`) beside the checkpoint's config and tokenizer; the graphs are the cache entries the
compile created or reused. The smoke test loads with the same settings through a cache holding only
those entries (`loads_from_cache`): a compile there fails it. int8 is quantized by transformers-neuronx
itself while loading (`quantizes_at_load`), from the unquantized checkpoint.

The SDK is imported only in the child process (`python -m neuronforge.backends.tnx`).
"""

from __future__ import annotations

import importlib
import json
import os
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from neuronforge.backends.base import Backend, CompileJob, CompileResult, GenerateJob, Generation
from neuronforge.backends.child import cache_graphs, copy_served_files, generation_rows
from neuronforge.compile_cache import compile_through_cache
from neuronforge.errors import InvalidInput
from neuronforge.toolchain import NEURON_SDK_PACKAGES

PACKAGE = "transformers_neuronx"
LOAD_FILE = "tnx-load.json"  # the load settings the build was compiled for, its flags and cache entries
NEFF_DIR = "neff"  # the build's NEFFs in `model.save(dir)` layout (what `model.load(dir)` reads)
NEFFS = "NEFFS "  # the generate child's line naming the NEFF files a `save` of the loaded model writes
# model_type -> (module under transformers_neuronx, *ForSampling class): the classes LMI 0.32's
# TNXModelLoader picks (djl-serving neuron_utils/model_loader.py), which transformers-neuronx 0.13 has.
ARCHITECTURES: dict[str, tuple[str, str]] = {
    "llama": ("llama.model", "LlamaForSampling"),
    "mistral": ("mistral.model", "MistralForSampling"),
    "mixtral": ("mixtral.model", "MixtralForSampling"),
    "gpt_neox": ("gptneox.model", "GPTNeoXForSampling"),
    "gptj": ("gptj.model", "GPTJForSampling"),
    "bloom": ("bloom.model", "BloomForSampling"),
    "gpt2": ("gpt2.model", "GPT2ForSampling"),
    "opt": ("opt.model", "OPTForSampling"),
}
NO_INT8 = frozenset({"gptj", "gpt_neox"})  # "Support for quantization is not yet implemented"


@dataclass(frozen=True)
class TnxLoad:
    """One transformers-neuronx load: `<cls>.from_pretrained(path, **kwargs, neuron_config=
    NeuronConfig(**neuron_config))`, `to_neuron()`. Compiling and loading with equal `TnxLoad`s
    produce the same HLO, hence the same cache entries."""

    model_type: str
    kwargs: dict[str, Any]  # batch_size, tp_degree, n_positions, amp, context_length_estimate, ...
    neuron_config: dict[str, Any] = field(default_factory=dict)  # `quant` / `continuous_batching` as dicts

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> TnxLoad:
        return cls(data["model_type"], dict(data["kwargs"]), dict(data.get("neuron_config") or {}))

    @property
    def batch_size(self) -> int:
        size = self.kwargs.get("batch_size", 1)
        return max(size) if isinstance(size, list) else int(size)


def architecture(model_type: str) -> tuple[str, str]:
    try:
        return ARCHITECTURES[model_type]
    except KeyError:
        raise InvalidInput(
            f"tnx backend: transformers-neuronx 0.13 has no *ForSampling class for model_type {model_type!r}; "
            f"supported: {', '.join(sorted(ARCHITECTURES))}"
        ) from None


def _spec(load: TnxLoad, model_path: Path, **extra: Any) -> dict[str, Any]:
    module, cls = architecture(load.model_type)
    return {"module": f"{PACKAGE}.{module}", "class": cls, "model_path": str(model_path), **load.to_json(), **extra}


def _run(cache, action: str, spec: dict[str, Any], spec_path: Path, flags, timeout_s: float, what: str, preseed=None):
    """Run a child against `cache` (the ROOT in NEURON_COMPILE_CACHE_URL: libneuronxla appends
    `neuronxcc-<version>/`); returns (cache use, output lines)."""
    from neuronforge.backends.child import run_child

    spec_path.write_text(json.dumps(spec))
    env = {"NEURON_COMPILE_CACHE_URL": str(cache.root), "NEURON_CC_FLAGS": " ".join(flags)}
    lines: list[str] = []

    def child() -> list[str]:
        lines.extend(
            run_child("neuronforge.backends.tnx", [action, str(spec_path)], env=env, timeout_s=timeout_s, what=what)
        )
        return lines

    return compile_through_cache(cache, child, preseed), lines


# -- in the child process only ---------------------------------------------------------------------
def _build(spec: dict[str, Any]):
    from transformers_neuronx import ContinuousBatchingConfig, NeuronConfig, QuantizationConfig

    nc = dict(spec["neuron_config"])
    if nc.get("quant") is not None:
        nc["quant"] = QuantizationConfig(**nc["quant"])
    if nc.get("continuous_batching") is not None:
        nc["continuous_batching"] = ContinuousBatchingConfig(**nc["continuous_batching"])
    cls = getattr(importlib.import_module(spec["module"]), spec["class"])
    print(f"loading {spec['class']} from {spec['model_path']}", flush=True)
    model = cls.from_pretrained(spec["model_path"], **spec["kwargs"], neuron_config=NeuronConfig(**nc))
    model.to_neuron()  # compiles, or loads every graph from the persistent cache
    return model


def _compile(spec: dict[str, Any]) -> None:
    model = _build(spec)
    print("to_neuron finished", flush=True)
    if model.serialization_enabled():  # GPT-J / GPT-NeoX cannot save (no local compiled_graph_path)
        model.save(spec["neff_dir"])  # one `<sha256 of the HLO>[:20].neff` per graph: what load(dir) reads


def _generate(spec: dict[str, Any]) -> None:
    """Load like the consumer, then `sample` greedily (top_k=1) at the compiled batch size (the
    prompt repeated: transformers-neuronx refuses a batch it was not compiled for)."""
    import time

    import torch

    from neuronforge.backends.child import RESULT

    t0 = time.perf_counter()
    model = _build(spec)
    load_s = time.perf_counter() - t0
    batch = spec["batch"]
    for ids in spec["prompt_ids"]:
        started = time.perf_counter()
        out = model.sample(torch.tensor([ids] * batch), sequence_length=len(ids) + spec["max_new_tokens"], top_k=1)
        tokens = out[0, len(ids) :].tolist()[: spec["max_new_tokens"]]
        seconds = time.perf_counter() - started
        print(RESULT + json.dumps({"tokens": tokens, "load_s": load_s, "seconds": seconds}), flush=True)
    if model.serialization_enabled():  # the file names `load(dir)` will look for, for the same HLO
        import tempfile

        with tempfile.TemporaryDirectory() as tmp:
            model.save(tmp)
            print(NEFFS + json.dumps(sorted(os.listdir(tmp))), flush=True)


class TnxBackend(Backend):
    """transformers-neuronx `*ForSampling` in child processes; NEFFs live in the persistent cache."""

    name = "tnx"
    library = "transformers-neuronx"
    packages = ("transformers-neuronx", *NEURON_SDK_PACKAGES)
    architectures = frozenset(ARCHITECTURES)
    modeling_modules: ClassVar[dict[str, str]] = {
        mt: f"{PACKAGE}.{module.split('.', 1)[0]}" for mt, (module, _) in ARCHITECTURES.items()
    }
    quantizes_at_load = True
    loads_from_cache = True

    def compile(self, job: CompileJob) -> CompileResult:

        load = job.settings.get("tnx")
        if not isinstance(load, TnxLoad):
            raise InvalidInput("tnx backend: the serving profile gave no load settings (settings['tnx'])")
        # The consumer's NEURON_CC_FLAGS when the profile names them (they name every cache entry).
        flags = tuple(str(job.settings.get("neuron_cc_flags", " ".join(job.flags))).split())
        job.out.mkdir(parents=True, exist_ok=True)
        spec_path = job.out.parent / f"{job.out.name}.tnx-compile.json"
        use, _ = _run(
            job.cache,
            "compile",
            _spec(load, job.checkpoint_dir, neff_dir=str(job.out / NEFF_DIR)),
            spec_path,
            flags,
            job.timeout_s,
            f"tnx compile {job.target.slug}",
            job.preseed,
        )
        # The build: the load it was compiled for, plus the config and tokenizer (the weights are the
        # checkpoint's own: the profile publishes them as the split model).
        # NEURON_CC_FLAGS is part of every entry's name (`+<md5 of the flags>`): the load must use them too.
        record = {**load.to_json(), "neuron_cc_flags": " ".join(flags), "cache_entries": use.used}
        (job.out / LOAD_FILE).write_text(json.dumps(record, indent=2, sort_keys=True) + "\n")
        copy_served_files(job.checkpoint_dir, job.out)
        return CompileResult(cache_graphs(use), len(use.created))

    def generate(self, job: GenerateJob) -> Generation:
        if job.cache is None:
            raise InvalidInput("tnx backend: the smoke test needs the compile cache the consumer will read")
        record = json.loads((job.build_dir / LOAD_FILE).read_text())
        load, flags = TnxLoad.from_json(record), tuple(record.get("neuron_cc_flags", "").split())
        spec = _spec(load, job.checkpoint_dir, prompt_ids=job.prompt_ids, max_new_tokens=job.max_new_tokens)
        spec["batch"] = load.batch_size
        use, lines = _run(
            job.cache,
            "generate",
            spec,
            job.build_dir.parent / f"{job.build_dir.name}.tnx-generate.json",
            flags,
            job.timeout_s,
            "tnx smoke load",
        )
        from neuronforge.backends.child import generation_results

        out = generation_rows(job.prompt_ids, generation_results(lines))
        # A graph the cache lacked was compiled by this load: so would the consumer's be.
        out["compiled"] = list(use.created)
        saved = next((json.loads(line.removeprefix(NEFFS)) for line in lines if line.startswith(NEFFS)), [])
        present = {p.name for p in (job.build_dir / NEFF_DIR).glob("*.neff")}
        out["compiled"] += [f"{NEFF_DIR}/{name} (model.load layout)" for name in saved if name not in present]
        return out


BACKEND = TnxBackend()

if __name__ == "__main__":
    from neuronforge.backends.child import child_entry

    sys.exit(child_entry({"compile": _compile, "generate": _generate}, sys.argv[1:]))
