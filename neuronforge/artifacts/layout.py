"""The one module that knows every path inside a store. Nothing else builds store paths by hand.

    checkpoints/<org>/<name>/<revision>/            verified checkpoint + MANIFEST.json
    quantized/<org>/<name>/<revision>/<quant>/       quantized checkpoint (NxD Inference format)
    neuron-cache/<compiler>-<version>/MODULE_<graph hash>+<flags hash>/   persistent compile cache
                                                     (full version: neuronxcc-2.21.33363.0+82129205)
    neuron-cache-sets/<compiler>-<version>/<graph set>.json   entries a graph set compiled into
    vllm-neuron-cache/<profile version>/<32-hex key>/   the vLLM Neuron plugin's compile cache
                                                     (SDK 2.32+: one folder per graph, marker last)
    artifacts/<org>/<name>/<revision>/<target-slug>/<key12>/   published artifacts + manifest.json
    builds/<key>/<manifest sha256[:16]>/             a compile's output, handed to smoke + publish
                                                     (deleted once the key is published)
    index/<key>.json                                 cache key -> artifact manifest pointer
    farm-index/head.json, pages/*.jsonl.gz, tail.json   what the store holds, summarised for readers
                                                     (`neuronforge.artifacts.farm_index`; a cache of the above)
    locks/<key>                                      compile leases
    failures/<key>.json                              the last failed build of a key (stage, error, run)
    damaged/<key>.json                               a published artifact found damaged (manifest gone, a
                                                     file missing or of another size; who noticed, when)
    scrub/state.json                                 where the integrity scrub stopped (its cursor)
    toolchains/<profile name>@<version>.json         the toolchain a Neuron profile's `prepare` last detected
                                                     (what the DAG's first task keys a cache hit with)
    reports/recompile-<date>.{md,json}               what a scheduled recompile found and rebuilt
    sweeps/<org>/<name>/<instance>/<profile>/<name>.json   a sweep's inference-cache-config file
                                                     (+ <name>.records.json: every candidate's outcome)
    sdk-releases/n2-manifest.json                    optional mirror of the Neuron SDK release manifest
    sdk-releases/entries/<version>.json              a release read from a manifest: proposed, accepted or
                                                     rejected (`neuronforge releases sync`)
    channels/<org>/<name>/<profile line>/<channel>/channel.json   a release channel: the pointer to one build
                                                     (+ launch/: files that resolve it at deploy time)
    reviews/<key>.json                               a build's review state (pending, approved, rejected)
    attestations/<key>.json                          a build proven at newer SDK releases without compiling

Paths are '/'-separated keys relative to the store root; `ArtifactStore.uri(key)` makes them URIs.
"""

from __future__ import annotations

import re

from neuronforge.common.errors import InvalidInput
from neuronforge.spec.source import ModelSource, safe_component
from neuronforge.spec.target import Quantization, TargetSpec

MANIFEST = "MANIFEST.json"  # checkpoint manifests (file list with sha256)
ARTIFACT_MANIFEST = "manifest.json"  # published artifact manifests, written last
NEURON_CACHE = "neuron-cache"
NEURON_CACHE_SETS = "neuron-cache-sets"
ENTRY_DONE = "model.done"  # a compile-cache entry the compiler completed (written last), wherever it is mirrored
VLLM_NEURON_CACHE = "vllm-neuron-cache"
FARM_INDEX = "farm-index"


def _model_prefix(kind: str, source: ModelSource) -> str:
    if not source.is_resolved:
        raise ValueError(f"{source} has no resolved revision; store paths need one")
    org, name = source.org_name
    return f"{kind}/{safe_component(org)}/{safe_component(name)}/{source.resolved_revision}"


def checkpoint_prefix(source: ModelSource) -> str:
    return _model_prefix("checkpoints", source)


def checkpoint_manifest(source: ModelSource) -> str:
    return f"{checkpoint_prefix(source)}/{MANIFEST}"


def quantized_prefix(source: ModelSource, quantization: Quantization, variant: str = "") -> str:
    """`variant` names what else changes the quantized files (the dtype kept tensors are cast to,
    the modules left unquantized), e.g. `bf16`."""
    return f"{_model_prefix('quantized', source)}/{quantization.slug}" + (f"-{variant}" if variant else "")


# What a compiler name or version may hold to be used verbatim as one path component (local folder
# and store key): PEP 440 versions with their local label (`2.21.33363.0+82129205`, `2.13.0+cpu`),
# plus `_`, `-` and `!` of unnormalised spellings. No separators, no whitespace, no leading dot.
_CACHE_COMPONENT = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+!-]*")


def compiler_dir(compiler: str, compiler_version: str) -> str:
    """`<compiler>-<FULL version>`, the folder the Neuron persistent cache keeps one compiler
    version's entries in, e.g. `neuronxcc-2.21.33363.0+82129205`.

    The version is kept verbatim, local label included: libneuronxla names the folder after
    `neuronxcc.__version__` (which carries `+<commit>`; optimum-neuron 0.4.5
    `optimum/neuron/cache/hub_cache.py::hub_registry_path`: "the actual path uses the extended
    compiler version (with commit hash)"), so any rewriting (`+` -> `-`) makes every lookup miss.
    Because the result is a path component, anything that could leave its folder or alias
    another one (separators, `.`/`..`, whitespace, control characters) is refused rather than
    cleaned: a cleaned name would silently be a different cache.
    """
    for what, value in (("compiler", compiler), ("compiler version", compiler_version)):
        if _CACHE_COMPONENT.fullmatch(value) and ".." not in value:
            continue
        if not value:
            why = "is empty"
        elif "/" in value or "\\" in value:
            why = "holds a path separator"
        elif ".." in value or value.startswith("."):
            why = "holds '..' or starts with '.'"
        else:
            why = "holds characters other than letters, digits and . _ + ! -"
        raise InvalidInput(
            f"{what} {value!r} {why}; it names a compile-cache folder (one path component, e.g. "
            "neuronxcc-2.21.33363.0+82129205), so it cannot be used"
        )
    return f"{compiler}-{compiler_version}"


def neuron_graph_set(compiler: str, compiler_version: str, graph_set: str) -> str:
    """The cache entries one graph set (model config × target × toolchain) compiled into; kept
    outside `neuron-cache/` so that prefix stays exactly the compiler's own layout."""
    return f"{NEURON_CACHE_SETS}/{compiler_dir(compiler, compiler_version)}/{graph_set}.json"


def neuron_cache_prefix(compiler: str, compiler_version: str) -> str:
    """Same directory naming as the Neuron persistent cache (`neuronxcc-<full version>`), so that
    `NEURON_COMPILE_CACHE_URL=<store>/neuron-cache` (the cache ROOT; the compiler appends the
    folder itself) is a cache the compiler reads directly."""
    return f"{NEURON_CACHE}/{compiler_dir(compiler, compiler_version)}"


def vllm_cache_prefix(profile_version: str) -> str:
    """The vLLM Neuron plugin's cache entries of one profile version (its SDK release): the plugin's
    key hashes the graph, shapes, target and compiler versions but not vLLM's or the plugin's own
    version, so entries are kept apart per release rather than trusted across them."""
    return f"{VLLM_NEURON_CACHE}/{safe_component(profile_version)}"


def artifact_prefix(source: ModelSource, target: TargetSpec, key: str) -> str:
    return f"{_model_prefix('artifacts', source)}/{target.slug}/{key[:12]}"


def build_prefix(key: str, manifest_sha256: str) -> str:
    """A compiled build staged for the smoke and publish stages (which may run on other hosts);
    named by the sha256 of its manifest, so an attempt never overwrites another's files."""
    return f"builds/{key}/{manifest_sha256[:16]}".rstrip("/")


def index_entry(key: str) -> str:
    return f"index/{key}.json"


def lock_entry(key: str) -> str:
    return f"locks/{key}"


def failure_entry(key: str) -> str:
    return f"failures/{key}.json"


DAMAGED = "damaged"
SCRUB_STATE = "scrub/state.json"


def damage_entry(key: str) -> str:
    """Why the published artifact of `key` is damaged (beside the index, never in the artifact's folder)."""
    return f"{DAMAGED}/{key}.json"


def toolchain_record(profile_name: str, profile_version: str) -> str:
    """The toolchain the workers of a profile version's toolchain queue last detected, e.g.
    `toolchains/vllm-neuron@2.26.1.json`."""
    return f"toolchains/{safe_component(profile_name)}@{safe_component(profile_version)}.json"


def recompile_report(stamp: str, suffix: str) -> str:
    """`stamp` is the run's UTC time as `YYYY-MM-DDTHH-MM-SSZ` (several runs a day keep their reports)."""
    return f"reports/recompile-{safe_component(stamp)}.{suffix}"


def sweep_files(source: ModelSource, instance: str, profile: str) -> tuple[str, str]:
    """(cache-config key, records key) of the sweep of an unpinned `source` on `instance` for
    `profile`: one place per model, instance and profile, so a new run resumes the last one."""
    org, name = source.org_name
    base = f"sweeps/{safe_component(org)}/{safe_component(name)}/{safe_component(instance)}/{safe_component(profile)}"
    return f"{base}/{safe_component(name)}.json", f"{base}/{safe_component(name)}.records.json"


SDK_RELEASE_MANIFEST = "sdk-releases/n2-manifest.json"
SDK_RELEASE_ENTRIES = "sdk-releases/entries/"


def sdk_release_entry(version: str) -> str:
    """A release the feed read from a manifest and its review (`records.proposed_release`)."""
    return f"{SDK_RELEASE_ENTRIES}{safe_component(version)}.json"


CHANNELS = "channels"
CHANNEL_RECORD = "channel.json"


def model_channels(source: ModelSource) -> str:
    """Every channel of a model, whatever its revision: `channels/<org>/<name>`."""
    org, name = source.org_name
    return f"{CHANNELS}/{safe_component(org)}/{safe_component(name)}"


def channel_prefix(source: ModelSource, profile_line: str, channel: str) -> str:
    """`channels/<org>/<name>/<profile line>/<channel>`: the record and its launch files."""
    return f"{model_channels(source)}/{safe_component(profile_line)}/{safe_component(channel)}"


def channel_record(source: ModelSource, profile_line: str, channel: str) -> str:
    return f"{channel_prefix(source, profile_line, channel)}/{CHANNEL_RECORD}"


def attestation_entry(key: str) -> str:
    """A build's attestations at newer SDK releases, beside its manifest (never inside it)."""
    return f"attestations/{key}.json"


def review_entry(key: str) -> str:
    """A build's review state, beside its manifest (never inside: the manifest is immutable)."""
    return f"reviews/{key}.json"


def split_artifact_uri(uri: str) -> tuple[str, str] | None:
    """(store root URI, artifact prefix) of an artifact's folder or manifest URI laid out as above
    (`<root>/artifacts/<org>/<name>/<revision>/<target>/<key12>[/manifest.json]`), else None: what a
    command given a URI needs to find the records kept beside the artifact (its review, its channels)."""
    root, sep, rest = uri.rstrip("/").rpartition("/artifacts/")
    parts = rest.split("/")
    if parts and parts[-1] == ARTIFACT_MANIFEST:
        parts = parts[:-1]
    if not sep or not root or len(parts) != 5 or any(p in ("", ".", "..") for p in parts):
        return None
    return root, "artifacts/" + "/".join(parts)
