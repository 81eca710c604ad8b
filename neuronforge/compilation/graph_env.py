"""The stray-environment rule: which environment variables a Neuron compile or load child may take
from the worker, as data — one table (`RULES`), each row a variable (or a prefix), what it does to
the graphs, what neuronforge does about it, and the evidence, marked as proven by the reader's CODE,
by its DOCS, or UNVERIFIED (and then why the action is safe either way).

Every toolchain child (compile, smoke load, re-trace, detection) inherits the worker's environment
(`backends.interpreter.child_env`). A variable that shapes the compiled graphs but that the profile
and target do not set would change what is built without the cache key, the manifest or the launch
files seeing it: the compile passes, its smoke load (same worker, same variable) passes, and a server
started from the launch files computes other graphs. So, for every Neuron backend:

- `refuse`: set on the worker and not declared by the backend -> `InvalidInput` before compiling,
  naming the variable and its value (`graph_env`). Declared ones replace the worker's and are
  recorded in the manifest's `compile.graph_env` (vllm-neuron-native: also its cache manifest's
  `env`, rendered into `vllm.env` and compared by preflight).
- `override`: variables that redirect where a compile writes or reads, or which mode the plugin
  runs in: the backend sets or clears them itself (the worker's value never reaches the child).

In every child, both kinds come only from what the backend declares (`child_environment`): a smoke
load or re-trace runs with exactly the graph-shaping environment the launch files give a server, so
it cannot pass thanks to the worker's environment. The cpu backend compiles with torch's inductor
in this process and reads none of these.

`neuronforge.interfaces.graph_env_table` renders `RULES` into docs/profiles.md.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from neuronforge.common.errors import InvalidInput
from neuronforge.compilation import vllm_neuron_sources as plugin
from neuronforge.compilation.vllm_neuron_sources import NEURON_DOCS

log = logging.getLogger(__name__)

Action = Literal["refuse", "override"]
Proof = Literal["code", "docs", "unverified"]

# Where the rule is written down for people (generated from RULES).
DOCS = "docs/profiles.md, 'The compile environment'"


@dataclass(frozen=True)
class Evidence:
    """One source for a rule: `code` (repo@commit path:line), `docs` (a URL or repo@commit path) or
    `unverified` (what could not be read, and why the action holds anyway)."""

    proof: Proof
    where: str


@dataclass(frozen=True)
class EnvRule:
    """Variables (a name, or a prefix ending in `*`) with one effect and one action."""

    names: tuple[str, ...]
    action: Action
    read_by: str  # which toolchain reads them
    effect: str  # what they change (the refusal quotes it)
    evidence: tuple[Evidence, ...]

    def matches(self, name: str) -> bool:
        return any(name.startswith(n[:-1]) if n.endswith("*") else name == n for n in self.names)


TNX = "aws-neuron/transformers-neuronx@1ade6d74 src/transformers_neuronx"  # 0.13.x (SDK 2.21.1's LMI image)
NXDI = "aws-neuron/neuronx-distributed-inference@e07f0567 src/neuronx_distributed_inference"  # v0.6.10598
TORCH_NEURONX = f"{NEURON_DOCS}/v2.29.1/_sources/frameworks/torch/torch-neuronx"
ENVVARS_PAGE = f"{TORCH_NEURONX}/api-reference-guide/training/torch-neuron-envvars.rst"
NOT_UPSTREAM = (
    "the plugin's 0.24/0.29 release code is not public here (the compile code moved into "
    "libtorch-neuronx-lite); refusing a stray one is safe whether or not those releases still read it"
)

RULES: tuple[EnvRule, ...] = (
    EnvRule(
        ("NEURON_CC_FLAGS",),
        "refuse",
        "neuronx-cc through every framework",
        "the Neuron compiler's flags, which change every NEFF and name every persistent-cache entry",
        (
            Evidence(
                "docs",
                f"{ENVVARS_PAGE} (NEURON_CC_FLAGS: compiler options)",
            ),
            Evidence(
                "code",
                f"{TNX}/compiler.py:91 get_compiler_flags (their hash is the `+` suffix of the MODULE_ cache entry's "
                "name)",
            ),
            Evidence(
                "docs",
                "aws-neuron/aws-neuron-sdk@81ce03ae compiler/about-neuronx-cc.rst l.34-37: a framework "
                "plugin forwards options to the compiler through NEURON_CC_FLAGS",
            ),
            Evidence(
                "unverified",
                "whether libtorch-neuronx-lite (vLLM Neuron 0.24+) appends them to the compiler "
                "args its key hashes (issue 38 case 1; the in-plugin 0.21 key hashes only the runner's "
                "compiler_args): a stray value changes the NEFFs either way, and a key that does not see it "
                "would serve them silently",
            ),
        ),
    ),
    EnvRule(
        ("XLA_*",),
        "refuse",
        "torch-xla (optimum-neuron, NxD Inference; the 2.32 plugin's XLA route)",
        "torch-xla's switches (XLA_USE_BF16 / XLA_DOWNCAST_BF16 cast every float tensor of the traced HLO, "
        "XLA_FLAGS tunes XLA's HLO passes)",
        (
            Evidence(
                "docs",
                f"{NEURON_DOCS}/latest/about-neuron/appnotes/torch-neuronx/migration-from-xla-downcast-bf16.html",
            ),
            Evidence(
                "unverified",
                "whether torch-xla's lowering inside libtorch-neuronx-lite honours them (the key "
                "hashes the FX graph, not the HLO, so an effect would be invisible to it)",
            ),
        ),
    ),
    EnvRule(
        ("NEURON_PLATFORM_TARGET_OVERRIDE",),
        "refuse",
        "optimum-neuron, NxD Inference, vLLM Neuron",
        "the compilation target (trn1 / trn2 / trn3): part of every NEFF and of the plugin's key",
        (
            Evidence(
                "code",
                "aws-neuron/neuronx-distributed-inference@ef2731ef src/neuronx_distributed_inference/"
                "models/config.py:726 (set from the host only when unset)",
            ),
            Evidence(
                "code", "huggingface/optimum-neuron@v0.4.5 optimum/neuron/utils/instance.py align_compilation_target"
            ),
            Evidence(
                "code",
                f"{plugin.CACHE_CODE} _normalize_compiler_args: --target resolved env var > args > runtime, "
                "then hashed",
            ),
        ),
    ),
    EnvRule(
        ("NEURON_LOGICAL_NC_CONFIG",),
        "refuse",
        "NxD Inference, vLLM Neuron",
        "the logical NeuronCore size (LNC): it wins over the configured logical_nc_config and reshapes "
        "every graph's sharding",
        (
            Evidence("code", f"{NXDI}/models/config.py:506 NeuronConfig._get_lnc (the variable wins over the keyword)"),
            Evidence(
                "docs",
                f"{NEURON_DOCS}/latest/general/arch/neuron-features/logical-neuroncore-config.html (the runtime "
                "variable groups physical NeuronCores into one logical core; a model must be compiled for that LNC)",
            ),
        ),
    ),
    EnvRule(
        ("NEURON_RANK_ID", "NEURON_LOCAL_TP", "NEURON_PP_STAGES"),
        "refuse",
        "transformers-neuronx",
        "pipeline rank, local TP degree and pipeline stages: which layers a graph holds, its replica groups "
        "and how the weights are sharded",
        (Evidence("code", f"{TNX}/config.py:319-323 NeuronConfig.__init__"),),
    ),
    EnvRule(
        ("NEURON_VOCAB_PAD_DIVISOR",),
        "refuse",
        "transformers-neuronx",
        "the vocabulary padding: the lm_head and logits shapes",
        (Evidence("code", f"{TNX}/decoder.py:355"),),
    ),
    EnvRule(
        ("NEURON_INTERNAL_*",),
        "refuse",
        "transformers-neuronx",
        "internal switches of the HLO builders (weight tiling, prompt start masks, KV prefetch)",
        (
            Evidence("code", f"{TNX}/config.py:307 NEURON_INTERNAL_TRANSFORM_WEIGHT_LAYOUT (weight tiling)"),
            Evidence(
                "code", f"{TNX}/gpt2/model.py:55, opt/model.py:73 NEURON_INTERNAL_ASSUME_ALL_PROMPT_LENGTHS_ARE_EQUAL"
            ),
            Evidence("code", f"{TNX}/opt/model.py:282 NEURON_INTERNAL_THOMAS_PREFETCH"),
        ),
    ),
    EnvRule(
        ("NEURONX_DUMP_TO",),
        "refuse",
        "transformers-neuronx",
        "debug dumps: file metadata in every HLO (its hash names the NEFF) and compiles that bypass the "
        "persistent cache",
        (Evidence("code", f"{TNX}/compiler.py:69-70,116,126"),),
    ),
    EnvRule(
        ("VLLM_NEURON_BACKEND",),
        "refuse",
        "vLLM Neuron 0.29 (SDK 2.33)",
        "the compilation route (native StableHLO or the deprecated XLA one): different lowerings, different graphs",
        (
            Evidence("docs", f"{NEURON_DOCS}/latest/vllm-neuron/docs/guides/how-to-choose-compilation-route.html"),
            Evidence("code", f"{plugin.ENVS_CODE} is_native_backend"),
        ),
    ),
    EnvRule(
        (
            "VLLM_NEURON_DISABLE_NKI_KERNELS",
            "VLLM_NEURON_KERNEL_DEVICE_DUMP",
            "VLLM_NEURON_DISABLE_INPUT_DEDUP",
            "VLLM_NEURON_SWITCH_CC",
            "VLLM_NEURON_SKIP_PREFILL_WARMUP",
            "VLLM_NEURON_SKIP_DECODE_WARMUP",
            "VLLM_NEURON_MIN_KV_BUDGET_GIB",
            "VLLM_NEURON_KV_GMU_BUDGET_CAP_FRACTION",
        ),
        "refuse",
        "vLLM Neuron",
        "what the plugin's warm-up traces: NKI kernels or not, HLO parameters, collective topology, which "
        "graphs are compiled at all, the KV budget",
        (
            Evidence("code", plugin.ENVS_CODE),
            Evidence("docs", f"{plugin.KV_SIZE} (the KV budget variables size the KV cache, baked into the NEFF)"),
            Evidence("unverified", NOT_UPSTREAM),
        ),
    ),
    EnvRule(
        ("NEURON_LIBTORCH_CACHE_ROOT",),
        "override",
        "libtorch-neuronx-lite (vLLM Neuron 0.24+)",
        "LNL's own compile-cache root (<root>/neuron/compile_cache): a compile would write, a load read, "
        "outside the cache neuronforge syncs; the vllm-native backend sets it to its VLLM_CACHE_ROOT",
        (
            Evidence(
                "code",
                f"{plugin.LNL_CACHE_CODE} (third party, calling LNL: "
                "<NEURON_LIBTORCH_CACHE_ROOT>/neuron/compile_cache, default ~/.cache/neuron_libtorch, SDK 2.32)",
            ),
            Evidence(
                "unverified",
                "whether LNL under vLLM Neuron reads it before VLLM_CACHE_ROOT (issue 38 case 4; LNL is not "
                "public): both are set to the same folder, so either way the cache is the backend's",
            ),
        ),
    ),
    EnvRule(
        ("VLLM_CACHE_ROOT",),
        "override",
        "vLLM Neuron",
        "the plugin's local cache root ($VLLM_CACHE_ROOT/neuron/compile_cache): the vllm-native backend "
        "names a fresh one per action",
        (Evidence("code", f"{plugin.ENVS_CODE} get_neuron_compile_cache_dir"), Evidence("docs", plugin.CACHE_PAGE)),
    ),
    EnvRule(
        ("NEURON_LIBTORCH_REMOTE_CACHE", "VLLM_NEURON_REMOTE_CACHE"),
        "override",
        "vLLM Neuron",
        "a remote cache tier read on a local miss: a compile would copy entries from elsewhere, a load "
        "find graphs the published cache lacks",
        (
            Evidence("code", plugin.CACHE_CODE),
            Evidence("docs", plugin.CACHE_PAGE),
        ),
    ),
    EnvRule(
        ("NEURON_COMPILE_CACHE_URL",),
        "override",
        "libneuronxla (optimum-neuron, NxD Inference, transformers-neuronx)",
        "the Neuron persistent cache: the backends that use it name this host's cache root, the others clear it",
        (
            Evidence(
                "docs",
                f"{ENVVARS_PAGE} (NEURON_COMPILE_CACHE_URL)",
            ),
        ),
    ),
    EnvRule(
        ("BASE_COMPILE_WORK_DIR",),
        "override",
        "NxD Inference",
        "where NxD Inference writes its compiler work folders (default /tmp/nxd_model/)",
        (Evidence("code", f"{NXDI}/models/application_base.py:144, models/model_wrapper.py:73"),),
    ),
    EnvRule(
        ("VLLM_NEURON_CPU_COMPILE", "VLLM_NEURON_CPU_MODE"),
        "override",
        "vLLM Neuron",
        "the plugin's mode: the compile and the re-trace run in CPU-compile mode, the smoke load on the "
        "device (a CPU-mode load would pass without Neuron)",
        (Evidence("code", plugin.ENVS_CODE), Evidence("docs", f"{plugin.CPU_COMPILATION} (VLLM_NEURON_CPU_COMPILE)")),
    ),
)


def rule_for(name: str) -> EnvRule | None:
    """The rule that governs variable `name`, if any."""
    return next((r for r in RULES if r.matches(name)), None)


def shapes_graphs(name: str) -> bool:
    """Whether `name` changes the compiled graphs (a `refuse` rule governs it)."""
    rule = rule_for(name)
    return rule is not None and rule.action == "refuse"


def governed(name: str) -> bool:
    """Whether a toolchain child takes `name` only from what the backend declares."""
    return rule_for(name) is not None


def graph_env(declared: Mapping[str, str], environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The graph-shaping variables a compile runs with: those the backend sets (`declared`, from the
    profile and target), returned for the manifest. One set in the worker's environment (`environ`)
    that the backend does not set is refused before compiling, naming it; one the backend sets
    replaces the worker's (logged when they differ)."""
    environ = os.environ if environ is None else environ
    stray = sorted(k for k, v in environ.items() if v and shapes_graphs(k) and k not in declared)
    if stray:
        name, rule = stray[0], rule_for(stray[0])
        assert rule is not None
        also = f" (also {stray[1:]})" if stray[1:] else ""
        raise InvalidInput(
            f"compile: {name}={environ[name]!r} is set in the worker's environment but not by the profile or "
            f"target{also}: {rule.effect}; the compile would change with it and neither the cache key nor the "
            f"manifest would record it; unset it on the worker ({DOCS})"
        )
    for k, v in sorted(declared.items()):
        if shapes_graphs(k) and environ.get(k) and environ[k] != v:
            log.info("compile: the worker's %s=%r is replaced by the profile's %r", k, environ[k], v)
    return {k: v for k, v in sorted(declared.items()) if shapes_graphs(k)}


def child_environment(declared: Mapping[str, str], environ: Mapping[str, str]) -> dict[str, str]:
    """A toolchain child's environment: the worker's (`environ`) without any variable a rule governs,
    then what the backend declares. What a child runs with that shapes graphs or redirects the
    cache is therefore always the backend's (for a load: the launch files') and never the worker's."""
    return {**{k: v for k, v in environ.items() if not governed(k)}, **declared}
