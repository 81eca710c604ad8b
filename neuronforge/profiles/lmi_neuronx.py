"""Profile `lmi-neuronx`: LMI (DJL Serving) on transformers-neuronx — the last LMI Neuron image,
`deepjavalibrary/djl-serving:0.33.0-pytorch-inf2` (serving/docker/pytorch-inf2.Dockerfile at
djl-serving 1132e3ab~1 = afece25d, the commit before Neuron support was removed): Neuron SDK 2.21.1,
neuronx-cc 2.16.372.0 (`2.16.372.0+4a9b2326`), transformers-neuronx 0.13.380; inf2 and trn1.

What LMI does with a split model and a NEFF cache (djl-serving afece25d,
engines/python/setup/djl_python/): `transformers_neuronx.py` `set_configs` validates the
properties (`properties_manager/tnx_properties.py` TransformerNeuronXProperties), sets
`batch_size = max_rolling_batch_size` when rolling batch is on, and picks continuous batching for
llama/mistral with `max_rolling_batch_size > 1`; `neuron_utils/model_loader.py` TNXModelLoader builds
the NeuronConfig and the `from_pretrained` keyword arguments from them, loads `<Arch>ForSampling`
from `model_id` (`load_split_model=true`) and calls `to_neuron()`. `compiled_graph_path` decides where
the NEFFs come from:
- an `s3://` URI becomes `NEURON_COMPILE_CACHE_URL` (the persistent cache ROOT: libneuronxla looks in
  `neuronxcc-<full version>/MODULE_<hlo hash>+<flags hash>/`);
- a local directory also does, and is passed to `model.load(dir)` as well, so `to_neuron()` reads
  `<sha256 of the HLO>[:20].neff` files from it (transformers-neuronx base.py `_load_compiled_artifacts`)
  and never compiles — the `model.save(dir)` layout, not the cache's.
So we publish both: the cache entries in the store's `neuron-cache/` (what an S3 store's properties
name) and the build's `split/neff/` (what a `file://` store's properties name). `file://` URIs are
refused by LMI (only `s3://` and local paths), and a path of the publishing host holds nothing on
another host: a `file://` store's launch files name paths of LMI's container (`/opt/ml/model/...`,
its model store) and `launch/run-lmi.sh` resolves the host's side where it runs — it mounts the
artifact's `split/` there wherever the store is, and runs (or prints) the `docker run`. GPT-J and
GPT-NeoX have no `load` (their classes derive from transformers-neuronx's `module.PretrainedModel`, not
`base.NeuronModelBase`): LMI would raise AttributeError on a local compiled_graph_path, so for them the
properties name none, and `NEURON_COMPILE_CACHE_URL` (in serving.properties' `option.env`, which LMI puts
into its Python worker's environment, and in lmi.env) names `/opt/ml/model/neuron-cache`, where
run-lmi.sh copies the artifact's cache entries from the store.

The properties differ per family as the classes do (neuronforge.compilation.backends.tnx.CLASSES):
`option.context_length_estimate` only where the class has that parameter (not GPT-2, GPT-J, GPT-NeoX:
their config class raises KeyError on it), `option.group_query_attention` only for llama, mistral and
mixtral, `option.quantize=static_int8` never for GPT-J / GPT-NeoX, continuous batching only for llama
and mistral (LMI's own rule; the others run LMI's naive rolling batch).

The NEFFs are found only if LMI's load produces the same HLO as our compile: `compile_settings`
derives the load FROM the rendered `serving.properties` by replaying LMI's rules (`lmi_load`), and
`preflight` parses the published properties back and compares.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from collections.abc import Mapping
from math import ceil
from pathlib import Path
from typing import TYPE_CHECKING, Any

from neuronforge.artifacts import launch_script, layout
from neuronforge.common.errors import InvalidInput
from neuronforge.compilation.backends.child import TOKENIZER_FILES
from neuronforge.compilation.backends.tnx import (
    BACKEND,
    CLASSES,
    LOAD_FILE,
    NEFF_DIR,
    NO_INT8,
    PRETRAINED_MODEL,
    TnxClass,
    TnxLoad,
    load_problems,
)
from neuronforge.profiles.base import (
    LAUNCH_DIR,
    Artifact,
    AssembleJob,
    LaunchContext,
    Pins,
    ServingProfile,
    SmokeLoad,
    read_env_file,
    read_json,
    tokenizer_problems,
)
from neuronforge.profiles.line_lifecycles import LMI_NEURONX
from neuronforge.profiles.release_table import profile_releases
from neuronforge.records.base import RecordError
from neuronforge.records.local import read_local
from neuronforge.records.neff_cache import NeffCacheRecord

if TYPE_CHECKING:
    from neuronforge.spec.modelconfig import ModelArch
    from neuronforge.spec.target import TargetSpec
    from neuronforge.spec.toolchain import Toolchain
    from neuronforge.stores import ArtifactStore

# The one registered release of the line (the release table: neuronforge/profiles/releases/).
(_RELEASE,) = profile_releases("lmi-neuronx")
SDK_RELEASE = _RELEASE.sdk
COMPILER_VERSION = _RELEASE.version("neuronx-cc")  # neuronxcc.__version__, local label included
TNX_VERSION = _RELEASE.version("transformers-neuronx")
LMI_IMAGE = str(_RELEASE.image)  # serving/docker/README.md at afece25d
ENTRY_POINT = "djl_python.transformers_neuronx"
# The image's `ENV NEURON_CC_FLAGS` (pytorch-inf2.Dockerfile at afece25d): LMI's load compiles — and looks
# cache entries up, whose names carry the flags' hash — with these, so our compile uses exactly them.
LMI_CC_FLAGS = "--logfile /tmp/compile.log --temp-dir=/tmp"
# The LMI image's Python (3.10), which has transformers-neuronx (docker/neuron-sdk/images.json).
LMI_PYTHON = "/usr/bin/python3"
# Why this profile compiles on Neuron hosts: in transformers-neuronx 0.13 (aws-neuron/transformers-neuronx
# src/transformers_neuronx/base.py @ 1ade6d74, NeuronModelBase.to_neuron) `to_neuron()` is
# `self.load_weights(); self.compile(); self.setup()` — the weights are sharded onto NeuronCores
# (decoder.py `ParallelTensorManipulator`, after `ops.init()`) before any HLO is compiled; its own TODO
# reads "decouple hlo_generation from load weights so compile can be called before it".
TNX_COMPILE_NEEDS_DEVICES = "transformers-neuronx's to_neuron() loads the weights onto NeuronCores before compiling"

_SRC = "deepjavalibrary/djl-serving afece25d (1132e3ab~1) engines/python/setup/djl_python"
RULE_PROPS = f"{_SRC}/properties_manager/tnx_properties.py"
RULE_CONFIGS = f"{_SRC}/transformers_neuronx.py set_configs"
RULE_LOADER = f"{_SRC}/neuron_utils/model_loader.py TNXModelLoader"
RULE_CACHE_PATH = f"{RULE_PROPS} compiled_path_validator; {RULE_LOADER}.maybe_compile_model"
# The front end's dynamic-batching size (rolling_batch=disable) is the model's top-level `batch_size`
# property, else the server's `batch_size` (djl-serving afece25d = 1132e3ab~1: wlm ModelInfo
# configPerModelSettings); the env only sets the server's, as SERVING_BATCH_SIZE (serving ConfigManager:
# SERVING_<KEY> -> <key>), since OPTION_* variables become `option.*` properties only.
RULE_FRONT_BATCH = (
    "djl-serving afece25d wlm/ModelInfo.java configPerModelSettings (batch_size, else the server's); "
    "serving/util/ConfigManager.java (SERVING_BATCH_SIZE -> batch_size)"
)
RULE_AUTO = "djl-serving wlm LmiConfigRecommender: rolling_batch=auto is tnx below max_rolling_batch_size 12, else vllm"
RULE_TNX_LOAD = "aws-neuron/transformers-neuronx 0.13 (1ade6d74) base.py load / _load_compiled_artifacts"
RULE_TNX_WEIGHTS = "aws-neuron/transformers-neuronx 0.13 (1ade6d74) module.py PretrainedModel.from_pretrained"

# Where LMI reads a model: its image's model store (CODE: djl-serving afece25d serving/docker/config.properties
# `model_store=/opt/ml/model`; serving/docker/README.md mounts the model folder there), a folder with
# serving.properties at its top being one model whose Python worker runs in it. The launch files of a file://
# store name paths under it, never the publishing host's, and run-lmi.sh mounts them where the store is.
CONTAINER_MODEL_DIR = "/opt/ml/model"
CONTAINER_CACHE = f"{CONTAINER_MODEL_DIR}/neuron-cache"  # GPT-J/NeoX: the entries run-lmi.sh copies
# `option.env=K=V[,K2=V2]` puts variables into the Python worker's environment (CODE: djl-serving afece25d
# engines/python/src/main/java/ai/djl/python/engine/PyModel.java `case "env"` -> PyEnv.addEnv, PyEnv.java
# getEnvironmentVars; not in LMI's docs), so serving.properties itself carries NEURON_COMPILE_CACHE_URL
# for the classes that cannot take a local compiled_graph_path; lmi.env sets it too, for `--env-file`.
RULE_OPTION_ENV = "djl-serving afece25d engines/python/src/main/java/ai/djl/python/engine/PyModel.java case env"
# NeuronCores per Neuron device of the instances LMI serves: an Inferentia2 or Trainium chip holds two
# NeuronCore-v2 (DOCS: awsdocs-neuron about-neuron/arch/neuron-hardware/trainium.rst, inferentia2.rst).
CORES_PER_DEVICE = 2
RUN_FILE = "run-lmi.sh"
PROPERTIES_FILE = "serving.properties"
ENV_FILE = "lmi.env"
FRONT_BATCH_ENV = "SERVING_BATCH_SIZE"
CACHE_FILE = "neff-cache.json"  # the cache entries and the load the build was compiled for
MODEL_DIR = "model"  # split/model/: config, safetensors, tokenizer
# model_loader.py MODEL_TYPE_TO_CLS_LOADER: the architectures LMI loads with transformers-neuronx
LMI_MODEL_TYPES = frozenset({"opt", "gpt2", "gptj", "gpt_neox", "llama", "mistral", "mixtral", "bloom"})
CONTINUOUS_BATCHING_MODELS = frozenset({"llama", "mistral"})  # transformers_neuronx.py, OPTIMUM_CAUSALLM_...
GQA_MODELS = frozenset({"llama", "mistral", "mixtral"})  # "K/V cache sharding for llama and mistral model types"
DTYPE_TO_AMP = {"fp32": "f32", "fp16": "f16", "bf16": "bf16"}  # tnx_properties Dtype: amp = dtype.name
GQA_VALUES = ("shard-over-heads", "shard-over-batch", "replicated-heads", "all-gather-heads")  # TnXGQAMethods
# The planner's GQA strategy -> the transformers-neuronx one that lays the KV heads out the same way.
PLANNER_GQA = {"shard-over-heads": "shard-over-heads", "replicate-to-tp": "replicated-heads"}
ROLLING_BATCH = ("tnx", "disable")  # what this profile renders (backend_options rolling_batch)
# Properties this profile renders or LMI needs; any other option.* may change the graphs (fuse_qkv,
# attention_layout, neuron_optimize_level, ...) and is refused by preflight.
KNOWN_OPTIONS = frozenset(
    {
        "entryPoint",
        "model_id",
        "model_loader",
        "load_split_model",
        "compiled_graph_path",
        "rolling_batch",
        "max_rolling_batch_size",
        "batch_size",
        "tensor_parallel_degree",
        "n_positions",
        "dtype",
        "context_length_estimate",
        "group_query_attention",
        "quantize",
        "model_loading_timeout",
        "env",  # RULE_OPTION_ENV: the worker's environment, not a load option
    }
)
S3_URI = re.compile(r"^s3://([^/]+)/([\w\W]+)")  # compiled_path_validator's own pattern
MODULE_ENTRY = re.compile(r"MODULE_[0-9a-f]+\+[0-9a-f]{8}")


# -- the launch <-> the transformers-neuronx load --------------------------------------------------------
def build_context_length_estimates(n_positions: int) -> list[int]:
    """LMI's default buckets under continuous batching (neuron_utils/utils.py, INITIAL_BUCKET_SIZE 1024)."""
    if n_positions <= 128:
        return [n_positions]
    out, size = [128], 1024
    while n_positions > size:
        out.append(size)
        size *= 2
    return [*out, n_positions]


def parse_properties(text: str) -> dict[str, str]:
    """`serving.properties` as java.util.Properties reads a simple file: `key=value` (or `key: value`),
    `#` / `!` comments, blanks around key and value trimmed."""
    out = {}
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line[0] in "#!":
            continue
        cut = min((i for i in (line.find("="), line.find(":")) if i >= 0), default=len(line))
        out[line[:cut].strip()] = line[cut + 1 :].strip()
    return out


def env_to_properties(env: Mapping[str, str]) -> dict[str, str]:
    """LMI's environment form of the options: `HF_MODEL_ID` is option.model_id, `OPTION_<NAME>` is
    option.<name> lower-cased (`OPTION_ENTRYPOINT` is option.entryPoint)."""
    out = {}
    for key, value in env.items():
        if key == "HF_MODEL_ID":
            out["option.model_id"] = value
        elif key == "OPTION_ENTRYPOINT":
            out["option.entryPoint"] = value
        elif key.startswith("OPTION_"):
            out["option." + key.removeprefix("OPTION_").lower()] = value
    return out


def _int(props: Mapping[str, str], key: str, problems: list[str], default: int | None = None) -> int | None:
    value = props.get(f"option.{key}")
    if value is None:
        if default is None:
            problems.append(f"option.{key} is not set: LMI would pick its own smart default ({RULE_CONFIGS})")
        return default
    try:
        return int(value)
    except ValueError:
        problems.append(f"option.{key}={value!r} is not an integer ({RULE_PROPS})")
        return default


def lmi_load(props: Mapping[str, str], model_type: str) -> tuple[TnxLoad | None, list[str]]:
    """What LMI's TNXModelLoader passes to transformers-neuronx for these `serving.properties`, and
    why LMI would refuse them or load something other than a tnx split model."""
    problems: list[str] = []
    if props.get("engine") != "Python":
        problems.append(f"engine={props.get('engine')!r}: the Neuron handlers run on engine=Python")
    if props.get("option.entryPoint") != ENTRY_POINT:
        problems.append(f"option.entryPoint={props.get('option.entryPoint')!r}: must be {ENTRY_POINT}")
    loader = props.get("option.model_loader")
    if loader != "tnx":
        problems.append(
            f"option.model_loader={loader!r}: a split model with a NEFF cache loads with tnx ({RULE_LOADER})"
        )
    if props.get("option.partition_schema") == "optimum":
        problems.append(f"option.partition_schema=optimum is refused with model_loader=tnx ({RULE_PROPS})")
    if str(props.get("option.load_split_model", "")).lower() != "true":
        problems.append(
            f"option.load_split_model must be true: model_id is a split model ({RULE_LOADER}.set_neuron_model)"
        )
    rolling = props.get("option.rolling_batch")
    if rolling == "auto" or rolling is None:
        problems.append(
            f"option.rolling_batch={rolling!r}: its meaning depends on the batch size ({RULE_AUTO}); "
            "state tnx or disable"
        )
    elif rolling not in ROLLING_BATCH:
        problems.append(f"option.rolling_batch={rolling!r}: only tnx or disable load the tnx graphs ({RULE_PROPS})")
    dtype = props.get("option.dtype", "fp16")  # TransformerNeuronXProperties.dtype defaults to fp16
    amp = DTYPE_TO_AMP.get(dtype)
    if amp is None:
        problems.append(f"option.dtype={dtype!r}: LMI accepts {sorted(DTYPE_TO_AMP)} ({RULE_PROPS} Dtype)")
    quantize = props.get("option.quantize")
    if quantize not in (None, "static_int8"):
        problems.append(
            f"option.quantize={quantize!r}: transformers-neuronx in LMI knows only static_int8 ({RULE_PROPS})"
        )
    gqa = props.get("option.group_query_attention")
    if gqa is not None and gqa not in GQA_VALUES:
        problems.append(f"option.group_query_attention={gqa!r}: one of {list(GQA_VALUES)} ({RULE_PROPS} validate_gqa)")
    estimate = None
    if props.get("option.context_length_estimate"):
        try:
            estimate = [int(x) for x in props["option.context_length_estimate"].split(",")]
        except ValueError:
            problems.append(
                f"option.context_length_estimate={props['option.context_length_estimate']!r}: comma-separated integers"
            )
    tp = _int(props, "tensor_parallel_degree", problems)
    n_positions = _int(props, "n_positions", problems)
    batch = _int(props, "batch_size", problems, default=1)
    server_batch = props.get("batch_size", "1")  # the front end's dynamic batching (ModelInfo)
    if rolling not in (None, "disable") and server_batch.isdigit() and int(server_batch) > 1:
        problems.append(
            f"batch_size={server_batch} (dynamic batching) makes the front end set rolling_batch=disable "
            f"({RULE_AUTO.split(':')[0]} setRollingBatch)"
        )
    if rolling not in (None, "disable"):
        if batch and batch > 1:
            problems.append(
                f"option.batch_size={batch} with rolling batch: LMI refuses both at once "
                f"({RULE_PROPS} validate_batch_size)"
            )
        batch = _int(props, "max_rolling_batch_size", problems)
    if problems or None in (tp, n_positions, batch, amp):
        return None, problems
    assert tp is not None and n_positions is not None and batch is not None and amp is not None
    if estimate is not None and max(estimate) > n_positions:
        problems.append(
            f"context_length_estimate {estimate} exceeds n_positions {n_positions} ({RULE_TNX_WEIGHTS} sanity check)"
        )
    continuous = rolling == "tnx" and model_type in CONTINUOUS_BATCHING_MODELS and batch > 1
    neuron_config: dict[str, Any] = {"on_device_embedding": True}  # set_on_device_embedding: load_split_model
    if continuous:
        neuron_config["continuous_batching"] = {"batch_size_for_shared_caches": batch}
    if quantize == "static_int8":
        neuron_config["quant"] = {"quant_dtype": "s8", "dequant_dtype": amp}
    if gqa is not None:
        neuron_config["group_query_attention"] = gqa
    kwargs: dict[str, Any] = {"batch_size": batch, "amp": amp, "tp_degree": tp, "n_positions": n_positions}
    if estimate is not None:
        kwargs["context_length_estimate"] = estimate
    if continuous:  # get_model_specific_kwargs: lists under continuous batching
        kwargs["n_positions"] = [n_positions]
        kwargs.setdefault("context_length_estimate", build_context_length_estimates(n_positions))
    return TnxLoad(model_type, kwargs, neuron_config), problems


def gqa_for(target: TargetSpec, model_config: Mapping[str, Any] | None) -> str | None:
    """The transformers-neuronx GQA strategy for the planner's choice (None: not a GQA model type)."""
    if model_config is None or model_config.get("model_type") not in GQA_MODELS:
        return None
    from neuronforge.spec.modelconfig import ModelArch, gqa_strategy

    strategy, _ = gqa_strategy(ModelArch.from_config(dict(model_config)), target.tp_degree)
    return PLANNER_GQA.get(strategy)


def family(model_type: str | None) -> TnxClass | None:
    return CLASSES.get(model_type or "")


def render_properties(
    target: TargetSpec,
    model_config: Mapping[str, Any] | None,
    model_id: str,
    compiled_graph_path: str | None,
    model_type: str | None = None,
) -> dict[str, str]:
    """`serving.properties` for a target: every value LMI uses to build the load stated explicitly,
    and only properties the family's class takes (`compiled_graph_path=None`: none, the NEFFs come
    from the cache NEURON_COMPILE_CACHE_URL names)."""
    t = target.normalized()
    cls = family(model_type or (model_config or {}).get("model_type"))
    rolling = str(t.backend_options.get("rolling_batch", "tnx"))
    props: dict[str, str | None] = {
        "engine": "Python",
        "option.entryPoint": ENTRY_POINT,
        "option.model_id": model_id,
        "option.model_loader": "tnx",
        "option.load_split_model": "true",
        "option.compiled_graph_path": compiled_graph_path,
        "option.rolling_batch": rolling,
        "option.tensor_parallel_degree": str(t.tp_degree),
        "option.n_positions": str(t.sequence_length),
        "option.dtype": t.dtype,
    }
    if cls is None or cls.context_length_estimate:  # GPT-2 / GPT-J / GPT-NeoX: KeyError in their config class
        props["option.context_length_estimate"] = ",".join(
            map(str, t.context_encoding_buckets or build_context_length_estimates(t.context_length))
        )
    if rolling != "disable":
        props["option.max_rolling_batch_size"] = str(t.batch_size)
    else:  # dynamic batching: the front end batches requests (batch_size), the handler compiles for it
        props["batch_size"] = props["option.batch_size"] = str(t.batch_size)
    gqa = gqa_for(t, model_config)
    if gqa is not None:
        props["option.group_query_attention"] = gqa
    if t.quantization.enabled:
        props["option.quantize"] = "static_int8"
    return {k: v for k, v in props.items() if v is not None}


def render_run_lmi(ctx: LaunchContext, how: str, devices: int) -> str:
    """`launch/run-lmi.sh` for one artifact (`launch_templates/run-lmi.sh`): the launch files name LMI's
    container paths; it resolves the host's side at deploy time (as sync.sh does for the vLLM profiles)
    and runs `docker run` with the mounts that make those paths hold the artifact, its checks failing
    before Docker starts, in one line each. It is given where the artifact and (GPT-J/NeoX) the store's
    NEFF cache are relative to the store's root, so it finds them wherever the store is mounted."""
    key = ctx.artifact_uri.rstrip("/").rsplit("/", 1)[-1]
    artifact_prefix = cache_prefix = ""
    if how != "s3":
        artifact = ctx.artifact_uri.removeprefix("file://").rstrip("/")
        cache = ctx.cache_uri.removeprefix("file://").rstrip("/")
        root = os.path.commonpath([artifact, cache])
        artifact_prefix, cache_prefix = os.path.relpath(artifact, root), os.path.relpath(cache, root)
    return launch_script.render(
        "run-lmi.sh",
        REF=f"lmi-neuronx@{SDK_RELEASE}",
        KIND=how,
        ARTIFACT_PREFIX=artifact_prefix,
        CACHE_PREFIX=cache_prefix,
        KEY=key,
        DEVICES=devices,
        IMAGE=LMI_IMAGE,
    )


# -- the profile ---------------------------------------------------------------------------------------
class LmiNeuronxProfile(ServingProfile):
    name = "lmi-neuronx"
    title = f"LMI (DJL Serving, {LMI_IMAGE}) on transformers-neuronx {TNX_VERSION}: split model + NEFF cache"
    pins = Pins(
        sdk_release=SDK_RELEASE, compiler_version=COMPILER_VERSION, packages={"transformers-neuronx": TNX_VERSION}
    )
    backend = BACKEND
    toolchain_python = LMI_PYTHON
    serving_image = LMI_IMAGE  # run-lmi.sh's `docker run` image
    # transformers-neuronx compiles inside `to_neuron()`, which also loads the weights and the NEFFs
    # onto NeuronCores: it cannot compile on a host without Neuron devices (see TNX_COMPILE_NEEDS_DEVICES).
    device_stages = frozenset({"compile", "smoke"})
    device_compile_reason = TNX_COMPILE_NEEDS_DEVICES
    instance_families = frozenset({"inf2", "trn1", "trn1n"})  # the pytorch-inf2 image
    lifecycle = LMI_NEURONX
    consumer_architectures = LMI_MODEL_TYPES
    folder = "split"
    needs_checkpoint = True
    publishes = (
        "split/model/: the checkpoint (config.json, safetensors, tokenizer) LMI loads with load_split_model; "
        "split/neff/: the NEFFs in model.save layout (compiled_graph_path for local paths); the NEFF cache "
        "entries in the store's neuron-cache/ (compiled_graph_path for s3://); launch/: serving.properties, "
        "lmi.env, neff-cache.json, run-lmi.sh (docker run with the mounts, resolved where the store is)"
    )

    # -- planning ------------------------------------------------------------------------------
    def problems(self, target: TargetSpec, model_type: str | None = None) -> list[str]:
        """The base checks and what LMI's properties cannot express or transformers-neuronx 0.13 cannot do."""
        out = super().problems(target, model_type)
        t = target.normalized()
        unknown = sorted(set(t.backend_options) - {"rolling_batch"})
        if unknown:
            out.append(
                f"backend_options {unknown} are not accepted by profile {self.name}; accepted: ['rolling_batch']"
            )
        rolling = t.backend_options.get("rolling_batch", "tnx")
        if rolling not in ROLLING_BATCH:
            out.append(
                f"backend_options rolling_batch={rolling!r}: tnx (rolling batch) or disable (dynamic batching); "
                f"auto depends on the batch size ({RULE_AUTO}) and vllm loads no tnx graphs"
            )
        cls = family(model_type)
        if cls is not None and not cls.context_length_estimate and t.context_encoding_buckets:
            out.append(
                f"context_encoding_buckets cannot be expressed for {model_type}: {cls.name} has no "
                f"context_length_estimate (it encodes the prompt token by token; {cls.source}); leave them unset"
            )
        if t.token_generation_buckets:
            out.append(
                "token_generation_buckets cannot be expressed in LMI: it passes n_positions as one value "
                f"({RULE_LOADER}.get_model_specific_kwargs); leave them unset"
            )
        if t.context_encoding_buckets and t.context_encoding_buckets[-1] > t.context_length:
            out.append(
                f"context_encoding_buckets {list(t.context_encoding_buckets)} exceed max_context_length="
                f"{t.context_length}; drop the longer buckets (they become option.context_length_estimate)"
            )
        if t.logical_nc_config != t.instance.default_lnc:
            out.append(
                f"logical_nc_config={t.logical_nc_config}: LMI has no option for it and transformers-neuronx runs "
                f"at the instance's default ({t.instance.default_lnc}); leave it unset"
            )
        q = t.quantization
        if q.enabled:
            if q.dtype != "int8" or q.method != "per_channel_symmetric":
                out.append(
                    f"quantization {q.slug}: LMI's only quantization is option.quantize=static_int8, which "
                    "transformers-neuronx applies at load as int8 per output channel (QuantizationConfig "
                    f"vector_dynamic, absmax/127; {RULE_PROPS}); use int8:per_channel"
                )
            if set(q.modules_to_not_convert) != {"lm_head"}:
                out.append(
                    f"modules_to_not_convert {list(q.modules_to_not_convert)}: LMI cannot pass a no_quantize_list; "
                    "transformers-neuronx quantizes every attention and MLP weight and never lm_head"
                )
            if model_type in NO_INT8:
                out.append(
                    f"{model_type}: transformers-neuronx 0.13 has no int8 support for it ({CLASSES[model_type].name} "
                    "raises NotImplementedError('Support for quantization is not yet implemented'); LMI's "
                    f"option.quantize=static_int8 sets NeuronConfig.quant; {RULE_LOADER}.set_neuron_config)"
                )
        return out

    def arch_problems(self, target: TargetSpec, arch: ModelArch) -> list[str]:
        from neuronforge.spec.modelconfig import gqa_strategy

        strategy, _ = gqa_strategy(arch, target.tp_degree)
        if arch.model_type in GQA_MODELS and strategy not in PLANNER_GQA:
            return [
                f"{arch.num_kv_heads} kv heads neither divide nor are divided by tp={target.tp_degree}: "
                f"transformers-neuronx's GQA strategies ({', '.join(GQA_VALUES)}) cannot lay them out as the plan "
                "assumes; choose a tp that divides or is a multiple of the kv heads"
            ]
        return []

    def toolchain_problems(self, toolchain: Toolchain) -> list[str]:
        out = super().toolchain_problems(toolchain)
        flags = toolchain.compiler_flags
        flags = flags if isinstance(flags, str) else " ".join(flags)
        if flags.strip() and flags.split() != LMI_CC_FLAGS.split():
            out.append(
                f"compiler flags {flags!r}: LMI compiles and looks NEFFs up with its image's NEURON_CC_FLAGS "
                f"{LMI_CC_FLAGS!r} (every cache entry's name carries the flags' hash); leave the flags unset"
            )
        return out

    # -- compiling -----------------------------------------------------------------------------
    def compile_settings(
        self,
        target: TargetSpec,
        model_type: str,
        quantized_dir: Path | None = None,
        model_config: Mapping[str, Any] | None = None,
    ) -> dict[str, Any]:
        """`{"tnx": TnxLoad}`: the load LMI builds from the properties we publish (`lmi_load`)."""
        props = render_properties(target, model_config, "/opt/ml/model", "/opt/ml/neff", model_type)
        load, problems = lmi_load(props, model_type)
        if load is not None:
            problems = load_problems(load, dict(model_config) if model_config else None)
        if load is None or problems:
            raise InvalidInput(f"profile {self.ref}: LMI would not load {target.slug}: " + "; ".join(problems))
        return {"tnx": load, "neuron_cc_flags": LMI_CC_FLAGS}

    # -- publishing ----------------------------------------------------------------------------
    def assemble_model(self, job: AssembleJob, dest: Path) -> None:
        """split/model/: the checkpoint's config, weights and tokenizer (unquantized: static_int8
        quantizes at load); split/neff/: the build's NEFFs in `model.save` layout."""
        assert job.checkpoint_dir is not None, "lmi-neuronx publishes the checkpoint (needs_checkpoint)"
        model = dest / MODEL_DIR
        model.mkdir(parents=True)
        for src in sorted(job.checkpoint_dir.iterdir()):
            if src.is_file() and (
                src.suffix == ".safetensors"
                or src.name
                in ("config.json", "model.safetensors.index.json", "generation_config.json", *TOKENIZER_FILES)
            ):
                shutil.copyfile(src, model / src.name)
        if (job.build_dir / NEFF_DIR).is_dir():
            shutil.copytree(job.build_dir / NEFF_DIR, dest / NEFF_DIR)

    def assemble(self, job: AssembleJob) -> dict[str, str]:
        outputs = super().assemble(job)
        outputs["neff_cache"] = f"{LAUNCH_DIR}/{CACHE_FILE}"
        outputs[self.folder] = f"{self.folder}/{MODEL_DIR}"  # what option.model_id names
        return outputs

    def _locations(self, ctx: LaunchContext) -> tuple[str, str | None, str]:
        """(model_id, compiled_graph_path, how): s3 stores by URI (the cache root); `file://` stores by
        paths of LMI's container, never of the publishing host (`run-lmi.sh` mounts the artifact's
        split/ at /opt/ml/model/split wherever the store is): compiled_graph_path the `model.save` folder,
        since LMI calls `model.load` on a local directory ("local") — except for the classes without
        `load` (GPT-J, GPT-NeoX: module.PretrainedModel), where a local compiled_graph_path is an
        AttributeError in LMI's maybe_compile_model: no compiled_graph_path, and NEURON_COMPILE_CACHE_URL
        names the cache run-lmi.sh fills with the artifact's entries ("local-cache")."""
        model_uri = ctx.model_uri(f"{self.folder}/{MODEL_DIR}")
        if model_uri.startswith("s3://"):
            return model_uri, ctx.cache_uri, "s3"
        local = f"{CONTAINER_MODEL_DIR}/{self.folder}/{MODEL_DIR}"
        cls = family(ctx.model_type)
        if cls is not None and not cls.serializable:
            return local, None, "local-cache"
        return local, f"{CONTAINER_MODEL_DIR}/{self.folder}/{NEFF_DIR}", "local"

    def launch_spec(self, ctx: LaunchContext) -> dict[str, str]:
        """`serving.properties` and `lmi.env` (the same options), `neff-cache.json` (the
        compiled_graph_path, the cache entries the graphs are in, and the load they were compiled for),
        and `run-lmi.sh` (the `docker run` that mounts them, resolved where it runs)."""
        assert ctx.build_dir is not None, "the LMI launch names the build's cache entries"
        t = ctx.target.normalized()
        model_id, graphs, how = self._locations(ctx)
        props = render_properties(t, ctx.model_config, model_id, graphs, ctx.model_type)
        local_cache = CONTAINER_CACHE if how == "local-cache" else None
        if local_cache is not None:  # serving.properties carries the variable itself (RULE_OPTION_ENV)
            props["option.env"] = f"NEURON_COMPILE_CACHE_URL={local_cache}"
        record = json.loads((ctx.build_dir / LOAD_FILE).read_text(encoding="utf-8"))
        cache = NeffCacheRecord(
            compiled_graph_path=graphs,
            neuron_compile_cache_url=local_cache,
            kind="model.save" if how == "local" else "neuron-compile-cache",
            cache_root=ctx.cache_uri,
            compiler_dir=layout.compiler_dir(ctx.toolchain.compiler, ctx.toolchain.compiler_version),
            entries=sorted(record.get("cache_entries", [])),
            neuron_cc_flags=record.get("neuron_cc_flags", ""),
            load=TnxLoad.from_json(record).to_json(),
        )
        if how == "s3":
            where = "# compiled_graph_path is the store's compile-cache ROOT (libneuronxla adds neuronxcc-<ver>/).\n"
        else:
            where = (
                f"# A file:// store: every path is one of LMI's container ({CONTAINER_MODEL_DIR}), none of this\n"
                f"# host's. Start with `bash launch/{RUN_FILE}` where the store is mounted, at any path: it mounts\n"
                f"# split/ at {CONTAINER_MODEL_DIR}/{self.folder} "
            )
            if how == "local":
                where += "and compiled_graph_path is the NEFFs in model.save layout\n# (LMI calls model.load on it).\n"
            else:
                where += (
                    f"and copies the NEFF cache entries to {local_cache}.\n"
                    f"# {CLASSES[ctx.model_type].name} has no load(dir) (it derives from transformers-neuronx's "
                    f"{PRETRAINED_MODEL}),\n# so no compiled_graph_path: option.env and lmi.env set "
                    "NEURON_COMPILE_CACHE_URL.\n"
                )
        header = (
            f"# {ctx.model_type or 'model'} for {t.slug}, built by neuronforge ({self.ref}).\n"
            f"# Serve with {LMI_IMAGE} (Neuron SDK {SDK_RELEASE}, neuronx-cc {COMPILER_VERSION},\n"
            f"# transformers-neuronx {TNX_VERSION}) on {t.instance.family} with >= {t.tp_degree} NeuronCores.\n"
            + where
            + "# Every value below decides the compiled graphs: change one and LMI compiles at start-up.\n"
        )
        props_text = header + "".join(f"{k}={v}\n" for k, v in props.items())
        env = {"HF_MODEL_ID": props["option.model_id"]}
        if local_cache is not None:
            env["NEURON_COMPILE_CACHE_URL"] = local_cache
        env.update(
            {
                f"OPTION_{k.removeprefix('option.').upper()}": v
                for k, v in props.items()
                if k.startswith("option.") and k != "option.model_id"
            }
        )
        if "batch_size" in props:  # dynamic batching: the front end's batch size (RULE_FRONT_BATCH)
            env[FRONT_BATCH_ENV] = props["batch_size"]
        env_text = (
            header
            + "# The same as serving.properties, for `docker run --env-file` (values are taken verbatim).\n"
            + f"# NEURON_CC_FLAGS is left to the image ({LMI_CC_FLAGS!r}): the NEFFs were compiled with it.\n"
            + "".join(f"{k}={v}\n" for k, v in env.items())
        )
        return {
            PROPERTIES_FILE: props_text,
            ENV_FILE: env_text,
            CACHE_FILE: cache.to_bytes().decode(),
            RUN_FILE: render_run_lmi(ctx, how, devices=ceil(t.tp_degree / CORES_PER_DEVICE)),
        }

    def smoke_load(self, payload: Path) -> SmokeLoad:
        """LMI's load, read from the published launch files: the split model `option.model_id` names,
        the load and NEURON_CC_FLAGS its NEFFs were compiled with (`neff-cache.json`), and where its
        NEFFs come from — the store's compile cache (an s3:// compiled_graph_path: the entries
        `neff-cache.json` names, synced as libneuronxla pulls them) or, for a local path, the
        `model.save` folder through `model.load(dir)`."""
        cache = read_neff_cache(payload / LAUNCH_DIR / CACHE_FILE)
        local = cache is not None and cache.model_save
        settings = {
            "tnx": TnxLoad.from_json(cache.load if cache is not None else {"model_type": "", "kwargs": {}}),
            "neuron_cc_flags": cache.neuron_cc_flags if cache is not None else "",
            "neff_dir": str(payload / self.folder / NEFF_DIR),
            "load_neffs": local,
        }
        entries = None if local else tuple(cache.entries if cache is not None else ())
        return SmokeLoad(f"{self.folder}/{MODEL_DIR}", settings, entries)

    # -- preflight -------------------------------------------------------------------------------
    def preflight(self, artifact: Artifact) -> list[str]:
        """LMI's and transformers-neuronx's load-time rules, checked offline on the artifact: the
        properties LMI validates, the load they produce against the load the NEFFs were compiled for,
        the split model folder, where the NEFFs are, and the env file against the properties."""
        launch = artifact.root / LAUNCH_DIR
        if not (launch / PROPERTIES_FILE).is_file():
            return [f"{LAUNCH_DIR}/{PROPERTIES_FILE}: missing (LMI reads it from the model directory)"]
        props = parse_properties((launch / PROPERTIES_FILE).read_text(encoding="utf-8"))
        cache = read_neff_cache(launch / CACHE_FILE)
        if cache is None:
            return [f"{LAUNCH_DIR}/{CACHE_FILE}: missing or without the load the NEFFs were compiled for"]
        model = artifact.root / self.folder / MODEL_DIR
        config = read_json(model / "config.json") or {}
        model_type = str(config.get("model_type", ""))
        load, problems = lmi_load(props, model_type)
        out = [f"{PROPERTIES_FILE}: {p}" for p in problems]
        unknown = sorted(k for k in props if k.startswith("option.") and k.removeprefix("option.") not in KNOWN_OPTIONS)
        if unknown:
            out.append(
                f"{PROPERTIES_FILE}: {unknown} are not options this profile compiled with; several change the "
                f"graphs transformers-neuronx builds (NeuronConfig fields, NEURON_CC_FLAGS; "
                f"{RULE_LOADER}.set_neuron_config)"
            )
        if load is not None and model_type in CLASSES:
            refused = load_problems(load, config)
            out += [f"{PROPERTIES_FILE}: transformers-neuronx would refuse LMI's load: {p}" for p in refused]
        if load is not None:
            built = cache.load
            for part in ("model_type", "kwargs", "neuron_config"):
                if load.to_json()[part] != built.get(part):
                    out.append(
                        f"{PROPERTIES_FILE}: LMI would load with {part} {load.to_json()[part]}, but the NEFFs were "
                        f"compiled with {built.get(part)}: another HLO, so LMI would compile at start-up"
                    )
        out += self._locations_problems(artifact.root, props, cache, model_type)
        out += self._split_model_problems(model, config)
        out += self._cache_record_problems(artifact, cache)
        out += self._env_problems(launch, props, cache)
        return out

    def _locations_problems(
        self, root: Path, props: Mapping[str, str], cache: NeffCacheRecord, model_type: str = ""
    ) -> list[str]:
        out = []
        model_id = props.get("option.model_id", "")
        graphs = props.get("option.compiled_graph_path", "")
        cls = family(model_type)
        if "option.compiled_graph_path" not in props:
            # only for a class without load(dir) on a file:// store: the NEFFs come from the cache lmi.env names
            if cls is None or cls.serializable or not cache.neuron_compile_cache_url:
                out.append(
                    f"option.compiled_graph_path is not set and {CACHE_FILE} names no NEURON_COMPILE_CACHE_URL: "
                    "LMI would find no NEFFs and compile at start-up"
                )
            if cache.compiled_graph_path is not None:
                out.append(
                    f"option.compiled_graph_path is not set, but {CACHE_FILE} records {cache.compiled_graph_path!r}"
                )
        for key, value in (("model_id", model_id), ("compiled_graph_path", graphs)):
            if key == "compiled_graph_path" and "option.compiled_graph_path" not in props:
                continue
            if not (S3_URI.match(value) or value.startswith("/")):
                out.append(
                    f"option.{key}={value!r}: LMI reads only s3:// URIs and local paths (file:// and other "
                    f"schemes are refused; {RULE_CACHE_PATH})"
                )
        if not model_id.rstrip("/").endswith(f"/{self.folder}/{MODEL_DIR}"):
            out.append(f"option.model_id={model_id!r} does not name this artifact's {self.folder}/{MODEL_DIR}")
        if "option.compiled_graph_path" in props and graphs != cache.compiled_graph_path:
            out.append(f"option.compiled_graph_path={graphs!r} is not the one {CACHE_FILE} records")
        if graphs.startswith("s3://"):
            if graphs.rstrip("/").rsplit("/", 1)[-1].startswith("neuronxcc-"):
                out.append(
                    f"option.compiled_graph_path={graphs!r} names a compiler folder: it must be the cache ROOT "
                    "(libneuronxla appends neuronxcc-<version>/ itself)"
                )
        elif graphs.startswith("/") and cls is not None and not cls.serializable:
            out.append(
                f"option.compiled_graph_path={graphs!r} is a local directory: LMI then calls model.load(dir) "
                f"({RULE_CACHE_PATH}), but {cls.name} derives from transformers-neuronx's {PRETRAINED_MODEL} and "
                f"has no load (AttributeError; {cls.source}); use an s3:// cache root, or no compiled_graph_path "
                "and NEURON_COMPILE_CACHE_URL set to the local cache root"
            )
        elif graphs.startswith("/"):
            neffs = sorted((root / self.folder / NEFF_DIR).glob("*.neff"))
            if not graphs.rstrip("/").endswith(f"/{self.folder}/{NEFF_DIR}"):
                out.append(
                    f"option.compiled_graph_path={graphs!r} does not name this artifact's {self.folder}/{NEFF_DIR}"
                )
            if not neffs:
                out.append(
                    f"{self.folder}/{NEFF_DIR}/ holds no .neff files: with a local compiled_graph_path LMI calls "
                    f"model.load(dir) and to_neuron() fails on the first missing NEFF ({RULE_TNX_LOAD})"
                )
        if not model_id.startswith("s3://"):
            out += self._container_problems(root, props, cache, graphs)
        return out

    def _container_problems(
        self, root: Path, props: Mapping[str, str], cache: NeffCacheRecord, graphs: str
    ) -> list[str]:
        """A file:// store's launch files: paths of LMI's container only (the publishing host's would hold
        nothing on another host, or once the store moves), and run-lmi.sh, which mounts the artifact there."""
        out = []
        model_dir = f"{CONTAINER_MODEL_DIR}/{self.folder}"
        fix = f"republish: the launch files then name {CONTAINER_MODEL_DIR}/ paths and {RUN_FILE} mounts them"
        named = [("model_id", props.get("option.model_id", ""), f"{model_dir}/{MODEL_DIR}")]
        if graphs:
            named.append(("compiled_graph_path", graphs, f"{model_dir}/{NEFF_DIR}"))
        for key, value, want in named:
            if value.startswith("/") and value != want:
                out.append(
                    f"option.{key}={value!r} is not the path LMI's container sees ({want}): it names a folder of "
                    f"the host that published the artifact, which holds nothing elsewhere; {fix}"
                )
        url = cache.neuron_compile_cache_url
        if not graphs and url is not None:
            if url != CONTAINER_CACHE:
                out.append(f"{CACHE_FILE}: NEURON_COMPILE_CACHE_URL={url!r} is not {CONTAINER_CACHE}; {fix}")
            env = dict(kv.split("=", 1) for kv in props.get("option.env", "").split(",") if "=" in kv)
            if env.get("NEURON_COMPILE_CACHE_URL") != url:
                out.append(
                    f"option.env does not set NEURON_COMPILE_CACHE_URL={url}: LMI started from serving.properties "
                    f"alone would find no NEFF and compile at start-up ({RULE_OPTION_ENV})"
                )
        script = root / LAUNCH_DIR / RUN_FILE
        kind = "local" if graphs else "local-cache"
        if not script.is_file():
            out.append(f"{LAUNCH_DIR}/{RUN_FILE}: missing: nothing mounts the artifact at {model_dir}; {fix}")
        elif f"kind={kind};" not in script.read_text(encoding="utf-8"):
            out.append(f"{LAUNCH_DIR}/{RUN_FILE}: not the script for this artifact (kind={kind}); {fix}")
        return out

    def _split_model_problems(self, model: Path, config: Mapping[str, Any]) -> list[str]:
        where = f"{self.folder}/{MODEL_DIR}"
        if not config:
            return [f"{where}/config.json: missing or not JSON (AutoConfig.from_pretrained(model_id); {RULE_CONFIGS})"]
        out = []
        if "neuron" in config:
            out.append(
                f"{where}/config.json has a 'neuron' block: LMI would read the folder as an Optimum export "
                f"({RULE_LOADER}.set_neuron_model)"
            )
        if config.get("model_type") not in LMI_MODEL_TYPES:
            out.append(
                f"{where}: model_type {config.get('model_type')!r} has no LMI transformers-neuronx class "
                f"({RULE_LOADER})"
            )
        index = read_json(model / "model.safetensors.index.json")
        if not (model / "model.safetensors").is_file() and index is None:
            out.append(f"{where}: no model.safetensors or model.safetensors.index.json ({RULE_TNX_WEIGHTS})")
        if isinstance(index, dict):
            missing = sorted({f for f in index.get("weight_map", {}).values() if not (model / f).is_file()})
            if missing:
                out.append(f"{where}: shards {missing} named by model.safetensors.index.json are missing")
        return out + tokenizer_problems(model, where, f"LMI loads the tokenizer from model_id ({RULE_LOADER})")

    def _cache_record_problems(self, artifact: Artifact, cache: NeffCacheRecord) -> list[str]:
        out = []
        want = layout.compiler_dir("neuronxcc", COMPILER_VERSION)
        if cache.compiler_dir != want or artifact.toolchain.compiler_version != COMPILER_VERSION:
            out.append(
                f"{CACHE_FILE}: compiled by neuronx-cc {artifact.toolchain.compiler_version} into "
                f"{cache.compiler_dir}; {LMI_IMAGE} runs {COMPILER_VERSION} and looks in {want}/"
            )
        entries = cache.entries
        if not entries:
            out.append(f"{CACHE_FILE}: lists no cache entries: LMI would find no NEFF and compile")
        elif bad := [e for e in entries if not MODULE_ENTRY.fullmatch(e)]:
            out.append(f"{CACHE_FILE}: {bad[:3]} are not MODULE_<hash>+<flags hash> cache entries")
        return out

    def _env_problems(self, launch: Path, props: Mapping[str, str], cache: NeffCacheRecord) -> list[str]:
        if not (launch / ENV_FILE).is_file():
            return [f"{LAUNCH_DIR}/{ENV_FILE}: missing"]
        env = read_env_file(launch / ENV_FILE)
        options = {k: v for k, v in props.items() if k.startswith("option.")}
        out = []
        if env_to_properties(env) != options:
            diff = sorted(set(env_to_properties(env).items()) ^ set(options.items()))
            out.append(f"{ENV_FILE} and {PROPERTIES_FILE} disagree on {diff[:4]}")
        front = props.get("batch_size")
        if front is not None and env.get(FRONT_BATCH_ENV) != front:
            out.append(
                f"{ENV_FILE}: {FRONT_BATCH_ENV}={env.get(FRONT_BATCH_ENV)!r}, but {PROPERTIES_FILE} has "
                f"batch_size={front}: with the env file alone the front end batches "
                f"{env.get(FRONT_BATCH_ENV) or 1} request(s) for graphs compiled for {front} ({RULE_FRONT_BATCH})"
            )
        want = cache.neuron_compile_cache_url
        if want and env.get("NEURON_COMPILE_CACHE_URL") != want:
            out.append(
                f"{ENV_FILE}: NEURON_COMPILE_CACHE_URL={env.get('NEURON_COMPILE_CACHE_URL')!r}, but the NEFFs are in "
                f"the compile cache {want!r} (there is no compiled_graph_path to name it)"
            )
        runtime = env.get("NEURON_CC_FLAGS", LMI_CC_FLAGS)  # the image's ENV unless the env file overrides it
        if runtime.split() != cache.neuron_cc_flags.split():
            out.append(
                f"LMI runs with NEURON_CC_FLAGS={runtime!r}, but the NEFFs were compiled with "
                f"{cache.neuron_cc_flags!r}: every cache entry's name carries the flags' hash"
            )
        return out

    def store_problems(self, artifact: Artifact, store: ArtifactStore) -> list[str]:
        """Every cache entry the NEFFs are in must be complete (model.done) in the compile cache the
        artifact was published with (`cache_root` of neff-cache.json: the store's `neuron-cache/`,
        wherever `verify` was pointed; a file:// store mounted elsewhere since: `relocated`), and an
        s3:// compiled_graph_path must be that root."""
        from neuronforge.artifacts import layout
        from neuronforge.common.errors import StoreError
        from neuronforge.compilation.compile_cache import DONE
        from neuronforge.profiles.base import relocated
        from neuronforge.stores import open_location

        cache = read_neff_cache(artifact.root / LAUNCH_DIR / CACHE_FILE)
        if cache is None:
            return [f"{CACHE_FILE}: no cache_root: where the NEFF cache entries are is unknown"]
        root = relocated(cache.cache_root.rstrip("/"), store, layout.NEURON_CACHE)
        graphs = cache.compiled_graph_path or ""
        out = []
        if graphs.startswith("s3://") and graphs.rstrip("/") != root:
            out.append(f"compiled_graph_path {graphs} is not the cache root the NEFFs were published to ({root})")
        try:
            cache_store = open_location(root, probe=True)  # reading never creates a store
            entries = cache.entries
            missing = [e for e in entries if not cache_store.exists(f"{cache.compiler_dir}/{e}/{DONE}")]
        except (StoreError, InvalidInput) as exc:
            return [*out, f"the NEFF cache {root} cannot be read: {exc}"]
        if missing:
            out.append(
                f"{len(missing)} of {len(entries)} NEFF cache entries are not complete in "
                f"{root}/{cache.compiler_dir} (e.g. {missing[0]}): LMI would compile them at start-up"
            )
        return out


def read_neff_cache(path: Path) -> NeffCacheRecord | None:
    """The artifact's `neff-cache.json`, or None when it is missing or not one (each reader says what
    that means for it: no load to compare, no cache root to look in)."""
    try:
        return read_local(NeffCacheRecord, path)
    except (OSError, RecordError):
        return None


PROFILE = LmiNeuronxProfile()
