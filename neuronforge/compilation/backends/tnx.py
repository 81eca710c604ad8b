"""The `tnx` backend: transformers-neuronx 0.13 (Neuron SDK 2.21.1) on Neuron workers.

Written against transformers-neuronx's public API (aws-neuron/transformers-neuronx, the 0.13 line;
main 1ade6d74 = the 0.13.380 release of SDK 2.21.1):

    neuron_config = NeuronConfig(group_query_attention=…, quant=QuantizationConfig(…), …)
    model = <Arch>ForSampling.from_pretrained(checkpoint, batch_size=…, tp_degree=…, n_positions=…,
                                              amp=…, context_length_estimate=…, neuron_config=…)
    model.to_neuron()        # one NEFF per bucket, through libneuronxla's persistent cache
    model.sample(input_ids, sequence_length, top_k=1)

The classes differ (`CLASSES`, each read in its own model.py): Llama, Mistral, Mixtral, BLOOM, OPT and
GPT-2 derive from `base.NeuronModelBase` and also `save(dir)` / `load(dir)` their NEFFs; GPT-J and
GPT-NeoX derive from `module.PretrainedModel` and have no `save`, `load` or `serialization_enabled`
(calling one after `to_neuron()` is an AttributeError), so their NEFFs live only in the persistent
cache. GPT-2, GPT-J and GPT-NeoX have no `context_length_estimate` (nor an `n_positions` parameter:
it reaches their config class through `**kwargs`, which refuses any other key), GPT-J and GPT-NeoX no
int8 and no bucket lists. `load_problems` refuses what a class would raise, before any work.

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

import contextlib
import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from neuronforge.common.errors import InvalidInput
from neuronforge.compilation.backends.base import Backend, CompileJob, GenerateJob, Generation
from neuronforge.compilation.backends.child import copy_served_files
from neuronforge.compilation.compile_cache import CacheUse
from neuronforge.compilation.detect import NEURON_SDK_PACKAGES

PACKAGE = "transformers_neuronx"
LOAD_FILE = "tnx-load.json"  # the load settings the build was compiled for, its flags and cache entries
NEFF_DIR = "neff"  # the build's NEFFs in `model.save(dir)` layout (what `model.load(dir)` reads)
NEFFS = "NEFFS "  # the generate child's line naming the NEFF files a `save` of the loaded model writes
# Where each class was read: aws-neuron/transformers-neuronx 1ade6d74 (main, "Sync internal repo to
# external Dec 12 2024", the 0.13 line of SDK 2.21.1; tag v0.13.0 / branch release-2.21 = f4e38186 has the
# same bases and constructors), src/transformers_neuronx/<module>.py.
TNX_REVISION = "aws-neuron/transformers-neuronx 1ade6d74 (0.13, SDK 2.21.1)"
NEURON_MODEL_BASE = "base.NeuronModelBase"  # save / load / serialization_enabled; NEFFs also in model.save layout
PRETRAINED_MODEL = "module.PretrainedModel"  # none of those: its NEFFs exist only in the persistent cache


@dataclass(frozen=True)
class TnxClass:
    """What one `*ForSampling` class of transformers-neuronx 0.13 is, as its model.py defines it."""

    module: str  # under transformers_neuronx
    name: str
    base: str  # NEURON_MODEL_BASE or PRETRAINED_MODEL
    # Takes `context_length_estimate`: a parameter of its own. GPT-2, GPT-J and GPT-NeoX take none and
    # pass `**kwargs` to their config class, whose maybe_override_attributes raises KeyError('Found
    # invalid key "context_length_estimate".'); they take `n_positions` the same way (a config field).
    context_length_estimate: bool
    int8: bool  # NeuronConfig.quant; GPT-J / GPT-NeoX: NotImplementedError("Support for quantization ...")
    # `n_positions` / `batch_size` may be bucket lists (bucket.token_sizes / batch_sizes); GPT-J and
    # GPT-NeoX take one int (utils.power_of_two_bucket_sizes(128, n_positions)).
    buckets: bool
    # The HF config field `n_positions` may not exceed (a ValueError in __init__); None: unchecked.
    max_positions: str | None
    source: str  # model.py and what was read there

    @property
    def serializable(self) -> bool:
        """`save(dir)` / `load(dir)` exist (NeuronModelBase); on a module.PretrainedModel class they are
        AttributeErrors, as is `serialization_enabled`."""
        return self.base == NEURON_MODEL_BASE

    @property
    def context_graphs(self) -> bool:
        """Builds context-encoding graphs; GPT-2's GPT2ForSampling, GPT-J and GPT-NeoX decode the
        prompt token by token (token graphs only)."""
        return self.context_length_estimate


def _cls(module: str, name: str, base: str, cle: bool, int8: bool, buckets: bool, limit: str | None, note: str):
    source = f"{TNX_REVISION} {module.replace('.', '/')}.py: {note}"
    return TnxClass(module, name, base, cle, int8, buckets, limit, source)


# model_type -> class: the classes LMI's TNXModelLoader.MODEL_TYPE_TO_CLS_LOADER picks (djl-serving afece25d,
# engines/python/setup/djl_python/neuron_utils/model_loader.py).
CLASSES: dict[str, TnxClass] = {
    "llama": _cls("llama.model", "LlamaForSampling", NEURON_MODEL_BASE, True, True, True, None,
                  "LlamaForSampling(config, *, n_positions=2048, batch_size=1, amp='f32', tp_degree=2, "
                  "context_length_estimate=None, context_unroll=None, unroll=None, neuron_config=None, "
                  "prefixed_length=0, **kwargs)"),
    "mistral": _cls("mistral.model", "MistralForSampling", NEURON_MODEL_BASE, True, True, True, None,
                    "MistralForSampling(config, *, n_positions=2048, batch_size=1, amp='f32', tp_degree=2, "
                    "context_length_estimate=None, context_unroll=None, unroll=None, neuron_config=NeuronConfig(), "
                    "**kwargs)"),
    "mixtral": _cls("mixtral.model", "MixtralForSampling", NEURON_MODEL_BASE, True, True, True, None,
                    "MixtralForSampling(config, *, n_positions=2048, ..., neuron_config=NeuronConfig(), **kwargs)"),
    "bloom": _cls("bloom.model", "BloomForSampling", NEURON_MODEL_BASE, True, True, True, None,
                  "BloomForSampling(config, *, n_positions=2048, batch_size=1, amp='f32', tp_degree=2, "
                  "context_length_estimate=None, context_unroll=None, unroll=None, neuron_config=None, **kwargs)"),
    "opt": _cls("opt.model", "OPTForSampling", NEURON_MODEL_BASE, True, True, True, "max_position_embeddings",
                "OPTForSampling(config, batch_size=1, amp=None, tp_degree=2, n_positions=2048, unroll=None, "
                "context_length_estimate=None, context_unroll=1, neuron_config=None, **kwargs)"),
    "gpt2": _cls("gpt2.model", "GPT2ForSampling", NEURON_MODEL_BASE, False, True, False, "n_positions",
                 "GPT2ForSampling(config, batch_size=1, amp='f32', tp_degree=2, unroll=None, "
                 "init_n_active_tokens=None, neuron_config=None, tag=None, **kwargs); kwargs -> GPT2Config"),
    "gptj": _cls("gptj.model", "GPTJForSampling", PRETRAINED_MODEL, False, False, False, "n_positions",
                 "class GPTJForSampling(module.PretrainedModel), GPTJForSampling(config, batch_size=1, amp='f32', "
                 "tp_degree=2, unroll=None, init_n_active_tokens=None, neuron_config=None, **kwargs); kwargs -> "
                 "GPTJConfig"),
    "gpt_neox": _cls("gptneox.model", "GPTNeoXForSampling", PRETRAINED_MODEL, False, False, False, None,
                     "class GPTNeoXForSampling(module.PretrainedModel), GPTNeoXForSampling(config, batch_size=1, "
                     "amp='f32', tp_degree=2, unroll=None, init_n_active_tokens=None, neuron_config=None, "
                     "**kwargs); kwargs -> GPTNeoXConfig; use_parallel_residual=False is NotImplementedError"),
}  # fmt: skip
# model_type -> (module under transformers_neuronx, class)
ARCHITECTURES: dict[str, tuple[str, str]] = {mt: (c.module, c.name) for mt, c in CLASSES.items()}
NO_INT8 = frozenset(mt for mt, c in CLASSES.items() if not c.int8)


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


# transformers-neuronx compiles every graph for trn1, inf2 included (aws-neuron/transformers-neuronx@1ade6d74
# src/transformers_neuronx/compiler.py:136 `--target=trn1`, :149 `platform_target="trn1"`). The compile
# names it as the other Neuron backends do, so a target override on the worker (the stray-environment rule,
# neuronforge.compilation.graph_env) cannot reach it and the manifest records it.
COMPILE_TARGET = "trn1"


def tnx_env(cache_root: Path, flags: tuple[str, ...]) -> dict[str, str]:
    """transformers-neuronx's environment: the persistent cache ROOT (libneuronxla appends
    `neuronxcc-<version>/`) and the consumer's NEURON_CC_FLAGS (their md5 names every entry)."""
    return {"NEURON_COMPILE_CACHE_URL": str(cache_root), "NEURON_CC_FLAGS": " ".join(flags)}


def architecture(model_type: str) -> tuple[str, str]:
    return tnx_class(model_type).module, tnx_class(model_type).name


def tnx_class(model_type: str) -> TnxClass:
    try:
        return CLASSES[model_type]
    except KeyError:
        raise InvalidInput(
            f"tnx backend: transformers-neuronx 0.13 has no *ForSampling class for model_type {model_type!r}; "
            f"supported: {', '.join(sorted(CLASSES))}"
        ) from None


def load_problems(load: TnxLoad, model_config: dict[str, Any] | None = None) -> list[str]:
    """Why `<class>.from_pretrained(path, **load.kwargs, neuron_config=...)` would raise for this
    class (its constructor and base class; `model_config`: the checkpoint's config.json)."""
    c = tnx_class(load.model_type)
    where = f"{c.name} ({c.source})"
    out = []
    estimate = load.kwargs.get("context_length_estimate")
    if estimate is not None and not c.context_length_estimate:
        out.append(
            f"context_length_estimate={estimate}: {c.name} has no such parameter; its **kwargs go to its config "
            f"class, which raises KeyError('Found invalid key \"context_length_estimate\".') — {where}"
        )
    if not c.buckets:
        for key in ("n_positions", "batch_size"):
            if isinstance(load.kwargs.get(key), list):
                out.append(f"{key}={load.kwargs[key]}: {c.name} takes one int (no bucket lists) — {where}")
    if load.neuron_config.get("quant") is not None and not c.int8:
        out.append(f"int8: {c.name} raises NotImplementedError('Support for quantization is not yet implemented')")
    if load.neuron_config.get("continuous_batching") is not None and not c.buckets:
        out.append(f"continuous batching needs bucket lists, which {c.name} does not take — {where}")
    for key in ("unroll", "init_n_active_tokens"):
        if load.kwargs.get(key) is not None and c.base == PRETRAINED_MODEL:
            out.append(f"{key}={load.kwargs[key]}: {c.name} raises NotImplementedError — {where}")
    config = model_config or {}
    n_positions = load.kwargs.get("n_positions")
    limit = config.get(c.max_positions) if c.max_positions else None
    top = max(n_positions) if isinstance(n_positions, list) else n_positions
    if isinstance(limit, int) and isinstance(top, int) and top > limit:
        out.append(
            f"n_positions={top} exceeds the checkpoint's {c.max_positions}={limit}: {c.name} raises ValueError "
            f"('Sequence length ... cannot be larger than position embedding's context size') — {where}"
        )
    if load.model_type == "gpt_neox" and config.get("use_parallel_residual") is False:
        out.append(
            f"use_parallel_residual=false: {c.name} raises NotImplementedError('use_parallel_residual=False is "
            f"not yet implemented') — {where}"
        )
    return out


def _checked(load: TnxLoad, model_dir: Path, what: str) -> None:
    config = None
    with contextlib.suppress(OSError, ValueError):  # the load itself reports a missing or broken config.json
        config = json.loads((model_dir / "config.json").read_text(encoding="utf-8"))
    problems = load_problems(load, config if isinstance(config, dict) else None)
    if problems:
        raise InvalidInput(f"tnx backend: {what} would fail: " + "; ".join(problems))


def _spec(load: TnxLoad, model_path: Path, **extra: Any) -> dict[str, Any]:
    c = tnx_class(load.model_type)
    return {
        "module": f"{PACKAGE}.{c.module}",
        "class": c.name,
        "serializable": c.serializable,  # save/load exist (base.NeuronModelBase), see TnxClass
        "model_path": str(model_path),
        **load.to_json(),
        **extra,
    }


class TnxBackend(Backend):
    """transformers-neuronx `*ForSampling` in child processes; NEFFs live in the persistent cache."""

    name = "tnx"
    library = "transformers-neuronx"
    packages = ("transformers-neuronx", *NEURON_SDK_PACKAGES)
    architectures = frozenset(ARCHITECTURES)
    modeling_modules: ClassVar[dict[str, str]] = {
        mt: f"{PACKAGE}.{c.module.split('.', 1)[0]}" for mt, c in CLASSES.items()
    }
    quantizes_at_load = True

    toolchain_module = "tnx"

    def compile_request(self, job: CompileJob) -> tuple[dict[str, Any], dict[str, str]]:
        load = job.settings.get("tnx")
        if not isinstance(load, TnxLoad):
            raise InvalidInput("tnx backend: the serving profile gave no load settings (settings['tnx'])")
        _checked(load, job.checkpoint_dir, f"{tnx_class(load.model_type).name}.from_pretrained")
        spec = _spec(load, job.checkpoint_dir, save_dir=str(job.out / NEFF_DIR))
        return spec, {**tnx_env(job.cache.root, self._flags(job)), "NEURON_PLATFORM_TARGET_OVERRIDE": COMPILE_TARGET}

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
        (job.out / LOAD_FILE).write_text(json.dumps(record, indent=2, sort_keys=True) + "\n", encoding="utf-8")
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
        _checked(load, job.model_dir, f"{tnx_class(load.model_type).name}.from_pretrained")
        spec = _spec(load, job.model_dir, prompt_ids=job.prompt_ids, max_new_tokens=job.max_new_tokens)
        spec["batch"] = load.batch_size
        spec["measure"] = job.measure
        if job.settings.get("neff_dir") and job.settings.get("load_neffs"):
            if not spec["serializable"]:  # LMI's maybe_compile_model would call model.load(dir) on it
                raise InvalidInput(
                    f"tnx backend: {spec['class']} derives from {PRETRAINED_MODEL} and has no load(dir): "
                    "its NEFFs can only come from the persistent compile cache"
                )
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
