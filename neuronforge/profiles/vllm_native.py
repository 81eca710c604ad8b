"""Profile `vllm-neuron-native`: the vLLM Neuron plugin without NxD Inference (SDK 2.32 and 2.33,
Trn2/Trn3) — the stack AWS ships today. Each fact below names its source where it is used (the
pages and code in `neuronforge.compilation.vllm_neuron_sources`; the release table's for versions).

The plugin compiles with torch.compile into its own cache (`$VLLM_CACHE_ROOT/neuron/compile_cache/
<32-hex key>/`, `neuronforge.compilation.vllm_cache`), whose key hashes the traced graph, every input's
shape (buckets, `--max-model-len`, `--block-size`, the KV block count), the TP layout, the compiler
and NKI versions and the compiler target. So a server hits only if it runs the very command the
cache was built with. This profile renders that command once (`ServeCommand`: argv and the
environment the graphs depend on) and uses it three times: to compile on a CPU worker in the
plugin's CPU-compile mode (`VLLM_NEURON_CPU_COMPILE=1`, `NEURON_PLATFORM_TARGET_OVERRIDE`), in
the published `launch/serve.sh` / `vllm.env`, and in the cache manifest (`launch/vllm-cache.json`),
which `verify` compares with what `serve.sh` would run, field by field.

- The KV block count is pinned (`--num-gpu-blocks-override`): in CPU-compile mode the plugin sizes
  the KV cache from a static HBM table, on the device from what the runtime reports; anything but a
  fixed count risks a different shape, hence a different key, for every graph (`RULE_KV`).
- The KV block count pinned is what max_num_seqs full-length sequences need plus vLLM's null block
  (`kv_blocks`).
- The architectures are the release's plugin registry's (`Release.architectures`): anything else is
  refused at planning, naming the line that serves it.
- Fail-closed serving: the entries are synced locally first (`launch/sync.sh`, checked against the
  manifest's sha256), then `vllm serve` runs with the docs' pair — `VLLM_NEURON_DISABLE_WARMUP_COMPILE=1`
  (a local miss raises before any remote lookup, `RULE_FAIL_CLOSED`) and `<prefix>DISABLE_GRAPH_CAPTURE_BACKEND=1` —
  and the release's assert-hit switch (`Release.fail_closed`), with libtorch-neuronx-lite's own cache
  root set to the synced one.
- SDK 2.33's route is not shown to write the layout synced here: `verify` wants the P1 re-trace
  (`Release.layout_verified`, `retrace_required`).
- The cache env-var names belong to the release: `NEURON_LIBTORCH_*` from vllm-neuron 0.24 (SDK 2.32;
  the code moved into libtorch-neuronx-lite), `VLLM_NEURON_*` before (the sdk#1368 "remote cache had
  no effect" reports) — `Release.cache_env`.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from dataclasses import dataclass
from math import ceil
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from neuronforge.artifacts import launch_script, layout
from neuronforge.common.errors import InvalidInput
from neuronforge.compilation import vllm_neuron_sources as sources
from neuronforge.compilation.backends.vllm_native import BACKEND, CACHE_MANIFEST
from neuronforge.compilation.graph_env import shapes_graphs
from neuronforge.profiles.base import (
    LAUNCH_DIR,
    Artifact,
    AssembleJob,
    LaunchContext,
    Pins,
    ServingProfile,
    SmokeLoad,
    copy_tree,
    read_env_file,
    relocated,
    tokenizer_problems,
    version_matches,
)
from neuronforge.profiles.line_lifecycles import VLLM_NEURON_NATIVE
from neuronforge.profiles.release_table import ProfileRelease, profile_releases
from neuronforge.spec.target import TORCH_DTYPE_NAMES, Quantization

if TYPE_CHECKING:
    from neuronforge.compilation.backends.interpreter import ToolchainPython
    from neuronforge.compilation.retrace import Retrace
    from neuronforge.spec.target import TargetSpec
    from neuronforge.stores import ArtifactStore

# The sources the refusals and `verify`'s findings cite (one line each: what, the value, the source).
RULE_KEY = f"{sources.CACHE_CODE} create_cache_hash"
RULE_KV = f"{sources.KV_SIZE}: KV size is baked into the NEFF shape"
RULE_FAIL_CLOSED = f"{sources.BACKEND_CODE}: VLLM_NEURON_DISABLE_WARMUP_COMPILE is checked before the remote tier"
RULE_INSTANCES = "the plugin without NxD Inference runs on Trn2/Trn3 only"
ENV_FILE = "vllm.env"
SERVE_FILE = "serve.sh"
SYNC_FILE = "sync.sh"
K8S_FILE = "k8s-init-container.yaml"
# Where the serving host keeps the plugin's cache: a local disk, never NFS/Lustre (the plugin raises for a
# compile folder on a remote filesystem and moves a default root on NFS to /tmp: sources.BACKEND_CODE,
# sources.ENVS_CODE).
HOST_CACHE_ROOT = "/var/cache/neuronforge/vllm"
DEFAULT_BLOCK_SIZE = 32
PROFILE_OPTIONS = frozenset({"block_size", "num_blocks", "prefix_caching"})


@dataclass(frozen=True)
class Release:
    """One SDK release of the plugin: the pins its image holds, the names its code reads and the
    architectures its model registry serves."""

    sdk: str
    vllm: str
    vllm_neuron: str
    libtorch_neuronx_lite: str | None  # None: its version in this release is not published
    compiler: str
    nki: str
    route: str  # the compilation route the release uses by default: "xla" (HLO) or "native" (StableHLO)
    image: str
    source: str
    # model_type -> the HF architecture the plugin's registry maps to its own class at this release
    # (`vllm_neuron/model/registry.py` get_models()); any other architecture cannot be served.
    architectures: Mapping[str, str]
    registry_source: str  # where that list was read, and how well it is proven
    # The evidence that this release's route writes the cache layout neuronforge publishes and syncs
    # (`compile_cache/<key>/graph.hlo` + `graph_<key>.neff`, vllm_cache.py); None: unverified, and
    # `layout_unverified` says why — `verify` then calls an artifact deployable only after the P1
    # re-trace in the serving image (`retrace_required`).
    layout_verified: str | None
    layout_unverified: str = ""
    cache_env: str = "NEURON_LIBTORCH_"  # prefix of the compile-cache switches (0.24+: in LNL)

    @property
    def cache_root_env(self) -> str | None:
        """libtorch-neuronx-lite's own cache root (0.24+), set to the same root as VLLM_CACHE_ROOT."""
        return "NEURON_LIBTORCH_CACHE_ROOT" if self.cache_env == "NEURON_LIBTORCH_" else None

    def fail_closed(self) -> dict[str, str]:
        """The switches a server starts with so that a missing graph fails the start instead of
        compiling, each with its source (the names are the release's: `cache_env`)."""
        return {
            # DOCS: aws-neuron-sdk@81ce03ae vllm-neuron/docs/design/compilation/cpu_compilation.md l.79-92
            # "Preventing Compilation on Production Instances": this pair. The warm-up switch keeps its
            # VLLM_NEURON_ name from 0.24 (compilation_cache.md l.153); the capture backend's is LNL's.
            "VLLM_NEURON_DISABLE_WARMUP_COMPILE": (
                "cpu_compilation.md l.79-92: a cache miss of the vllm_neuron backend raises instead of compiling"
            ),
            f"{self.cache_env}DISABLE_GRAPH_CAPTURE_BACKEND": (
                "cpu_compilation.md l.79-92: the graph-capture backend, which compiles what it captured, is off"
            ),
            # CODE for the 0.21 name (AWShtokoyo/vllm-neuron@eabd4c9f vllm_neuron/envs.py: "treat local +
            # remote compile cache miss as a fatal error"); the LNL name in real use on SDK 2.32, where it
            # failed a start on a precompiled cache (THIRD PARTY: foxl-ai/kiln@f5a7faf3
            # bench/results/2026-10-07-precompile-start.md); no AWS document names it.
            f"{self.cache_env}ASSERT_CACHE_HIT": (
                "envs.py (0.21) / foxl-ai/kiln bench 2026-10-07 (LNL 2.11.0.1.0.1284): a local and remote miss raises"
            ),
        }

    def packages(self) -> dict[str, str]:
        out = {"vllm": self.vllm, "vllm-neuron": self.vllm_neuron, "nki": self.nki}
        if self.libtorch_neuronx_lite:
            out["libtorch-neuronx-lite"] = self.libtorch_neuronx_lite
        return out


# The plugin's model registry: `vllm_neuron/model/registry.py` get_models() lists (HF architecture,
# the plugin's class) pairs that `NeuronWorker.__init__` registers into vLLM's ModelRegistry, over vLLM's
# own classes of those names (aws-neuron/aws-neuron-sdk@81ce03ae vllm-neuron/docs/design/framework/
# model_factory_design.md). An architecture it lacks resolves to vLLM's GPU class, which the plugin's
# model runner cannot build (`model_cls.from_configs(...)`): the server does not start.
# Eagle3LlamaForCausalLM and DFlashDraftModel are speculative-decoding drafts, not target models.
# release-0.24.0.1.1.0 (f8abae6) registry.py:21-25 — CODE, read by a third party at the tag
# (foxl-ai/kiln@f5a7faf3 docs/research/vllm-neuron-parity.md: "Five architectures"), the same five
# lines in the fork longdct/vllm-neuron@5f7246ed: LlamaForCausalLM, GptOssForCausalLM,
# Eagle3LlamaForCausalLM, Qwen3ForCausalLM, Qwen3VLForConditionalGeneration.
PLUGIN_0_24_REGISTRY = MappingProxyType(
    {
        "llama": "LlamaForCausalLM",
        "gpt_oss": "GptOssForCausalLM",
        "qwen3": "Qwen3ForCausalLM",
        "qwen3_vl": "Qwen3VLForConditionalGeneration",
    }
)
REGISTRY_0_24_SOURCE = "vllm_neuron/model/registry.py at release-0.24.0.1.1.0 (f8abae6)"
# 0.29.0.1.2.0: the tag was not read. The newest upstream registry read (vllm-project/vllm-neuron@5528be7a,
# after 0.24: the DFlash drafts) keeps the same four targets and adds only DFlashDraftModel; no tree read
# registers Qwen2ForCausalLM (UNVERIFIED at the tag; the SDK 2.33 model recipes add Qwen3-32B dense, the
# Qwen3ForCausalLM class, and Qwen3-ASR, not a decoder neuronforge plans).
PLUGIN_0_29_REGISTRY = PLUGIN_0_24_REGISTRY
REGISTRY_0_29_SOURCE = "vllm_neuron/model/registry.py at vllm-project/vllm-neuron@5528be7a (the 0.29 tag unread)"


@dataclass(frozen=True)
class PluginBehaviour:
    """What differs between plugin versions and is not a fact of the release table: the compilation
    route, the model registry and the evidence that the route writes the cache layout synced here."""

    route: str
    architectures: Mapping[str, str]
    registry_source: str
    layout_verified: str | None
    layout_unverified: str = ""
    cache_env: str = "NEURON_LIBTORCH_"


# By the plugin's version series (`0.24` for 0.24.0.1.1.0). A release of a series listed here is one
# data file (neuronforge/profiles/releases/); a new series is new behaviour: an entry here, and a fake
# of it (tests/fakes) when what it does observably differs.
BEHAVIOUR: Mapping[str, PluginBehaviour] = MappingProxyType(
    {
        "0.24": PluginBehaviour(
            route="xla",
            architectures=PLUGIN_0_24_REGISTRY,
            registry_source=REGISTRY_0_24_SOURCE,
            layout_verified=(
                "CODE: the in-plugin cache (Infinity-AI-Institute/vllm-neuron@7f4cca75 vllm_neuron/compile/cache.py "
                "_is_cache_complete, get_neff_filename; XLA route: graph.hlo); THIRD PARTY on SDK 2.32: "
                "foxl-ai/kiln@a04d1fab kiln/compile_cache.py syncs LNL 2.11.0.1.0.1284's entries as one <key>/ "
                "folder per graph, complete with .compilation_complete"
            ),
        ),
        # The native route (FX -> StableHLO) is the default from 0.29 (SDK 2.33).
        "0.29": PluginBehaviour(
            route="native",
            architectures=PLUGIN_0_29_REGISTRY,
            registry_source=REGISTRY_0_29_SOURCE,
            layout_verified=None,
            layout_unverified=(
                "SDK 2.33's default native route (FX -> AOTAutograd -> torch-mlir -> StableHLO -> neuronx-cc, "
                "how_vllm_is_integrated_with_torchneuron.html) is not shown by any code or document read to write "
                "compile_cache/<key>/graph.hlo + graph_<key>.neff"
            ),
        ),
    }
)


def release_of(r: ProfileRelease) -> Release:
    """A registered release of the line: its pins from the release table (versions with the local
    labels the table gives; a package it does not pin, None), its behaviour by plugin version."""
    plugin = r.packages["vllm-neuron"].version
    key = ".".join(plugin.split(".")[:2])
    if key not in BEHAVIOUR:
        raise InvalidInput(
            f"vllm-neuron-native@{r.sdk}: vLLM Neuron {plugin} has no known behaviour (BEHAVIOUR in "
            f"neuronforge/profiles/vllm_native.py knows {', '.join(BEHAVIOUR)})"
        )
    b = BEHAVIOUR[key]
    lite = r.packages.get("libtorch-neuronx-lite")
    return Release(
        sdk=r.sdk,
        vllm=r.version("vllm"),
        vllm_neuron=r.version("vllm-neuron"),
        libtorch_neuronx_lite=lite.full if lite else None,
        compiler=r.version("neuronx-cc"),
        nki=r.version("nki"),
        route=b.route,
        image=r.image or "",
        source=r.source.cite(),
        architectures=b.architectures,
        registry_source=b.registry_source,
        layout_verified=b.layout_verified,
        layout_unverified=b.layout_unverified,
        cache_env=b.cache_env,
    )


RELEASES = tuple(release_of(r) for r in profile_releases("vllm-neuron-native"))


@dataclass(frozen=True)
class ServeCommand:
    """The one rendering of `vllm serve` for a target: the arguments after `serve MODEL` and the
    environment its graphs depend on. Compiling, launching and verifying all start here."""

    argv: tuple[str, ...]
    env: Mapping[str, str]

    def flags(self) -> dict[str, str]:
        return parse_argv(list(self.argv))


def parse_argv(words: list[str]) -> dict[str, str]:
    """`--flag value` / `--flag=value` / `--flag` pairs into {flag: value} ("" for a bare switch);
    positional words are kept under their position (`#0`)."""
    out: dict[str, str] = {}
    i = 0
    while i < len(words):
        word = words[i]
        i += 1
        if not word.startswith("--"):
            out[f"#{sum(k.startswith('#') for k in out)}"] = word
            continue
        name, eq, value = word[2:].partition("=")
        if not eq and i < len(words) and not words[i].startswith("--"):
            value = words[i]
            i += 1
        out[name] = value
    return out


def serve_argv_of(script: str, env: Mapping[str, str]) -> list[str] | None:
    """The arguments after `vllm serve MODEL` in a launch script (variables expanded from `env`,
    `"$@"` dropped); None when it has no `vllm serve` command."""
    from neuronforge.profiles.base import SHELL_VAR

    for line in script.replace("\\\n", " ").splitlines():
        words = shlex.split(line, comments=True)
        for i in range(len(words) - 1):
            if words[i].rsplit("/", 1)[-1] == "vllm" and words[i + 1] == "serve":
                rest = [
                    SHELL_VAR.sub(lambda m: env.get(m.group(1) or m.group(2), m.group(0)), w) for w in words[i + 2 :]
                ]
                return [w for w in rest if w != "$@"]
    return None


class VllmNativeProfile(ServingProfile):
    name = "vllm-neuron-native"
    backend = BACKEND
    toolchain_python = "/opt/conda/bin/python"
    instance_families = frozenset({"trn2", "trn3"})
    lifecycle = VLLM_NEURON_NATIVE
    folder = "model"
    publishes = (
        "model/: the checkpoint vLLM loads (config.json, safetensors, tokenizer); launch/: vllm.env, "
        "vllm-cache.json (the compiled command and every cache entry with sizes and sha256), sync.sh, "
        "serve.sh, k8s-init-container.yaml; the entries under vllm-neuron-cache/<sdk>/<key>/"
    )

    def __init__(self, release: Release) -> None:
        self.release = release
        self.pins = Pins(sdk_release=release.sdk, compiler_version=release.compiler, packages=release.packages())
        self.title = (
            f"vLLM {release.vllm} + vLLM Neuron {release.vllm_neuron.split('+')[0]} (no NxD Inference): its "
            "compile cache synced from the store, then vllm serve with compiling forbidden"
        )

    @property  # type: ignore[override]
    def serving_image(self) -> str:
        """The release's vLLM DLC (the launch files' `vllm-cache.json` names it too)."""
        return self.release.image

    @property  # type: ignore[override]
    def consumer_architectures(self) -> frozenset[str]:
        """What this release's plugin registry serves (the backend limits it to what neuronforge plans)."""
        return frozenset(self.release.architectures)

    # -- planning ------------------------------------------------------------------------------
    def problems(self, target: TargetSpec, model_type: str | None = None) -> list[str]:
        out = super().problems(target, model_type)
        family = target.instance.family
        if out and family not in self.instance_families:
            # The release table's source for the family's status on this line (one home for the citation).
            phase = self.lifecycle.phase(family, self.release.sdk)
            cited = f": {phase.source.url}" if phase else ""
            out[0] += f" ({RULE_INSTANCES}{cited}); for {family} use profile vllm-neuron (vLLM on NxD Inference)"
        t = target.normalized()
        if t.quantization.enabled:
            out.append(
                f"quantization {t.quantization.slug}: profile {self.name} publishes the checkpoint vLLM loads as "
                "it is; neuronforge does not yet produce a quantized checkpoint this plugin reads. Build without "
                "quantization, or use profile vllm-neuron"
            )
        if t.max_context_length != t.sequence_length:
            out.append(
                f"max_context_length={t.max_context_length} with sequence_length={t.sequence_length}: this profile "
                "compiles prompts up to --max-num-batched-tokens = --max-model-len; leave max_context_length unset"
            )
        if t.context_encoding_buckets or t.token_generation_buckets:
            out.append(
                "explicit buckets: the plugin derives its buckets from the serving flags; this profile does not "
                "pass bucket lists yet — leave context_encoding_buckets / token_generation_buckets unset"
            )
        unknown = sorted(set(t.backend_options) - PROFILE_OPTIONS)
        if unknown:
            out.append(
                f"backend_options {unknown} are not accepted by profile {self.name}; "
                f"accepted: {sorted(PROFILE_OPTIONS)}"
            )
        block = t.backend_options.get("block_size", DEFAULT_BLOCK_SIZE)
        if not isinstance(block, int) or isinstance(block, bool) or block < 1:
            out.append(f"backend_options block_size={block!r}: a positive integer")
        else:
            need = kv_blocks(t.sequence_length, block, t.batch_size)
            blocks = t.backend_options.get("num_blocks", need)
            if not isinstance(blocks, int) or isinstance(blocks, bool) or blocks < need:
                out.append(
                    f"backend_options num_blocks={blocks!r}: --max-model-len {t.sequence_length} with block size "
                    f"{block} and {t.batch_size} sequences needs at least {need} KV blocks, vLLM's null block "
                    f"included ({RULE_NULL_BLOCK})"
                )
        return out

    def architecture_problems(self, model_type: str, family: str) -> list[str] | None:
        """A model type this release's plugin cannot load, named with the line that serves it on
        `family` (vLLM on NxD Inference, at its newest release for the family); one it loads that
        neuronforge does not plan yet, said as such. One no vLLM line serves: the registry's generic answer
        (None), which names the profiles that do."""
        from neuronforge.profiles import vllm_neuron
        from neuronforge.spec.modelconfig import ARCHITECTURES as HF_CLASSES

        r = self.release
        if model_type in r.architectures:
            if model_type in self.backend.architectures:
                return []
            return [
                f"{model_type}: vLLM Neuron {r.vllm_neuron.split('+')[0]} serves {r.architectures[model_type]}, but "
                "neuronforge does not plan this architecture's config yet"
            ]
        hf = HF_CLASSES.get(model_type, model_type)
        lines = [p for p in vllm_neuron.PROFILES if family in p.instance_families and model_type in p.architectures]
        if lines:
            best = max(lines, key=lambda p: tuple(int(x) for x in p.version.split(".")))
            fix = f"use profile {best.ref} (vLLM on NxD Inference serves {model_type} on {family})"
        else:
            return None
        return [
            f"{model_type} ({hf}): vLLM Neuron {r.vllm_neuron.split('+')[0]}'s model registry does not list it "
            f"({r.registry_source}), so its server cannot load the model; {fix}"
        ]

    def adopt(self, target: TargetSpec) -> tuple[TargetSpec, list[str]]:
        """What a target of another line (vLLM on NxD Inference, optimum-neuron) must give up to be
        built by the plugin: the fields `problems` refuses, each dropped with the reason; tp, batch,
        length, dtype, LNC and the KV-cache options it shares carry over as they are."""
        t = target.normalized()
        update: dict[str, Any] = {"profile": self.ref}
        changes = []
        if t.quantization.enabled:
            update["quantization"] = Quantization()
            changes.append(
                f"quantization {t.quantization.slug} -> none: this line publishes the checkpoint vLLM loads as it "
                "is (unquantized weights take more HBM: the planner's verdict counts them)"
            )
        if target.max_context_length is not None and target.max_context_length != t.sequence_length:
            update["max_context_length"] = None
            changes.append(
                f"max_context_length {target.max_context_length} -> unset: prompts compile up to "
                f"--max-num-batched-tokens = --max-model-len {t.sequence_length}"
            )
        if t.context_encoding_buckets or t.token_generation_buckets:
            update["context_encoding_buckets"] = None
            update["token_generation_buckets"] = None
            changes.append(
                "context_encoding_buckets / token_generation_buckets -> unset: the plugin derives its buckets "
                "from --max-num-batched-tokens and --max-num-seqs"
            )
        dropped = sorted(set(t.backend_options) - PROFILE_OPTIONS)
        if dropped:
            update["backend_options"] = {k: v for k, v in t.backend_options.items() if k in PROFILE_OPTIONS}
            changes.append(f"backend_options {dropped} dropped: NxD Inference settings the plugin does not take")
        return target.model_copy(update=update), changes

    def compile_target(self, target: TargetSpec) -> str | None:
        return target.instance.family  # trn2 | trn3: the plugin's NEURON_PLATFORM_TARGET_OVERRIDE values

    # -- the command ---------------------------------------------------------------------------
    def serve_command(self, target: TargetSpec) -> ServeCommand:
        t = target.normalized()
        block = int(t.backend_options.get("block_size", DEFAULT_BLOCK_SIZE))
        blocks = int(t.backend_options.get("num_blocks", kv_blocks(t.sequence_length, block, t.batch_size)))
        argv = [
            "--tensor-parallel-size", str(t.tp_degree),
            "--max-model-len", str(t.sequence_length),
            "--max-num-seqs", str(t.batch_size),
            "--max-num-batched-tokens", str(t.sequence_length),
            "--block-size", str(block),
            "--num-gpu-blocks-override", str(blocks),
            "--dtype", TORCH_DTYPE_NAMES[t.dtype],
            "--enable-prefix-caching" if t.backend_options.get("prefix_caching") else "--no-enable-prefix-caching",
        ]  # fmt: skip
        env = {
            "NEURON_PLATFORM_TARGET_OVERRIDE": str(self.compile_target(t)),
            "NEURON_LOGICAL_NC_CONFIG": str(t.lnc),
        }
        return ServeCommand(tuple(argv), env)

    def compile_settings(
        self,
        target: TargetSpec,
        model_type: str,
        quantized_dir: Path | None = None,
        model_config: Mapping[str, Any] | None = None,
    ) -> dict[str, Any]:
        command = self.serve_command(target)
        r = self.release
        return {
            "argv": list(command.argv),
            "env": dict(command.env),
            "cache_env": r.cache_env,
            "route": r.route,
            "image": r.image,
            "profile": self.ref,
            "profile_version": self.version,
        }

    # -- publishing -----------------------------------------------------------------------------
    def assemble_model(self, job: AssembleJob, dest: Path) -> None:
        """The checkpoint vLLM loads (the build holds it beside the cache manifest, which goes to launch/)."""
        copy_tree(job.build_dir, dest)
        (dest / CACHE_MANIFEST).unlink(missing_ok=True)

    def launch_spec(self, ctx: LaunchContext) -> dict[str, str]:
        assert ctx.build_dir is not None, "the launch files name what was compiled"
        from neuronforge.compilation.vllm_cache import CacheManifest
        from neuronforge.records.local import read_local

        manifest = read_local(CacheManifest, ctx.build_dir / CACHE_MANIFEST)
        r = self.release
        t = ctx.target.normalized()
        env = {
            "ARTIFACT_URI": ctx.artifact_uri.rstrip("/"),  # its manifest lists every file of the model
            "MODEL_URI": ctx.model_uri(self.folder),
            "MODEL_DIR": ctx.host_dir(self.folder),
            "CACHE_MANIFEST": CACHE_MANIFEST,
            "CACHE_URI": manifest.store_prefix,
            "VLLM_CACHE_ROOT": HOST_CACHE_ROOT,
            # LNL's own root, the same folder: one an image or a pod sets cannot send the server elsewhere.
            **({r.cache_root_env: HOST_CACHE_ROOT} if r.cache_root_env else {}),
            **manifest.env,
            # Fail closed: a missing graph fails the start instead of compiling (names per release).
            **dict.fromkeys(r.fail_closed(), "1"),
            "PORT": "8000",
            "VLLM_VERSION": r.vllm,
            "VLLM_NEURON_VERSION": r.vllm_neuron,
            "NEURONXCC_VERSION": r.compiler,
            "NEURON_SDK_RELEASE": r.sdk,
        }
        env_text = (
            f"# {ctx.model_type or 'model'} compiled by neuronforge for {t.slug} ({self.ref}) on a CPU worker in the\n"
            f"# plugin's CPU-compile mode. Serve in {r.image} (or any image with exactly the versions below) on a\n"
            f"# {t.instance.family} host with >= {t.tp_degree} NeuronCores at logical NC config {t.lnc}.\n"
            "# sync.sh puts every compiled graph into $VLLM_CACHE_ROOT (local disk, never NFS); serve.sh then\n"
            "# starts vLLM with compiling forbidden: a missing graph fails the start instead of compiling.\n"
            "# Plain KEY=VALUE lines: `docker run --env-file` and `set -a; . file` read them.\n"
        ) + "".join(f"{k}={v}\n" for k, v in env.items())
        files = {
            ENV_FILE: env_text,
            CACHE_MANIFEST: manifest.to_bytes().decode(),
            SYNC_FILE: SYNC_SH,
            SERVE_FILE: self._serve_sh(manifest.argv),
        }
        return {**files, K8S_FILE: self._k8s(ctx, files, int(env["PORT"]))}

    def _serve_sh(self, argv: list[str]) -> str:
        """`launch_templates/vllm-native-serve.sh`: sync, then `vllm serve` with the compiled command
        (`argv`, a flag and its values per line)."""
        groups: list[list[str]] = []
        for word in argv:
            if word.startswith("--") or not groups:
                groups.append([word])
            else:
                groups[-1].append(word)
        return launch_script.render("vllm-native-serve.sh", REF=self.ref, FLAGS=groups)

    def _k8s(self, ctx: LaunchContext, files: Mapping[str, str], port: int) -> str:
        """The Kubernetes manifest that serves this artifact as written: the launch files in ConfigMaps,
        a Deployment whose init container syncs and whose container serves (`vllm_native_k8s`)."""
        from neuronforge.artifacts import k8s_manifest
        from neuronforge.profiles import vllm_native_k8s as k8s

        t = ctx.target.normalized()
        key = ctx.artifact_uri.rstrip("/").rsplit("/", 1)[-1]
        family = t.instance.family
        return k8s.render(
            name=f"neuronforge-{key}".lower(),
            ref=self.ref,
            sdk=self.release.sdk,
            image=self.release.image,
            files=files,
            model_dir=ctx.host_dir(self.folder),
            cache_root=HOST_CACHE_ROOT,
            port=port,
            family=family,
            devices=k8s_manifest.neuron_devices(family, t.tp_degree, t.lnc),
            instance_types=k8s_manifest.fitting_instances(t.instance.name, t.tp_degree, t.lnc),
        )

    def smoke_load(self, payload: Path) -> SmokeLoad:
        """The model folder and, from the payload's own launch files, the command, the environment
        and the cache manifest the server starts with."""
        launch = payload / LAUNCH_DIR
        env = read_env_file(launch / ENV_FILE)
        argv = serve_argv_of((launch / SERVE_FILE).read_text(encoding="utf-8"), env) or []
        if argv and not argv[0].startswith("--"):
            argv = argv[1:]  # the model folder: the smoke test loads the payload's own
        if "--port" in argv:  # the HTTP front end's, not the engine's
            at = argv.index("--port")
            argv = argv[:at] + argv[at + 2 :]
        served = {
            k: env[k]
            for k in env
            if (shapes_graphs(k) or k.startswith(("VLLM_NEURON_", self.release.cache_env)))
            and k != self.release.cache_root_env  # a folder of the serving host: the loader sets its own
        }
        from neuronforge.artifacts import layout

        settings = {
            "argv": argv,
            "env": served,
            "manifest": str(launch / CACHE_MANIFEST),
            "prefix": layout.vllm_cache_prefix(self.version),
            "cache_env": self.release.cache_env,
        }
        return SmokeLoad(self.folder, settings)

    # -- checks ---------------------------------------------------------------------------------
    def preflight(self, artifact: Artifact) -> list[str]:
        """P0, without the SDK: the model folder vLLM reads, the manifest against the pins and the
        target, and the launch files parsed back against the compiled command on every field that
        changes a graph's key."""
        from neuronforge.compilation.vllm_cache import CacheManifest
        from neuronforge.records.base import RecordError
        from neuronforge.records.local import read_local

        root = artifact.root
        folder = root / self.folder
        out = tokenizer_problems(folder, self.folder, "vLLM loads the tokenizer from the served folder")
        if not (folder / "config.json").is_file():
            out.append(f"{self.folder}/config.json: missing (vLLM's ModelConfig)")
        else:
            out += self._config_problems(folder / "config.json")
        if not any(folder.glob("*.safetensors")):
            out.append(f"{self.folder}/: no *.safetensors (the plugin loads the weights at start; the NEFFs hold none)")
        launch = root / LAUNCH_DIR
        missing = [
            f"{LAUNCH_DIR}/{n}: missing"
            for n in (ENV_FILE, SERVE_FILE, SYNC_FILE, CACHE_MANIFEST)
            if not (launch / n).is_file()
        ]
        if missing:
            return out + missing
        try:
            manifest = read_local(CacheManifest, launch / CACHE_MANIFEST)
        except (OSError, RecordError) as exc:
            return [*out, f"{LAUNCH_DIR}/vllm-cache.json: unreadable ({exc})"]
        out += self._manifest_problems(manifest, artifact.target)
        out += self._launch_problems(launch, manifest)
        return out

    def _config_problems(self, path: Path) -> list[str]:
        """config.json's architecture must be one the release's plugin registry loads."""
        import json

        try:
            archs = json.loads(path.read_text(encoding="utf-8")).get("architectures") or []
        except (OSError, ValueError, AttributeError) as exc:
            return [f"{self.folder}/config.json: unreadable ({exc})"]
        served = set(self.release.architectures.values())
        if not archs or archs[0] not in served:
            plugin = self.release.vllm_neuron.split("+")[0]
            return [
                f"{self.folder}/config.json: architectures {archs}: vLLM Neuron {plugin} loads only "
                f"{sorted(served)} ({self.release.registry_source})"
            ]
        return []

    def _manifest_problems(self, manifest: Any, target: TargetSpec) -> list[str]:
        where = f"{LAUNCH_DIR}/vllm-cache.json"
        out = []
        if manifest.profile != self.ref:
            out.append(f"{where}: built for {manifest.profile}, not {self.ref}")
        pinned = {**self.pins.packages, "neuronx-cc": self.release.compiler}
        for package, want in sorted(pinned.items()):
            got = manifest.versions.get(package)
            if not version_matches(want, got):
                out.append(
                    f"{where}: {package} {got or 'not recorded'}, the profile pins {want} (the key hashes the "
                    f"compiler and NKI versions; {RULE_KEY})"
                )
        command = self.serve_command(target)
        if list(manifest.argv) != list(command.argv):
            out.append(
                f"{where}: compiled with `vllm serve {' '.join(manifest.argv)}`, the target renders "
                f"`{' '.join(command.argv)}`"
            )
        for name, value in command.env.items():
            if manifest.env.get(name) != value:
                out.append(f"{where}: compiled with {name}={manifest.env.get(name)!r}, the target needs {value!r}")
        if not manifest.entries:
            out.append(f"{where}: lists no cache entry: the server would compile every graph")
        return out

    def _launch_problems(self, launch: Path, manifest: Any) -> list[str]:
        env = read_env_file(launch / ENV_FILE)
        out = []
        for name, value in manifest.env.items():
            if env.get(name) != value:
                out.append(
                    f"{LAUNCH_DIR}/{ENV_FILE}: {name}={env.get(name)!r}, the graphs were compiled with {value!r}: "
                    "every "
                    f"key would miss ({RULE_KEY})"
                )
        for name in sorted(k for k in env if shapes_graphs(k) and k not in manifest.env):
            out.append(
                f"{LAUNCH_DIR}/{ENV_FILE}: {name}={env[name]!r} changes the compiled graphs, and the graphs were "
                f"compiled without it (the manifest's env records no {name}): every key would miss; remove it "
                "(neuronforge.compilation.graph_env)"
            )
        r = self.release
        for name, why in r.fail_closed().items():
            if env.get(name) != "1":
                out.append(
                    f"{LAUNCH_DIR}/{ENV_FILE}: {name} is not 1: a missing graph would be compiled at start-up ({why})"
                )
        if env.get(f"{r.cache_env}DISABLE_COMPILE_CACHE") == "1":
            out.append(
                f"{LAUNCH_DIR}/{ENV_FILE}: {r.cache_env}DISABLE_COMPILE_CACHE=1 with the fail-closed switches: the "
                'plugin raises ValueError at start (in-plugin backend.py compile(); envs.py: "Incompatible with '
                f'VLLM_NEURON_DISABLE_COMPILE_CACHE"); remove it'
            )
        if r.cache_root_env:
            out += self._cache_root_problems(launch, env, r.cache_root_env)
        for name in env:
            if (
                name.startswith("VLLM_NEURON_")
                and name.removeprefix("VLLM_NEURON_") in CACHE_SWITCHES
                and self.release.cache_env != "VLLM_NEURON_"
            ):
                out.append(
                    f"{LAUNCH_DIR}/{ENV_FILE}: {name} is not read by vLLM Neuron {self.release.vllm_neuron} (its cache "
                    f"switches are {self.release.cache_env}*; {sources.CACHE_PAGE})"
                )
        if env.get("CACHE_URI") != manifest.store_prefix:
            out.append(
                f"{LAUNCH_DIR}/{ENV_FILE}: CACHE_URI={env.get('CACHE_URI')!r} is not the manifest's "
                f"{manifest.store_prefix}"
            )
        argv = serve_argv_of((launch / SERVE_FILE).read_text(encoding="utf-8"), env)
        if argv is None:
            return [*out, f"{LAUNCH_DIR}/{SERVE_FILE}: no `vllm serve` command"]
        if not argv or argv[0] != env.get("MODEL_DIR"):
            out.append(f"{LAUNCH_DIR}/{SERVE_FILE}: vllm serve {argv[:1]} is not MODEL_DIR={env.get('MODEL_DIR')!r}")
        served = parse_argv(argv[1:])
        served.pop("port", None)
        compiled = parse_argv(list(manifest.argv))
        for flag in sorted(set(served) | set(compiled)):
            if served.get(flag) != compiled.get(flag):
                out.append(
                    f"{LAUNCH_DIR}/{SERVE_FILE}: --{flag} {served.get(flag, '<absent>')!s}, the graphs were compiled "
                    f"with {compiled.get(flag, '<absent>')!s}: the server's shapes would differ and every key miss "
                    f"({RULE_KEY}; {RULE_KV})"
                )
        if f'bash "$here/{SYNC_FILE}"' not in (launch / SERVE_FILE).read_text(encoding="utf-8"):
            out.append(f"{LAUNCH_DIR}/{SERVE_FILE}: does not sync the cache before serving ({RULE_FAIL_CLOSED})")
        return out

    def _cache_root_problems(self, launch: Path, env: Mapping[str, str], name: str) -> list[str]:
        """libtorch-neuronx-lite's root must be the synced one: LNL reads `<name>/neuron/compile_cache`
        (foxl-ai/kiln@a04d1fab kiln/compile_cache.py, SDK 2.32), the plugin `$VLLM_CACHE_ROOT/neuron/
        compile_cache` (envs.py); which wins under the plugin is UNVERIFIED, so both name one folder."""
        out = []
        if env.get(name) != env.get("VLLM_CACHE_ROOT"):
            out.append(
                f"{LAUNCH_DIR}/{ENV_FILE}: {name}={env.get(name)!r} is not VLLM_CACHE_ROOT="
                f"{env.get('VLLM_CACHE_ROOT')!r}: libtorch-neuronx-lite could look for the graphs outside the synced "
                "folder"
            )
        for script in (SERVE_FILE, SYNC_FILE):
            if SAME_ROOT.strip() not in (launch / script).read_text(encoding="utf-8"):
                out.append(
                    f"{LAUNCH_DIR}/{script}: does not set {name} to the host's VLLM_CACHE_ROOT: a root the image or "
                    "the pod sets would be read instead of the synced folder"
                )
        return out

    def retrace_required(self) -> str | None:
        """Why `verify` calls an artifact of this release deployable only after the P1 re-trace in the
        serving image (its cache layout is unverified), or None."""
        r = self.release
        if r.layout_verified is not None:
            return None
        return f"{r.layout_unverified}: only the re-trace in {r.image} proves the synced entries are the ones it reads"

    def retrace(self, artifact: Artifact, work_dir: Path, python: ToolchainPython | None = None) -> Retrace:
        """P1: the launch files' command traced again in an SDK image's interpreter (this release's by
        default: a CPU worker of queue `neuron-compile-<sdk>`; a newer release's for a `re-verify`) in
        CPU-compile mode against the synced cache, compiling forbidden (`VllmNativeBackend.retrace`)."""
        from neuronforge.common import settings

        load = self.smoke_load(artifact.root)
        return self.backend.retrace(
            artifact.root / self.folder,
            dict(load.settings),
            python or self.python(),
            work_dir,
            settings.current().compile_timeout_s,
        )

    def store_problems(self, artifact: Artifact, store: ArtifactStore) -> list[str]:
        """Every entry the manifest lists, complete at its recorded sizes in the cache the artifact
        was published with (the manifest's `store_prefix`, wherever `verify` was pointed: the store's
        root or the artifact's own folder; a file:// store mounted elsewhere since: `relocated`)."""
        from neuronforge.artifacts import layout
        from neuronforge.common.errors import StoreError
        from neuronforge.compilation.vllm_cache import CacheManifest
        from neuronforge.compilation.vllm_cache import store_problems as missing
        from neuronforge.records.base import RecordError
        from neuronforge.records.local import read_local
        from neuronforge.stores import open_location

        try:
            manifest = read_local(CacheManifest, artifact.root / LAUNCH_DIR / CACHE_MANIFEST)
        except (OSError, RecordError) as exc:
            return [
                f"{LAUNCH_DIR}/vllm-cache.json: unreadable ({exc}): which cache entries the server needs is unknown"
            ]
        try:
            where = relocated(manifest.store_prefix, store, layout.vllm_cache_prefix(self.version))
            return missing(open_location(where, probe=True), "", manifest)
        except (StoreError, InvalidInput) as exc:
            return [f"the vLLM Neuron cache {manifest.store_prefix} cannot be read: {exc}"]


# The cache switches whose prefix moved from VLLM_NEURON_ to NEURON_LIBTORCH_ with vllm-neuron 0.24.
CACHE_SWITCHES = frozenset(
    {
        "REMOTE_CACHE",
        "DISABLE_COMPILE_CACHE",
        "COMPILATION_TIMEOUT",
        "PARALLEL_COMPILE_WORKERS",
        "DISABLE_GRAPH_CAPTURE_BACKEND",
        "ASSERT_CACHE_HIT",
    }
)


# vLLM v1 takes block 0 of the pool as its null block — CODE: vllm-project/vllm vllm/v1/core/block_pool.py
# BlockPool.__init__ `self.null_block = self.free_block_queue.popleft()` (read at @c59cb794 and @002f3491;
# which tag the 0.24/0.29 pins are was not resolvable), and the pool gets exactly the override
# (vllm/v1/core/kv_cache_utils.py may_override_num_blocks @001cabc1); DOCS: aws-neuron-sdk@81ce03ae
# vllm-neuron/docs/design/vllm/padding-batching-block-kv.md:130-135 ("Upstream vLLM reserves block 0 as the
# null block"). So `--num-gpu-blocks-override N` leaves N - 1 blocks for sequences. The NxD Inference
# route's platform adds that block itself (vllm-project/vllm-neuron 0.2.0 (a9671254) vllm_neuron/platform.py
# :149-159 `_neuron_null_block_adjusted`); the native plugin does not (no such code in any native tree of
# the code index; its docs call the override a plain vLLM parameter, reference-configuration.md:64).
NULL_BLOCKS = 1
RULE_NULL_BLOCK = "vLLM v1 vllm/v1/core/block_pool.py: block 0 is the null block, never given to a sequence"


def kv_blocks(max_model_len: int, block_size: int, max_num_seqs: int) -> int:
    """The KV blocks `max_num_seqs` sequences at full length need, plus vLLM's null block: the pinned
    `--num-gpu-blocks-override` (one fewer and the last full-length sequence is preempted)."""
    return ceil(max_model_len / block_size) * max_num_seqs + NULL_BLOCKS


# The line a vllm-neuron-native launch script exports after reading vllm.env (preflight looks for it):
# libtorch-neuronx-lite's root follows VLLM_CACHE_ROOT whatever the image or the pod set it to.
SAME_ROOT = 'export NEURON_LIBTORCH_CACHE_ROOT="$VLLM_CACHE_ROOT"\n'

# `launch/sync.sh`: store -> $MODEL_DIR (the model, each file as the artifact's manifest lists it) and
# $VLLM_CACHE_ROOT/neuron/compile_cache (each entry as vllm-cache.json lists it, staged in a folder of its
# own and renamed in whole: the plugin never sees half an entry), every file verified (size, sha256) as it
# streams: a server never starts on bytes other than the compiled ones. One read of the manifest, then the
# plan: what is not here verified (`.neuronforge-sync.json`, `launch_fetch`) is fetched, so a second start
# reads the manifest and no file. It names any tool it lacks before fetching anything (a Kubernetes init
# container runs it in the serving image: `vllm_native_k8s`). How it reads the store is
# `transfer_sh.FUNCTIONS`, the text a channel's resolve.sh carries (`launch_templates/vllm-native-sync.sh`).
SYNC_SH = launch_script.render("vllm-native-sync.sh", MANIFEST=layout.ARTIFACT_MANIFEST)


PROFILES = tuple(VllmNativeProfile(r) for r in RELEASES)
