"""Profile `vllm-neuron`: vLLM on NxD Inference (the "classic" vLLM line), one version per SDK release
the release table registers for the line (`Release`: its pins read from
`neuronforge/profiles/releases/<release>.toml`, its loader behaviour from `BEHAVIOUR` by plugin version).

How the consumer loads what we publish (vllm-project/vllm-neuron tag 0.2.0, commit a9671254, the head
of branch release-0.2.x; `vllm_neuron/worker/neuronx_distributed_model_loader.py`):
`get_neuron_model` builds the NeuronConfig keyword arguments from the `vllm serve` flags
(`_get_default_neuron_config`), merges `--additional-config '{"override_neuron_config": …}'` over them
(`_get_neuron_config_after_override`), validates (`_validate_neuron_config`), then
`_load_compiled_model`: `NeuronXCls($NEURON_COMPILED_ARTIFACTS).load(…)`. That load reads the
compiled `neuron_config.json` — the flags' config is NOT applied ("Using pre-compiled artifacts,
override_neuron_config will be ignored"), and if the load fails vLLM compiles again INTO that folder.
vLLM's scheduler, block manager and sampler still run on the flags. So the artifact must be compiled
with exactly the NeuronConfig vLLM would build from the launch command, and the command must be the
one it was built from: `compile_settings` computes the NeuronConfig FROM the rendered flags
(`vllm_neuron_config`), and `preflight` parses the published `launch/serve.sh` back
(`launch_flags`) and compares (`launch_mismatches`).

The published folder, `nxdi/`, is the NxD Inference compile output (`neuron_config.json`,
`model.pt`, `weights/tp{r}_sharded_checkpoint.safetensors`) plus `config.json` and the tokenizer,
which vLLM reads from the `vllm serve` model folder; one folder is both `--model` and
`NEURON_COMPILED_ARTIFACTS`. It is no optimum-neuron export and is never published as one.

What the later plugins changed in that path (fork-observed: the upstream tags after 0.2.0 are not
readable here; see `BEHAVIOUR`): the launch -> NeuronConfig function is the same except that
vllm-neuron 0.4.x/0.5.x read `--additional-config '{"max_prompt_length": N}'` into
max_context_length (`Release.reads_max_prompt_length`), so a prompt shorter than the sequence is
servable there and not on 2.26.1.
"""

from __future__ import annotations

import contextlib
import json
import shlex
from collections.abc import Mapping
from dataclasses import dataclass
from math import ceil
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from neuronforge.artifacts import launch_script
from neuronforge.artifacts.launch_script import Shell
from neuronforge.common.errors import InvalidInput
from neuronforge.compilation.backends.child import TOKENIZER_FILES
from neuronforge.compilation.backends.nxdi import (
    BACKEND,
    FUSED_QKV_PER_TENSOR,
    PASSTHROUGH_OPTIONS,
    neuron_config_kwargs,
    per_tensor_quantized,
)
from neuronforge.compilation.backends.nxdi_quantization import quantization_problems
from neuronforge.profiles.base import (
    LAUNCH_DIR,
    SHELL_VAR,
    Artifact,
    AssembleJob,
    LaunchContext,
    Pins,
    ServingProfile,
    copy_tree,
    read_env_file,
    read_json,
    tokenizer_problems,
)
from neuronforge.profiles.line_lifecycles import VLLM_NEURON
from neuronforge.profiles.release_table import ProfileRelease, profile_releases
from neuronforge.spec.target import TORCH_DTYPE_NAMES

if TYPE_CHECKING:
    from neuronforge.spec.target import TargetSpec


@dataclass(frozen=True)
class Release:
    """One SDK release of the NxD Inference vLLM line: the pins its image holds, what the serving
    host runs, the model types its loader maps, and the loader behaviour that differs between
    plugin versions — each with where it was read (`plugin_source`, `nxdi_source`, `source`)."""

    sdk: str
    compiler: str  # neuronx-cc as the wheel reports it (`neuronxcc.__version__`), local label included
    nxdi: str  # neuronx-distributed-inference: the pin `toolchain_problems` compares
    nxd: str  # neuronx-distributed (documented in the launch files; not compared)
    torch_neuronx: str
    transformers: str  # NxD Inference's setup.py install_requires
    vllm_neuron: str  # the plugin the serving host runs (not in `pins.packages`: the compile worker runs no vLLM)
    vllm: str
    families: frozenset[str]
    model_types: frozenset[str]  # the keys of NxD Inference's utils/constants.py MODEL_TYPES
    served_types: frozenset[str]  # the model types this profile publishes for (a subset; why in the release's comment)
    plugin_source: str  # where the plugin's loader and platform were read
    nxdi_source: str  # where NxD Inference's load path and config were read
    nxdi_types: str  # whose MODEL_TYPES `model_types` is
    source: str  # where the pins were read
    install: str  # how the serving host gets the plugin
    image: str | None  # the vLLM DLC that holds exactly these pins and the plugin (None: no image ships it)
    # vllm-neuron 0.4.x/0.5.x: platform.py reads `--additional-config '{"max_prompt_length": N}'` and the
    # loader makes it NeuronConfig.max_context_length (`_validate_override_neuron_config`); 0.2.0 does not.
    reads_max_prompt_length: bool = False
    # vllm-neuron 0.2.0 README Known Issues 3: prefix caching with batch size 1 gives incorrect outputs.
    prefix_caching_batch1_broken: bool = False
    # Why the families an older release served are refused here (verbatim, with its source), and the
    # release to use for them.
    families_rule: str | None = None
    families_release: str | None = None

    @property
    def loader(self) -> str:
        return f"{self.plugin_source} vllm_neuron/worker/neuronx_distributed_model_loader.py"

    @property
    def rule_defaults(self) -> str:
        return f"{self.loader} _get_default_neuron_config"

    @property
    def rule_override(self) -> str:
        return f"{self.loader} _get_neuron_config_after_override"

    @property
    def rule_prompt(self) -> str:
        return f"{self.loader} _validate_override_neuron_config; vllm_neuron/platform.py check_and_update_config"

    @property
    def rule_validate(self) -> str:
        return f"{self.loader} _validate_neuron_config"

    @property
    def rule_load(self) -> str:
        return f"{self.loader} _get_compiled_model_path / _load_compiled_model"

    @property
    def rule_arch(self) -> str:
        return f"{self.loader} _get_neuron_model_cls ({self.nxdi_types} utils/constants.py MODEL_TYPES)"

    @property
    def rule_model_config(self) -> str:
        return f"{self.loader} _get_model_configs"

    @property
    def rule_platform(self) -> str:
        return f"{self.plugin_source} vllm_neuron/platform.py NeuronPlatform.check_and_update_config"

    @property
    def rule_known_issues(self) -> str:
        return f"{self.plugin_source} README.md, Known Issues"

    @property
    def rule_nxdi_load(self) -> str:
        return f"{self.nxdi_source} models/application_base.py NeuronApplicationBase.load / load_weights"

    @property
    def rule_nxdi_config(self) -> str:
        return f"{self.nxdi_source} models/config.py InferenceConfig.load, NeuronConfig._get_lnc"

    @property
    def rule_tokenizer(self) -> str:
        return f"vllm {self.vllm}: the tokenizer is loaded from the served model folder when --tokenizer is not given"

    @property
    def rule_prefix_default(self) -> str:
        return f"vllm {self.vllm} engine/arg_utils.py: V1 enables prefix caching unless --no-enable-prefix-caching"


# Model types vllm-neuron can serve: `_get_neuron_model_cls` turns `config.json`'s `architectures[0]`
# (`<Model>For<Task>`) into `MODEL_TYPES[<model lowercased>]["causal-lm"]` ("qwen3moe" -> "qwen3_moe").
# NxD Inference 0.6.10598's MODEL_TYPES has no "mistral": vLLM refuses MistralForCausalLM although
# NxD Inference compiles it with its Llama model.
NXDI_0_6_TYPES = frozenset({"llama", "llama4", "mllama", "mixtral", "dbrx", "qwen2", "qwen3", "qwen3_moe"})
# aws-neuron/neuronx-distributed-inference cd3abf30 ("Neuron SDK Release 2.28.0 - Component Release",
# _version.py 0.8.0 = wheel 0.8.16251) src/neuronx_distributed_inference/utils/constants.py MODEL_TYPES:
# 0.6's plus gpt_oss, pixtral, qwen2_vl, qwen3_vl; still no "mistral".
NXDI_0_8_TYPES = NXDI_0_6_TYPES | {"gpt_oss", "pixtral", "qwen2_vl", "qwen3_vl"}
# Same file at ef2731ef ("sync code base to release-2.29-v2 branch", _version.py 0.9.0): 0.8's plus
# gemma3 and mistral. The last NxD Inference source on GitHub: 0.10.x (SDK 2.30/2.31) was released as
# wheels only, so this is what 2.31.1's 0.10.18399 is taken to map.
NXDI_0_9_TYPES = NXDI_0_8_TYPES | {"gemma3", "mistral"}
# ... where "mistral" is `NeuronMistralForCausalLM` (models/mistral/modeling_mistral.py @ef2731ef: its own
# attention with the config's sliding_window), while the nxdi backend compiles Mistral checkpoints with
# NeuronLlamaForCausalLM: vLLM would load our Llama-class build with another class. Not published for.
MISTRAL_CLASS = (
    "NxD Inference 0.9 (ef2731ef) maps mistral to NeuronMistralForCausalLM "
    "(models/mistral/modeling_mistral.py), the nxdi backend compiles Mistral with NeuronLlamaForCausalLM"
)


@dataclass(frozen=True)
class PluginBehaviour:
    """What differs between releases of the line and is not a fact of the release table: the model
    types NxD Inference's loader maps, the loader behaviour of the plugin, and where each was read."""

    transformers: str  # NxD Inference's setup.py install_requires
    model_types: frozenset[str]
    served_types: frozenset[str]
    plugin_source: str
    nxdi_source: str
    nxdi_types: str
    install: str
    reads_max_prompt_length: bool = False
    prefix_caching_batch1_broken: bool = False


# By the plugin's version (the release table's `vllm-neuron` package of the release). A release of a
# plugin listed here is one data file (neuronforge/profiles/releases/); a new plugin is new behaviour.
BEHAVIOUR: Mapping[str, PluginBehaviour] = MappingProxyType(
    {
        # vllm-neuron 0.2.0 (README: "AWS Neuron SDK 2.26.1", Inf2/Trn1/Trn1n/Trn2; not on PyPI —
        # installed from its git tag) and the vLLM it pins (requirements/core.txt: vllm==0.11.0).
        "0.2.0": PluginBehaviour(
            transformers="4.51.*",
            model_types=NXDI_0_6_TYPES,
            served_types=NXDI_0_6_TYPES,
            plugin_source="vllm-project/vllm-neuron 0.2.0 (a9671254)",
            nxdi_source="aws-neuron/neuronx-distributed-inference v0.6.10598 (e07f0567)",
            nxdi_types="NxD Inference 0.6.10598",
            install="git+https://gh.072103.xyz/vllm-project/vllm-neuron.git@0.2.0",
            prefix_caching_batch1_broken=True,
        ),
        # Plugin 0.4.1 pinned to vLLM 0.13.0 and PyTorch 2.9 (the 2.28 vLLM user guide's Versioning
        # table). transformers: NxD Inference cd3abf30 setup.py "transformers==4.57.*". Loader: the
        # upstream release-0.4.1 branch is not readable here; FORK-OBSERVED at
        # Infinity-AI-Institute/vllm-neuron @139ffe57 (the vLLM 0.13.0 line): `_get_default_neuron_config`
        # as in 0.2.0 (vLLM attribute names only), max_prompt_length read into max_context_length, the
        # Pixtral / multi-LoRA refusals of 0.2.0 gone, README Known Issues without 0.2.0's "prefix
        # caching with batch size 1" entry.
        "0.4.1": PluginBehaviour(
            transformers="4.57.*",
            model_types=NXDI_0_8_TYPES,
            served_types=NXDI_0_8_TYPES,
            plugin_source=(
                "vllm-neuron 0.4.1 (branch release-0.4.1; fork-observed at Infinity-AI-Institute/vllm-neuron@139ffe57)"
            ),
            nxdi_source="aws-neuron/neuronx-distributed-inference 0.8 (cd3abf30)",
            nxdi_types="NxD Inference 0.8 (cd3abf30)",
            install="the DLC's /opt/vllm (git clone -b release-0.4.1 vllm-project/vllm-neuron, pip install -e)",
            reads_max_prompt_length=True,
        ),
        # transformers "== 4.57.*" (releasecontent v2.31.1). MODEL_TYPES: the last readable source (NxD
        # Inference 0.9, ef2731ef), minus mistral (MISTRAL_CLASS). Loader: FORK-OBSERVED at
        # exa-labs/vllm-neuron @1df2cde3 (the vLLM 0.16.0 line): as 0.4.x.
        "0.5.3": PluginBehaviour(
            transformers="4.57.*",
            model_types=NXDI_0_9_TYPES,
            served_types=NXDI_0_9_TYPES - {"mistral"},
            plugin_source="vllm-neuron 0.5.3 (branch release-0.5.3; fork-observed at exa-labs/vllm-neuron@1df2cde3)",
            nxdi_source="aws-neuron/neuronx-distributed-inference 0.9 (ef2731ef; 0.10.18399's source is unpublished)",
            nxdi_types="NxD Inference 0.9 (ef2731ef; 0.10's source is unpublished)",
            install="the DLC's /opt/vllm (git clone -b release-0.5.3 vllm-project/vllm-neuron, pip install)",
            reads_max_prompt_length=True,
        ),
    }
)
# The families neuronforge's nxdi backend plans for: the line also serves trn3 from 2.27 (release
# table), which no target here is planned on.
PLANNED_FAMILIES = frozenset({"inf2", "trn1", "trn1n", "trn2"})


def release_of(r: ProfileRelease, older: tuple[Release, ...] = ()) -> Release:
    """A registered release of the line: its pins from the release table, its behaviour by plugin
    version, and — for the families an older release served and this one does not — the rule (the
    status's source, verbatim) and the newest older release to use for them."""
    plugin = r.packages["vllm-neuron"].version
    if plugin not in BEHAVIOUR:
        raise InvalidInput(
            f"vllm-neuron@{r.sdk}: vllm-neuron {plugin} has no known behaviour (BEHAVIOUR in "
            f"neuronforge/profiles/vllm_neuron.py knows {', '.join(BEHAVIOUR)})"
        )
    b = BEHAVIOUR[plugin]
    families = r.families & PLANNED_FAMILIES
    dropped = [o for o in older if o.families - families]
    rule = None
    if dropped:
        family = sorted(dropped[-1].families - families)[0]
        phase = VLLM_NEURON.phase(family, r.sdk)
        if phase is not None:
            rule = f'"{phase.source.quote}" ({phase.source.title})' if phase.source.quote else phase.source.cite()
    return Release(
        sdk=r.sdk,
        compiler=r.version("neuronx-cc"),
        nxdi=r.version("neuronx-distributed-inference"),
        nxd=r.version("neuronx-distributed"),
        torch_neuronx=r.version("torch-neuronx"),
        transformers=b.transformers,
        vllm_neuron=r.version("vllm-neuron"),
        vllm=r.version("vllm"),
        families=families,
        model_types=b.model_types,
        served_types=b.served_types,
        plugin_source=b.plugin_source,
        nxdi_source=b.nxdi_source,
        nxdi_types=b.nxdi_types,
        source=r.source.cite(),
        install=b.install,
        image=r.image,
        reads_max_prompt_length=b.reads_max_prompt_length,
        prefix_caching_batch1_broken=b.prefix_caching_batch1_broken,
        families_rule=rule,
        families_release=dropped[-1].sdk if rule else None,
    )


def _releases() -> tuple[Release, ...]:
    out: list[Release] = []
    for r in profile_releases("vllm-neuron"):
        out.append(release_of(r, tuple(out)))
    return tuple(out)


RELEASES = _releases()
# vllm-neuron@2.26.1, @2.28.0, @2.31.1 by the names tests that build on their fakes import.
SDK_2_26_1, SDK_2_28_0, SDK_2_31_1 = (next(r for r in RELEASES if r.sdk == v) for v in ("2.26.1", "2.28.0", "2.31.1"))
# The Python of the SDK images, which has the SDK (docker/neuron-sdk/images.json): Miniforge in /opt/conda.
DLC_PYTHON = "/opt/conda/bin/python"

NEURON_CONFIG = "neuron_config.json"  # models/config.py CONFIG_FILE
MODEL_FILE = "model.pt"  # models/application_base.py COMPILED_MODEL_FILE_NAME
SHARD = "weights/tp{rank}_sharded_checkpoint.safetensors"  # NeuronApplicationBase.load_weights
ENV_FILE = "vllm.env"
SERVE_FILE = "serve.sh"

# backend_options this profile accepts: NeuronConfig fields vLLM can ask for through
# override_neuron_config (passed through unchanged), and the KV-cache layout vLLM selects with flags.
PROFILE_OPTIONS = frozenset({"prefix_caching", "block_size", "num_blocks"})
ACCEPTED_OPTIONS = frozenset(PASSTHROUGH_OPTIONS) | PROFILE_OPTIONS
DEFAULT_BLOCK_SIZE = 32  # the block size of vllm-neuron's README prefix-caching example

# vllm-neuron's TORCH_DTYPE_TO_NEURON_AMP (worker/constants.py) for the --dtype values we render.
SERVE_DTYPES = {
    "bfloat16": "bfloat16",
    "float16": "float16",
    "half": "float16",
    "float32": "float32",
    "float": "float32",
}
# What `_get_neuron_config_after_override` fills in when override_neuron_config has `quantized`.
QUANTIZATION_DEFAULTS = {
    "quantized_checkpoints_path": None,
    "quantization_type": "per_tensor_symmetric",
    "quantization_dtype": "int8",
}
# Flags with a value that the parser types; every other flag is kept as given.
_INT_FLAGS = ("tensor_parallel_size", "max_num_seqs", "max_model_len", "block_size", "num_gpu_blocks_override", "port")
# The quantized_checkpoints_path the launch command names (see launch_command_flags); a path on the
# host where the field is read is never comparable with the compile worker's, so it is not compared.
QUANTIZED_ON_HOST = "/opt/neuronforge/quantized-checkpoint"
HOST_LOCAL_FIELDS = frozenset({"quantized_checkpoints_path"})
# Where vLLM takes each NeuronConfig field it sets from (for the mismatch messages).
_ORIGIN = {
    "tp_degree": "--tensor-parallel-size",
    "batch_size": "--max-num-seqs",
    "ctx_batch_size": "vllm-neuron (always 1)",
    "max_context_length": "--max-model-len",
    "seq_len": "--max-model-len",
    "enable_bucketing": "vllm-neuron (always True)",
    "is_continuous_batching": "--max-num-seqs > 1",
    "quantized": "vllm-neuron (False unless override_neuron_config says quantized)",
    "torch_dtype": "--dtype",
    "padding_side": "vllm-neuron (always 'right')",
    "on_device_sampling_config": "vllm-neuron (dynamic on-device sampling)",
    "lora_config": "--enable-lora (not given)",
    "pa_num_blocks": "--num-gpu-blocks-override + 1 (else --max-model-len // block size × --max-num-seqs)",
    "pa_block_size": "--block-size (--max-model-len without prefix caching)",
    "is_block_kv_layout": "--enable-prefix-caching",
    "is_prefix_caching": "--enable-prefix-caching",
}
# ... and where a plugin that reads max_prompt_length takes max_context_length from.
_PROMPT_ORIGIN = "--additional-config max_prompt_length (else --max-model-len)"


# -- the launch command <-> NeuronConfig ---------------------------------------------------------------
def min_blocks(max_model_len: int, block_size: int, max_num_seqs: int) -> int:
    """The KV blocks `_validate_neuron_config` requires with a block KV layout."""
    return ceil(max_model_len / block_size) * max_num_seqs


def serve_flags(target: TargetSpec) -> dict[str, Any]:
    """The `vllm serve` flags for a target (without --additional-config; `compile_settings` adds it)."""
    t = target.normalized()
    options = t.backend_options
    flags: dict[str, Any] = {
        "tensor_parallel_size": t.tp_degree,
        "max_num_seqs": t.batch_size,
        "max_model_len": t.sequence_length,
        "dtype": TORCH_DTYPE_NAMES[t.dtype],
        "enable_prefix_caching": bool(options.get("prefix_caching", False)),
    }
    if flags["enable_prefix_caching"]:
        block = int(options.get("block_size", DEFAULT_BLOCK_SIZE))
        flags["block_size"] = block
        # README Known Issues 2: always give --num-gpu-blocks-override (the platform adds 1 for
        # vLLM's null block; pa_num_blocks follows).
        flags["num_gpu_blocks_override"] = int(
            options.get("num_blocks", min_blocks(t.sequence_length, block, t.batch_size))
        )
    return flags


def vllm_neuron_config(flags: Mapping[str, Any], release: Release = SDK_2_26_1) -> tuple[dict[str, Any], list[str]]:
    """The NeuronConfig keyword arguments the release's vllm-neuron builds from `vllm serve` flags
    (as `launch_flags` returns them), and why vLLM would refuse to start or fall back on defaults.

    The custom Neuron scheduler (the default) disables chunked prefill (`rule_platform`), so
    `batch_size = --max-num-seqs` and `max_context_length = seq_len = --max-model-len`; without prefix
    caching the platform sets the block size to --max-model-len. From vllm-neuron 0.4
    (`reads_max_prompt_length`) `--additional-config '{"max_prompt_length": N}'` makes
    max_context_length N, and an override_neuron_config max_context_length other than N is vLLM's
    ValueError ("Conflicting max_prompt_length settings"; `rule_prompt`)."""
    problems = []
    for flag in ("tensor_parallel_size", "max_num_seqs", "max_model_len", "dtype"):
        if flags.get(flag) is None:
            problems.append(
                f"--{flag.replace('_', '-')} is not given: vLLM would use its own default ({release.rule_defaults})"
            )
    tp = flags.get("tensor_parallel_size") or 1
    seqs = flags.get("max_num_seqs") or 0
    max_len = flags.get("max_model_len") or 0
    dtype = flags.get("dtype")
    if dtype is not None and dtype not in SERVE_DTYPES:
        problems.append(f"--dtype {dtype}: vllm-neuron maps only {sorted(SERVE_DTYPES)} to a Neuron dtype")
    prefix = flags.get("enable_prefix_caching")
    if prefix is None:
        prefix = True  # release.rule_prefix_default
    block = flags.get("block_size")
    override = flags.get("num_gpu_blocks_override")
    if prefix and block is None:
        problems.append(f"prefix caching is on but --block-size is not given ({release.rule_platform})")
    if not prefix:
        block = max_len  # "Neuron requires block_size = max_model_len when blockwise KV cache is disabled"
    block = block or 1
    # check_and_update_config adds one block for vLLM's null block; the default uses integer division.
    pa_num_blocks = override + 1 if override is not None else (max_len // block) * seqs
    kw: dict[str, Any] = {
        "tp_degree": tp,
        "ctx_batch_size": 1,
        "batch_size": seqs,
        "max_context_length": max_len,
        "seq_len": max_len,
        "enable_bucketing": True,
        "is_continuous_batching": seqs > 1,
        "quantized": False,
        "torch_dtype": SERVE_DTYPES.get(str(dtype), dtype),
        "padding_side": "right",
        "on_device_sampling_config": {"dynamic": True, "deterministic": False},
        "lora_config": None,
        "pa_num_blocks": pa_num_blocks,
        "pa_block_size": block,
        "is_block_kv_layout": bool(prefix),
        "is_prefix_caching": bool(prefix),
    }
    additional = flags.get("additional_config") or {}
    overrides = dict(additional.get("override_neuron_config") or {})
    if "pa_num_blocks" in overrides:
        problems.append(
            "override_neuron_config sets pa_num_blocks: vllm-neuron then requires it to equal "
            f"--num-gpu-blocks-override and increments it; give the flag instead ({release.loader} "
            "_handle_pa_num_blocks)"
        )
    prompt = additional.get("max_prompt_length") if release.reads_max_prompt_length else None
    if prompt is not None:
        given = overrides.pop("max_context_length", None)
        if given is not None and given != prompt:
            problems.append(
                f"override_neuron_config max_context_length={given!r} with --additional-config "
                f"max_prompt_length={prompt!r}: vLLM refuses to start (ValueError: Conflicting max_prompt_length "
                f"settings; {release.rule_prompt})"
            )
        overrides["max_context_length"] = prompt
    kw.update(overrides)  # release.rule_override: the override wins
    if "quantized" in overrides:  # ... and a quantized override brings the quantization defaults along
        for field, default in QUANTIZATION_DEFAULTS.items():
            kw.setdefault(field, default)
    if prefix and flags.get("block_size") is not None:
        effective = override if override is not None else pa_num_blocks
        need = min_blocks(max_len, block, seqs)
        if effective < need:
            problems.append(
                f"{effective} KV blocks, but --max-model-len {max_len} with --block-size {block} and "
                f"--max-num-seqs {seqs} needs at least {need} ({release.rule_validate})"
            )
    return kw, problems


def _normal(key: str, value: Any) -> Any:
    if key == "torch_dtype" and isinstance(value, str):
        return value.removeprefix("torch.")
    if isinstance(value, list):
        return sorted(value) if key.endswith("_buckets") else value
    return value


def launch_mismatches(
    neuron_config: Mapping[str, Any], flags: Mapping[str, Any], release: Release = SDK_2_26_1
) -> list[str]:
    """Each NeuronConfig field where the compiled `neuron_config` (the `"neuron_config"` object of
    `neuron_config.json`) differs from what the release's vLLM builds from `flags`, naming the flag;
    plus the flags vLLM itself would refuse. Empty: the launch matches the build."""
    expected, problems = vllm_neuron_config(flags, release)
    out = [f"vllm serve: {p}" for p in problems]
    origins = {**_ORIGIN, "max_context_length": _PROMPT_ORIGIN} if release.reads_max_prompt_length else _ORIGIN
    for key, want in expected.items():
        if key in HOST_LOCAL_FIELDS:
            continue
        origin = origins.get(key, "--additional-config override_neuron_config")
        got = neuron_config.get(key, "<absent>")
        if key == "on_device_sampling_config":
            # vLLM gives only dynamic/deterministic; the other fields keep NxD Inference's defaults.
            wrong = not isinstance(got, dict) or any(got.get(k) != v for k, v in want.items())
        else:
            wrong = _normal(key, got) != _normal(key, want)
        if wrong:
            out.append(
                f"compiled {key}={got!r}, but vLLM builds {key}={want!r} from {origin}: the scheduler would "
                f"run a config the loaded model was not compiled for ({release.rule_defaults}; {release.rule_load})"
            )
    return out


def launch_flags(serve_command: str, env: Mapping[str, str] | None = None) -> dict[str, Any]:
    """Parse a `vllm serve MODEL --flag value …` command (or a script holding one) into flags keyed
    the way vLLM's config names them (`--max-num-seqs` -> `max_num_seqs`); `model` is the served
    folder. `$VAR` / `${VAR}` are expanded from `env`; `"$@"` is dropped. Raises ValueError when no
    `vllm serve` command is found."""
    text = serve_command.replace("\\\n", " ")
    for line in text.splitlines():
        words = shlex.split(line, comments=True)
        starts = [i for i in range(len(words) - 1) if words[i].rsplit("/", 1)[-1] == "vllm" and words[i + 1] == "serve"]
        if starts:
            return _parse_serve_args(words[starts[0] + 2 :], env or {})
    raise ValueError("no `vllm serve` command found")


def _parse_serve_args(words: list[str], env: Mapping[str, str]) -> dict[str, Any]:
    def expand(word: str) -> str:
        return SHELL_VAR.sub(lambda m: env.get(m.group(1) or m.group(2), m.group(0)), word)

    words = [expand(w) for w in words if w != "$@"]
    flags: dict[str, Any] = {}
    i = 0
    while i < len(words):
        word = words[i]
        i += 1
        if not word.startswith("--"):
            flags.setdefault("model", word)
            continue
        name, eq, value = word[2:].partition("=")
        name = name.replace("-", "_")
        if name in ("enable_prefix_caching", "no_enable_prefix_caching"):
            flags["enable_prefix_caching"] = name == "enable_prefix_caching"
            continue
        if not eq:
            if i < len(words) and not words[i].startswith("--"):
                value = words[i]
                i += 1
            else:
                flags[name] = True
                continue
        flags[name] = value
    for name in _INT_FLAGS:
        if isinstance(flags.get(name), str) and flags[name].isdigit():
            flags[name] = int(flags[name])
    if isinstance(flags.get("additional_config"), str):
        with contextlib.suppress(ValueError):  # left as text otherwise: preflight reports it
            flags["additional_config"] = json.loads(flags["additional_config"])
    return flags


# -- the profile ---------------------------------------------------------------------------------------
class VllmNeuronProfile(ServingProfile):
    """One release of the line (`Release`). The release-derived attributes are properties, so a
    subclass may still pin them as class attributes (tests register made-up releases that way)."""

    name = "vllm-neuron"
    backend = BACKEND
    toolchain_python = DLC_PYTHON
    lifecycle = VLLM_NEURON
    folder = "nxdi"
    publishes = (
        "nxdi/: the NxD Inference compile output (neuron_config.json, model.pt, "
        "weights/tp{r}_sharded_checkpoint.safetensors) with config.json and tokenizer; launch/: vllm.env "
        "(NEURON_COMPILED_ARTIFACTS) and serve.sh (download, then the vllm serve command it was compiled for)"
    )

    def __init__(self, release: Release = SDK_2_26_1) -> None:
        self.release = release

    @property  # type: ignore[override]
    def title(self) -> str:
        r = self.release
        return (
            f"vLLM on NxD Inference (vllm-neuron {r.vllm_neuron}, vLLM {r.vllm}): "
            "NEURON_COMPILED_ARTIFACTS + vllm serve"
        )

    @property  # type: ignore[override]
    def pins(self) -> Pins:
        # The compiler and NxD Inference are what the loader checks the build against; the plugin and
        # vLLM run on the serving host only.
        r = self.release
        return Pins(sdk_release=r.sdk, compiler_version=r.compiler, packages={"neuronx-distributed-inference": r.nxdi})

    @property  # type: ignore[override]
    def instance_families(self) -> frozenset[str]:
        return self.release.families

    @property  # type: ignore[override]
    def consumer_architectures(self) -> frozenset[str]:
        return self.release.served_types

    @property  # type: ignore[override]
    def serving_image(self) -> str | None:
        """The release's vLLM DLC, where one holds the plugin (2.28.0 on); None for 2.26.1 (installed)."""
        return self.release.image

    # -- planning ------------------------------------------------------------------------------
    def problems(self, target: TargetSpec, model_type: str | None = None) -> list[str]:
        """The base checks, what vLLM cannot ask NxD Inference for, and NxD Inference 0.6's
        quantization limits. A family an older release of the line still serves is refused naming it."""
        r = self.release
        out = super().problems(target, model_type)
        family = target.instance.family
        if out and r.families_rule and family not in self.instance_families:
            phase = VLLM_NEURON.phase(family, r.sdk)
            if phase is not None and phase.disputed_serving:
                out.pop(0)  # AWS's statements disagree: the user's choice, with the planner's warning
            else:
                out[0] += f": {r.families_rule}; use profile {self.name}@{r.families_release}"
        t = target.normalized()
        if t.max_context_length != t.sequence_length and not r.reads_max_prompt_length:
            out.append(
                f"max_context_length={t.max_context_length} with sequence_length={t.sequence_length}: vLLM sets "
                f"max_context_length = seq_len = --max-model-len ({r.rule_defaults}); leave max_context_length "
                "unset (or equal to sequence_length), or use profile optimum-neuron"
            )
        options = t.backend_options
        unknown = sorted(set(options) - ACCEPTED_OPTIONS)
        if unknown:
            out.append(
                f"backend_options {unknown} are not accepted by profile {self.name}; accepted: "
                f"{sorted(ACCEPTED_OPTIONS)} (vLLM samples on device, dynamically per request: "
                f"on_device_sampling cannot be turned off; {r.rule_defaults})"
            )
        prefix = options.get("prefix_caching", False)
        if not isinstance(prefix, bool):
            out.append(f"backend_options prefix_caching={prefix!r}: true or false")
        elif prefix:
            out += self._prefix_caching_problems(t)
        elif "block_size" in options or "num_blocks" in options:
            out.append(
                "backend_options block_size / num_blocks need prefix_caching: true; without prefix caching "
                f"vllm-neuron uses one block of --max-model-len per sequence ({r.rule_platform})"
            )
        out += quantization_problems(target, model_type)
        if per_tensor_quantized(t) and options.get("fused_qkv"):
            out.append(
                f"backend_options fused_qkv=true with quantization {t.quantization.slug}: {FUSED_QKV_PER_TENSOR}, "
                "so the build cannot load; drop fused_qkv (neuronforge turns it off for per-tensor targets) or "
                "quantize per_channel"
            )
        return out

    def _prefix_caching_problems(self, t: TargetSpec) -> list[str]:
        options = t.backend_options
        r = self.release
        out = []
        # Known Issues 3 of 0.2.0; the READMEs of the 0.3.0 and 0.5.0 forks (Infinity-AI-Institute
        # @139ffe57, whn09 @3afb0a92) no longer list it: refused where the release's README says so.
        if t.batch_size == 1 and r.prefix_caching_batch1_broken:
            out.append(
                f"prefix_caching with batch_size 1: vllm-neuron {r.vllm_neuron} generates incorrect outputs "
                f"({r.rule_known_issues} 3); use batch_size > 1 or no prefix caching"
            )
        block = options.get("block_size", DEFAULT_BLOCK_SIZE)
        if not isinstance(block, int) or isinstance(block, bool) or block < 1:
            return [*out, f"backend_options block_size={block!r}: a positive integer"]
        if t.sequence_length % block:
            out.append(
                f"sequence_length={t.sequence_length} is not a multiple of block_size={block}: the model runner "
                "sizes block tables as max_model_len // block_size (vllm_neuron/worker/"
                "neuronx_distributed_model_runner.py)"
            )
        need = min_blocks(t.sequence_length, block, t.batch_size)
        blocks = options.get("num_blocks", need)
        if not isinstance(blocks, int) or isinstance(blocks, bool) or blocks < need:
            out.append(
                f"backend_options num_blocks={blocks!r}: vLLM needs at least ceil({t.sequence_length}/{block}) × "
                f"{t.batch_size} = {need} ({r.rule_validate})"
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
        """`{"neuron_config": kwargs}`: exactly what vllm-neuron builds from the launch command
        (`vllm_neuron_config` of `launch_command_flags`), i.e. its defaults for the flags merged with
        our `override_neuron_config` (tp/batch/length/dtype from the target, pre-sharded weights,
        logical NC config, fused QKV, buckets, quantization, passthrough options)."""
        return {"neuron_config": vllm_neuron_config(self.launch_command_flags(target, quantized_dir), self.release)[0]}

    def launch_command_flags(self, target: TargetSpec, quantized_dir: Path | None = None) -> dict[str, Any]:
        """`serve_flags` plus `--additional-config` with the override_neuron_config: the NeuronConfig
        fields neuronforge sets that vLLM's flags do not (or set otherwise).

        For the launch files of a quantized target `quantized_dir` is None: the quantized checkpoint
        lives on the compile worker, and the serving host has none. NeuronConfig only requires the
        field to be set (models/config.py: "quantized_checkpoints_path is required"); vLLM reads it
        only to recompile, which needs the original weights anyway. `QUANTIZED_ON_HOST` stands in,
        and `launch_mismatches` does not compare this host-local path.

        A plugin that reads max_prompt_length gets the target's max_context_length there (and builds
        the NeuronConfig from it) when it is shorter than the sequence."""
        flags = serve_flags(target)
        t = target.normalized()
        if self.release.reads_max_prompt_length and t.max_context_length != t.sequence_length:
            flags["additional_config"] = {"max_prompt_length": t.max_context_length}
        if quantized_dir is None and target.quantization.enabled:
            quantized_dir = Path(QUANTIZED_ON_HOST)
        ours = neuron_config_kwargs(target, quantized_dir, handled=PROFILE_OPTIONS)
        # vLLM's own choices for these replace the generic nxdi ones: dynamic sampling, bucketing on.
        ours.pop("on_device_sampling_config", None)
        ours.pop("enable_bucketing", None)
        defaults, _ = vllm_neuron_config(flags, self.release)
        overrides = {k: v for k, v in ours.items() if k not in defaults or defaults[k] != v}
        additional = flags.get("additional_config", {})
        flags["additional_config"] = {**additional, "override_neuron_config": dict(sorted(overrides.items()))}
        return flags

    # -- publishing ----------------------------------------------------------------------------
    def assemble_model(self, job: AssembleJob, dest: Path) -> None:
        """The build as NxD Inference wrote it (the backend has put config.json and the tokenizer
        beside it); from the checkpoint when a build lacks them, since vLLM reads both from the
        served folder."""
        copy_tree(job.build_dir, dest)
        if job.checkpoint_dir is not None:
            for name in ("config.json", *TOKENIZER_FILES):
                if not (dest / name).exists() and (job.checkpoint_dir / name).is_file():
                    (dest / name).write_bytes((job.checkpoint_dir / name).read_bytes())

    def launch_spec(self, ctx: LaunchContext) -> dict[str, str]:
        """`vllm.env` (where the folder is and where it goes, NEURON_COMPILED_ARTIFACTS, the versions
        the host needs) and `serve.sh` (download, then the `vllm serve` command the build was
        compiled for). The folder is always copied to MODEL_DIR, also from a `file://` store: vLLM
        compiles INTO NEURON_COMPILED_ARTIFACTS when loading fails, which must never be the store.
        Where the release's vLLM DLC holds the plugin (2.28.0 on), the env file names that image;
        vllm-neuron 0.2.0 ships in none, so its host installs it from the git tag."""
        r = self.release
        t = ctx.target.normalized()
        model_dir = ctx.host_dir(self.folder)
        env = {
            "MODEL_URI": ctx.model_uri(self.folder),
            "MODEL_DIR": model_dir,
            "NEURON_COMPILED_ARTIFACTS": model_dir,
            # NxD Inference reads the LNC from this variable before the compiled value (config.py _get_lnc).
            "NEURON_LOGICAL_NC_CONFIG": str(t.lnc),
            "PORT": "8000",
            "VLLM_NEURON_VERSION": r.vllm_neuron,
            "VLLM_VERSION": r.vllm,
            "NEURON_SDK_RELEASE": r.sdk,
            "NEURONXCC_VERSION": r.compiler,
            "NXDI_VERSION": r.nxdi,
        }
        families = ", ".join(sorted(self.instance_families))
        head = (
            f"# {ctx.model_type or 'model'} compiled by neuronforge for {t.slug} ({self.ref}).\n"
            f"# Serve on {t.instance_type} (or another {t.instance.family} instance; profile families: {families})\n"
        )
        if r.image is None:
            body = (
                f"# with >= {t.tp_degree} NeuronCores at logical NC config {t.lnc}, Neuron SDK {r.sdk}\n"
                f"# (neuronx-cc {r.compiler}, neuronx-distributed-inference {r.nxdi}), and\n"
                f'#   pip install --extra-index-url=https://pip.repos.neuron.amazonaws.com "{r.install}"\n'
                f"# (vllm-neuron {r.vllm_neuron}, which installs vllm=={r.vllm}). vLLM loads the compiled\n"
                "# model from NEURON_COMPILED_ARTIFACTS and ignores override_neuron_config once it loads;\n"
                "# serve.sh's flags are the ones it was compiled for. VLLM_NEURON_FRAMEWORK is not read by\n"
                f"# vllm-neuron {r.vllm_neuron} (NxD Inference is its only framework). Plain KEY=VALUE lines:\n"
                "# `docker run --env-file` and `set -a; . file` read them.\n"
            )
        else:
            body = (
                f"# with >= {t.tp_degree} NeuronCores at logical NC config {t.lnc}, in the Neuron SDK {r.sdk}\n"
                f"# vLLM image {r.image}\n"
                f"# (vllm-neuron {r.vllm_neuron} from {r.install}; vllm {r.vllm}, neuronx-cc {r.compiler},\n"
                f"# neuronx-distributed-inference {r.nxdi}, neuronx-distributed {r.nxd},\n"
                f"# torch-neuronx {r.torch_neuronx}, transformers {r.transformers}),\n"
                "# e.g. docker run --device=/dev/neuron0 --env-file vllm.env -v $PWD:/launch --entrypoint bash IMAGE\n"
                "# /launch/serve.sh. vLLM loads the compiled model from NEURON_COMPILED_ARTIFACTS and ignores\n"
                "# override_neuron_config once it loads; serve.sh's flags are the ones it was compiled for.\n"
                "# Plain KEY=VALUE lines: `docker run --env-file` and `set -a; . file` read them.\n"
            )
        env_text = head + body + "".join(f"{k}={v}\n" for k, v in env.items())
        return {ENV_FILE: env_text, SERVE_FILE: self._serve_sh(ctx)}

    def _serve_sh(self, ctx: LaunchContext) -> str:
        """`launch_templates/vllm-neuron-serve.sh`: download, then the command the build was compiled for."""
        r = self.release
        flags = self.launch_command_flags(ctx.target)
        return launch_script.render(
            "vllm-neuron-serve.sh",
            VLLM=r.vllm,
            VLLM_NEURON=r.vllm_neuron,
            ENV_FILE=ENV_FILE,
            COMMAND=serve_command_words(flags),
        )

    # -- preflight -------------------------------------------------------------------------------
    def preflight(self, artifact: Artifact) -> list[str]:
        """vllm-neuron 0.2.0's and NxD Inference 0.6's load-time rules, checked offline: the files
        `load(NEURON_COMPILED_ARTIFACTS)` reads, what vLLM reads from the served folder, the build
        against the target, and the published launch command against the build."""
        folder = artifact.root / self.folder
        raw = read_json(folder / NEURON_CONFIG)
        if not isinstance(raw, dict) or not isinstance(raw.get("neuron_config"), dict):
            return [
                f"{self.folder}/{NEURON_CONFIG}: missing, not JSON or without a neuron_config object "
                f"(NeuronXCls(path) reads it first; {self.release.rule_nxdi_config}; {self.release.rule_load})"
            ]
        nc = raw["neuron_config"]
        problems = self._compiled_files(folder, nc)
        problems += self._served_folder(folder)
        problems += self._target_fields(nc, artifact.target)
        problems += self._fused_qkv(nc)
        problems += self._launch(artifact.root, nc)
        return problems

    def _fused_qkv(self, nc: dict[str, Any]) -> list[str]:
        """A per-tensor quantized build with fused QKV does not load (`FUSED_QKV_PER_TENSOR`)."""
        per_tensor = (
            nc.get("quantized") and nc.get("quantization_type", "per_tensor_symmetric") == "per_tensor_symmetric"
        )
        if per_tensor and nc.get("fused_qkv"):
            return [
                f"{self.folder}/{NEURON_CONFIG}: fused_qkv=true with per-tensor quantization: {FUSED_QKV_PER_TENSOR}, "
                "so load() fails on the scale shape; compile again without fused_qkv (or per_channel)"
            ]
        return []

    def _compiled_files(self, folder: Path, nc: dict[str, Any]) -> list[str]:
        out = []
        if not (folder / MODEL_FILE).is_file():
            out.append(f"{self.folder}/{MODEL_FILE}: missing (torch.jit.load; {self.release.rule_nxdi_load})")
        if not nc.get("save_sharded_checkpoint"):
            return [
                *out,
                f"{self.folder}/{NEURON_CONFIG}: save_sharded_checkpoint is not true, so load() shards the "
                f"original checkpoint, which the artifact does not carry ({self.release.rule_nxdi_load})",
            ]
        first = int(nc.get("start_rank_id") or 0)
        size = int(nc.get("local_ranks_size") or nc.get("world_size") or nc.get("tp_degree") or 1)
        missing = [
            SHARD.format(rank=r) for r in range(first, first + size) if not (folder / SHARD.format(rank=r)).is_file()
        ]
        if missing:
            out.append(
                f"{self.folder}/{missing[0]}: missing ({len(missing)} of {size} pre-sharded rank files; "
                f"load_weights reads one per rank; {self.release.rule_nxdi_load})"
            )
        return out

    def _served_folder(self, folder: Path) -> list[str]:
        """vLLM reads config.json (the architecture, KV heads, head size) and the tokenizer from the
        `vllm serve` folder, which is this one."""
        out = tokenizer_problems(folder, self.folder, self.release.rule_tokenizer)
        config = read_json(folder / "config.json")
        if config is None:
            rule = self.release.rule_model_config
            return [*out, f"{self.folder}/config.json: missing or not JSON (vLLM's ModelConfig; {rule})"]
        archs = config.get("architectures") or []
        if not archs:
            return [*out, f"{self.folder}/config.json: no architectures ({self.release.rule_model_config})"]
        model_type = _model_type_of(archs[0])
        r = self.release
        if model_type not in r.model_types:
            out.append(
                f"{self.folder}/config.json: architectures[0]={archs[0]!r} is not served by vllm-neuron "
                f"{r.vllm_neuron} (supported: {sorted(r.model_types)}; {r.rule_arch})"
            )
        elif model_type not in r.served_types:
            out.append(
                f"{self.folder}/config.json: architectures[0]={archs[0]!r}: {MISTRAL_CLASS}, so vLLM would load "
                f"this build with another model class ({r.rule_arch})"
            )
        heads = config.get("num_attention_heads") and config.get("hidden_size")
        if not config.get("num_key_value_heads") or not (config.get("head_dim") or heads):
            out.append(
                f"{self.folder}/config.json: needs num_key_value_heads and head_dim (or num_attention_heads and "
                f"hidden_size) ({self.release.rule_model_config})"
            )
        return out

    def _target_fields(self, nc: dict[str, Any], target: TargetSpec) -> list[str]:
        t = target.normalized()
        out = []
        for field, want in (
            ("tp_degree", t.tp_degree),
            ("batch_size", t.batch_size),
            ("seq_len", t.sequence_length),
            ("torch_dtype", TORCH_DTYPE_NAMES[t.dtype]),
            ("logical_nc_config", t.lnc),
            # where the plugin reads max_prompt_length, the prompt may be shorter than the sequence
            *((("max_context_length", t.max_context_length),) if self.release.reads_max_prompt_length else ()),
        ):
            if _normal(field, nc.get(field)) != want:
                out.append(f"{self.folder}/{NEURON_CONFIG}: {field}={nc.get(field)!r}, the target says {want!r}")
        return out

    def _launch(self, root: Path, nc: dict[str, Any]) -> list[str]:
        launch = root / LAUNCH_DIR
        out = [f"{LAUNCH_DIR}/{n}: missing" for n in (ENV_FILE, SERVE_FILE) if not (launch / n).is_file()]
        if out:
            return out
        env = read_env_file(launch / ENV_FILE)
        where = f"{LAUNCH_DIR}/{ENV_FILE}"
        if not env.get("MODEL_URI", "").rstrip("/").endswith(f"/{self.folder}"):
            out.append(f"{where}: MODEL_URI={env.get('MODEL_URI')!r} is not the artifact's {self.folder}/ folder")
        if not env.get("NEURON_COMPILED_ARTIFACTS") or env.get("NEURON_COMPILED_ARTIFACTS") != env.get("MODEL_DIR"):
            out.append(
                f"{where}: NEURON_COMPILED_ARTIFACTS={env.get('NEURON_COMPILED_ARTIFACTS')!r} is not MODEL_DIR="
                f"{env.get('MODEL_DIR')!r}, where serve.sh puts the folder; without it vLLM compiles the model "
                f"again under the model folder ({self.release.rule_load})"
            )
        lnc = env.get("NEURON_LOGICAL_NC_CONFIG")
        if lnc is not None and lnc != str(nc.get("logical_nc_config")):
            out.append(
                f"{where}: NEURON_LOGICAL_NC_CONFIG={lnc} overrides the compiled logical_nc_config="
                f"{nc.get('logical_nc_config')} ({self.release.rule_nxdi_config})"
            )
        try:
            flags = launch_flags((launch / SERVE_FILE).read_text(encoding="utf-8"), env)
        except ValueError as exc:
            return [*out, f"{LAUNCH_DIR}/{SERVE_FILE}: {exc}"]
        if flags.get("model") != env.get("MODEL_DIR"):
            out.append(
                f"{LAUNCH_DIR}/{SERVE_FILE}: vllm serve {flags.get('model')!r} is not MODEL_DIR: vLLM reads "
                f"config.json and the tokenizer from the served folder ({self.release.rule_model_config})"
            )
        if "additional_config" in flags and not isinstance(flags["additional_config"], dict):
            out.append(f"{LAUNCH_DIR}/{SERVE_FILE}: --additional-config is not a JSON object")
            flags = {k: v for k, v in flags.items() if k != "additional_config"}
        out += [f"{LAUNCH_DIR}/{SERVE_FILE}: {m}" for m in launch_mismatches(nc, flags, self.release)]
        return out


def render_serve_command(flags: Mapping[str, Any], model: str = Shell('"$MODEL_DIR"')) -> str:
    """`vllm serve MODEL --flag value …` (shell-quoted; `launch_flags` parses it back)."""
    return launch_script.command(serve_command_words(flags, model))


def serve_command_words(flags: Mapping[str, Any], model: str = Shell('"$MODEL_DIR"')) -> list[list[str]]:
    """The words of `vllm serve MODEL --flag value …`, one flag (with its value) per line for a readable
    script; `"$PORT"` and `"$@"` are the script's own shell text."""
    parts = ["vllm", "serve", model]
    for name in ("tensor_parallel_size", "max_num_seqs", "max_model_len", "dtype"):
        parts += [f"--{name.replace('_', '-')}", str(flags[name])]
    if flags.get("enable_prefix_caching"):
        parts += ["--enable-prefix-caching", "--block-size", str(flags["block_size"])]
        parts += ["--num-gpu-blocks-override", str(flags["num_gpu_blocks_override"])]
    else:
        parts.append("--no-enable-prefix-caching")
    if flags.get("additional_config"):
        parts += ["--additional-config", json.dumps(flags["additional_config"], sort_keys=True)]
    parts += ["--port", Shell('"$PORT"'), Shell('"$@"')]
    lines: list[list[str]] = [parts[:3]]
    for word in parts[3:]:
        if word.startswith("--") or word == '"$@"':
            lines.append([word])
        else:
            lines[-1].append(word)
    return lines


def _model_type_of(architecture: str) -> str | None:
    """`_get_neuron_model_cls`'s key for an architecture name (None: not `<Model>For<Task>`)."""
    if "For" not in architecture:
        return None
    model = architecture.split("For", 1)[0].lower()
    return "qwen3_moe" if model == "qwen3moe" else model


PROFILES = tuple(VllmNeuronProfile(r) for r in RELEASES)
# vllm-neuron@2.26.1, by the name the tests that build on the SDK 2.26.1 fake (and subclass it) import.
PROFILE = PROFILES[0]
