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
compile created or reused. The smoke test loads with the settings the published launch files give LMI
through a cache holding only the entries they name (`LmiNeuronxProfile.smoke_load`): a compile there
fails it. int8 is quantized by transformers-neuronx itself while loading (`quantizes_at_load`), from
the unquantized checkpoint.

The SDK is imported only in the SDK image's own interpreter (`neuronforge_toolchain.tnx`).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from neuronforge.backends.base import Backend, CompileJob, GenerateJob, Generation
from neuronforge.backends.child import copy_served_files
from neuronforge.compile_cache import CacheUse
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


def tnx_env(cache_root: Path, flags: tuple[str, ...]) -> dict[str, str]:
    """transformers-neuronx's environment: the persistent cache ROOT (libneuronxla appends
    `neuronxcc-<version>/`) and the consumer's NEURON_CC_FLAGS (their md5 names every entry)."""
    return {"NEURON_COMPILE_CACHE_URL": str(cache_root), "NEURON_CC_FLAGS": " ".join(flags)}


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

    toolchain_module = "tnx"

    def compile_request(self, job: CompileJob) -> tuple[dict[str, Any], dict[str, str]]:
        load = job.settings.get("tnx")
        if not isinstance(load, TnxLoad):
            raise InvalidInput("tnx backend: the serving profile gave no load settings (settings['tnx'])")
        spec = _spec(load, job.checkpoint_dir, save_dir=str(job.out / NEFF_DIR))
        return spec, tnx_env(job.cache.root, self._flags(job))

    @staticmethod
    def _flags(job: CompileJob) -> tuple[str, ...]:
        """The consumer's NEURON_CC_FLAGS when the profile names them (they name every cache entry)."""
        return tuple(str(job.settings.get("neuron_cc_flags", " ".join(job.flags))).split())

    def finish_build(self, job: CompileJob, use: CacheUse) -> None:
        """The build: the load it was compiled for, with its NEURON_CC_FLAGS (part of every entry's
        name: `+<md5 of the flags>`, so the load must use them too) and the cache entries, plus the
        config and tokenizer (the weights are the checkpoint's own: the profile publishes them as
        the split model)."""
        load = job.settings["tnx"]
        record = {**load.to_json(), "neuron_cc_flags": " ".join(self._flags(job)), "cache_entries": use.used}
        (job.out / LOAD_FILE).write_text(json.dumps(record, indent=2, sort_keys=True) + "\n")
        copy_served_files(job.checkpoint_dir, job.out)

    def generate_request(self, job: GenerateJob) -> tuple[dict[str, Any], dict[str, str]]:
        """LMI's load of the published split model (`settings["tnx"]`: the load the launch files give
        LMI, with its NEURON_CC_FLAGS) through `job.cache` (the entries the launch files name), or,
        with `settings["load_neffs"]`, through `model.load(settings["neff_dir"])` as LMI does for a
        local compiled_graph_path."""
        load = job.settings.get("tnx")
        if not isinstance(load, TnxLoad):
            raise InvalidInput("tnx backend: the smoke test needs the load the launch files give LMI")
        flags = tuple(str(job.settings.get("neuron_cc_flags", "")).split())
        spec = _spec(load, job.model_dir, prompt_ids=job.prompt_ids, max_new_tokens=job.max_new_tokens)
        spec["batch"] = load.batch_size
        if job.settings.get("neff_dir") and job.settings.get("load_neffs"):
            spec["load_dir"] = str(job.settings["neff_dir"])
        return spec, tnx_env(job.cache.root, flags)

    def generation(self, job: GenerateJob, result: dict[str, Any]) -> Generation:
        """Also: the published `model.save` folder must hold every NEFF a save of the loaded model
        writes (what `model.load(dir)` would look for), or LMI with a local path would compile."""
        out = super().generation(job, result)
        neff_dir = job.settings.get("neff_dir")
        if neff_dir and result.get("neffs") is not None:
            present = {p.name for p in Path(neff_dir).glob("*.neff")}
            out["compiled"] = [f"{NEFF_DIR}/{n} (model.load layout)" for n in result["neffs"] if n not in present]
        return out


BACKEND = TnxBackend()
