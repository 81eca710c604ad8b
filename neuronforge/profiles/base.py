"""`ServingProfile`: everything that follows from the stack that will serve the model.

A user picks the serving stack; its profile fixes the rest:
- `pins`: the Neuron SDK release and the exact toolchain the consumer checks (the compiler version
  WITH its local label, library versions). The worker's detected toolchain must equal them.
- `backend`: which compiler front end builds for it, and `compile_settings`: what that backend must
  be told so the consumer can load the result without recompiling.
- `folder` + `assemble_model`: the published layout, under a folder named for what it holds.
- `launch_spec`: the files that start the consumer on the artifact (env file, command line,
  `serving.properties`), rendered from the target — every value the consumer checks.
- `preflight`: the consumer's load-time rules, checked offline on the assembled artifact before it
  is published, and by `neuronforge verify`.
- `toolchain_python`: the interpreter of the SDK image that holds the toolchain (it is not the
  Airflow worker's: `neuronforge.compilation.backends.interpreter`).
- `device_stages` and `placement`: which stages need NeuronCores. Loading always does; compiling
  does only where the toolchain cannot compile without devices. So a Neuron profile's toolchain
  stages (`prepare`, `compile_graphs`) go to queue `neuron-compile-<sdk release>` — CPU workers
  built from the SDK image, no devices — and its smoke test to `neuron-<sdk release>`, Neuron hosts
  taking `tp` slots of pool `neuron_cores`: the expensive host runs only what needs a device.

Profiles are registered in one place (`neuronforge.profiles.registry`); the form, the CLI, the
planner, the DAGs and the catalog read the registry. A new SDK release is a new profile version.
"""

from __future__ import annotations

import json
import re
import shutil
from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from neuronforge.compilation.backends.base import Backend
from neuronforge.profiles.lifecycle import Lifecycle

if TYPE_CHECKING:
    from neuronforge.compilation.backends.interpreter import ToolchainPython
    from neuronforge.compilation.retrace import Retrace
    from neuronforge.profiles.optimum_registry import OptimumRegistry
    from neuronforge.records.artifact_manifest import ArtifactManifest
    from neuronforge.spec.modelconfig import ModelArch
    from neuronforge.spec.target import TargetSpec
    from neuronforge.spec.toolchain import Toolchain
    from neuronforge.stores import ArtifactStore

LAUNCH_DIR = "launch"  # the launch spec's files, next to the model folder
# Where a stage runs, as a profile places it (`ServingProfile.placement`): stages that need the
# toolchain (detect it: `toolchain`; compile: `compile`), the smoke load (`smoke`); other stages
# (fetch, plan, quantize, publish) run on any worker.
STAGE_KINDS = ("toolchain", "compile", "smoke")


@dataclass(frozen=True)
class Placement:
    """Where a stage of a profile's build runs: the Celery queue (None: the default queue) and
    whether it takes NeuronCores (`tp` slots of pool `neuron_cores`) on a Neuron host."""

    queue: str | None
    neuron_cores: bool = False

    @property
    def host(self) -> str:
        """What the host costs: a Neuron host (it holds NeuronCores) or a CPU host."""
        return "neuron" if self.neuron_cores else "cpu"


@dataclass(frozen=True)
class SmokeLoad:
    """How the consumer loads a published payload, read from its own files: the model folder its
    launch files point it at, what they tell it (`GenerateJob.settings`), and the compile-cache
    entries they make it read (None: it reads none, so its cache must stay empty)."""

    model_dir: str  # relative to the payload's root
    settings: Mapping[str, Any] = field(default_factory=dict)
    cache_entries: tuple[str, ...] | None = None


@dataclass(frozen=True)
class Pins:
    """The exact toolchain a profile's consumer loads artifacts from."""

    sdk_release: str  # Neuron SDK release ("2.26.1"); "none" for the CPU
    compiler_version: str | None = None  # full, with the local label; None: whatever is installed
    packages: Mapping[str, str] = field(default_factory=dict)  # pip package -> exact version

    def to_json(self) -> dict[str, Any]:
        return {
            "sdk_release": self.sdk_release,
            "compiler_version": self.compiler_version,
            "packages": dict(sorted(self.packages.items())),
        }


@dataclass(frozen=True)
class LaunchContext:
    """What a launch spec is rendered from."""

    target: TargetSpec  # normalized
    toolchain: Toolchain
    artifact_uri: str  # the store URI of the artifact's root folder
    cache_uri: str  # the store URI of the persistent compile cache's ROOT (the compiler adds neuronxcc-<ver>/)
    model_type: str
    model_config: Mapping[str, Any] | None = None  # the model's config.json, when the launch depends on it
    build_dir: Path | None = None  # the compile's output, when the launch names what it compiled

    def model_uri(self, folder: str) -> str:
        return f"{self.artifact_uri.rstrip('/')}/{folder}"

    def host_dir(self, folder: str) -> str:
        """Where the launch files put the model folder on the serving host (one per artifact)."""
        key = self.artifact_uri.rstrip("/").rsplit("/", 1)[-1]
        return f"/opt/neuronforge/models/{key}/{folder}"


@dataclass
class AssembleJob:
    build_dir: Path  # the compile's output (materialized)
    checkpoint_dir: Path | None  # the verified checkpoint, for profiles that set `needs_checkpoint`
    out: Path  # the artifact root being staged
    launch: LaunchContext


@dataclass(frozen=True)
class Artifact:
    """A local copy of an artifact's root, with what it was built for (the manifest's view)."""

    root: Path
    target: TargetSpec
    toolchain: Toolchain

    @classmethod
    def from_manifest(cls, root: Path, manifest: ArtifactManifest) -> Artifact:
        from neuronforge.spec.toolchain import Toolchain

        toolchain = Toolchain.from_json(manifest.toolchain.model_dump())
        return cls(root, manifest.target_spec(), toolchain)


class ServingProfile(ABC):
    """One serving stack at one SDK release. Subclasses set the class attributes and the methods."""

    name: ClassVar[str]  # what users type: `cpu`, `optimum-neuron`, `vllm-neuron`
    title: ClassVar[str]  # one line: the consumer and how it loads the artifact
    pins: ClassVar[Pins]
    backend: ClassVar[Backend]
    instance_families: ClassVar[frozenset[str]] = frozenset()  # empty: no Neuron instance needed
    consumer_architectures: ClassVar[frozenset[str] | None] = None  # None: whatever the backend builds
    folder: ClassVar[str]  # the model's folder in the artifact, named for what it holds
    needs_checkpoint: ClassVar[bool] = False  # publishes checkpoint files beside the build (e.g. a split model)
    publishes: ClassVar[str]  # one line: what the artifact holds
    # The interpreter of the SDK image that has the toolchain (docker/neuron-sdk/images.json records
    # each base image's layout); a worker may name another (NEURONFORGE_TOOLCHAIN_PYTHON[_<release>]).
    toolchain_python: ClassVar[str | None] = None
    # The image a host or a pod serves this profile's builds in (its launch files run there); None: no
    # published image holds the consumer (its env file says what to install). The manifest records it
    # (`describe`), so a release channel's Kubernetes manifest names it and its resolve.sh can refuse a
    # build that serves in another image (`artifacts.channel_launch`).
    serving_image: ClassVar[str | None] = None
    # The stages that need NeuronCores: the smoke load always; `compile` only where the toolchain
    # cannot compile without a device (the profile says why, with the source).
    device_stages: ClassVar[frozenset[str]] = frozenset({"smoke"})
    # With "compile" in device_stages: why the toolchain cannot compile without a device (source cited).
    device_compile_reason: ClassVar[str | None] = None
    # The line's status per instance family by SDK release, with sources (one per line: every version
    # of a profile name declares the same object).
    lifecycle: ClassVar[Lifecycle | None] = None
    # The Hub cache registry its consumer looks builds up in (optimum-neuron's `cache lookup` / `serve`):
    # a run's --hub-registry registers its builds there; None: its consumer has no such lookup.
    hub_registry: ClassVar[OptimumRegistry | None] = None

    # -- identity ------------------------------------------------------------------------------
    @property
    def version(self) -> str:
        return self.pins.sdk_release

    @property
    def ref(self) -> str:
        """`name@version`: what targets are normalized to and the cache key holds."""
        return f"{self.name}@{self.version}"

    @property
    def neuron(self) -> bool:
        return self.backend.uses_neuron

    @property
    def device_queue(self) -> str | None:
        """The queue of the stages that need NeuronCores: Neuron hosts of this SDK release's image."""
        return neuron_host_queue(self.version) if self.neuron else None

    @property
    def queue(self) -> str | None:
        """The queue where its toolchain is (toolchain detection, compiling): CPU workers of the SDK
        release's image (`neuron-compile-<release>`), or its Neuron hosts when compiling needs a
        device; None: the default queue."""
        if not self.neuron:
            return None
        return self.device_queue if "compile" in self.device_stages else f"neuron-compile-{self.version}"

    def placement(self, kind: str | None) -> Placement:
        """Where a stage of kind `kind` (`STAGE_KINDS`; None: any worker) runs for this profile."""
        if kind is None or not self.neuron:
            return Placement(None)
        if kind not in STAGE_KINDS:
            raise ValueError(f"unknown stage kind {kind!r}; known: {STAGE_KINDS}")
        if kind in self.device_stages:
            return Placement(self.device_queue, neuron_cores=True)
        return Placement(self.queue)

    def python(self) -> ToolchainPython | None:
        """The interpreter its toolchain runs in on this worker (None: this process, the cpu backend)."""
        if not self.neuron:
            return None
        from neuronforge.compilation.backends.interpreter import ToolchainPython

        return ToolchainPython.resolve(self.version, self.toolchain_python or "python3")

    def detect_toolchain(self, compiler_flags: str | tuple[str, ...] = ()) -> Toolchain:
        """The toolchain this worker has for this profile (asked of the SDK's own interpreter)."""
        return self.backend.detect_toolchain(compiler_flags, self.python())

    def compile_target(self, target: TargetSpec) -> str | None:
        """The compiler target the build is compiled for, named explicitly to the toolchain (and in
        the cache key): inf2 and trn1n compile for trn1. None for the CPU."""
        return target.instance.compile_target if self.neuron else None

    @property
    def architectures(self) -> frozenset[str]:
        backend = self.backend.architectures
        return backend if self.consumer_architectures is None else backend & self.consumer_architectures

    def key_material(self) -> dict[str, Any]:
        return {"name": self.name, "version": self.version, "pins": self.pins.to_json()}

    def describe(self) -> dict[str, Any]:
        """One row of `neuronforge profiles` (and of the catalog's report)."""
        return {
            "name": self.name,
            "version": self.version,
            "ref": self.ref,
            "title": self.title,
            "sdk_release": self.pins.sdk_release,
            "compiler_version": self.pins.compiler_version,
            "packages": dict(self.pins.packages),
            "backend": self.backend.name,
            "instance_families": sorted(self.instance_families),
            "architectures": sorted(self.architectures),
            "folder": self.folder,
            "publishes": self.publishes,
            "queue": self.queue,
            "device_queue": self.device_queue,
            "device_stages": sorted(self.device_stages) if self.neuron else [],
            "device_compile_reason": self.device_compile_reason,
            "toolchain_python": self.toolchain_python,
            # only when there is one: a manifest of a profile without one reads as before, byte for byte
            **({"serving_image": self.serving_image} if self.serving_image else {}),
            # the versions its consumer finds a registry entry with (only for a profile with a Hub registry)
            **({"hub_registry": self.hub_registry.describe()} if self.hub_registry else {}),
        }

    # -- planning ------------------------------------------------------------------------------
    def problems(self, target: TargetSpec, model_type: str | None = None) -> list[str]:
        """Why this profile cannot build `target` (for `model_type`, when known), each with the fix.
        Subclasses add their consumer's limits to these. Whether it serves `model_type` at all, and
        which profiles do instead, is the registry's answer (`registry.target_problems`)."""
        out = []
        family = target.instance.family
        if self.instance_families and family not in self.instance_families:
            out.append(
                f"profile {self.ref} serves {', '.join(sorted(self.instance_families))} instances, "
                f"not {target.instance_type}"
            )
        return out

    def architecture_problems(self, model_type: str, family: str) -> list[str] | None:
        """This profile's own reason why it cannot serve `model_type` on `family` (with the fix), when
        it knows better than the registry's generic answer (its consumer's own model registry, say);
        None leaves the answer to `registry.target_problems`. [] means: it serves it."""
        return None

    def adopt(self, target: TargetSpec) -> tuple[TargetSpec, list[str]]:
        """`target`, built until now by another line, as this profile would build it: the target
        with `profile` set to this version and each field this line does not take changed, with one
        sentence per change (what changes and why). An upgrade that migrates a target off a line
        that ends for its family proposes exactly this (`neuronforge.farm.upgrades`). Default: only
        the profile changes."""
        return target.model_copy(update={"profile": self.ref}), []

    def arch_problems(self, target: TargetSpec, arch: ModelArch) -> list[str]:
        """What the consumer cannot do with this model's shapes at this target (the planner asks
        once the config is known). Default: nothing beyond `problems`."""
        return []

    def toolchain_problems(self, toolchain: Toolchain) -> list[str]:
        """The detected toolchain must be the pinned one (`version_matches`): the consumer checks the
        versions at load."""
        out = []
        if toolchain.backend != self.backend.name:
            out.append(f"profile {self.ref} compiles with backend {self.backend.name}, not {toolchain.backend}")
        if self.pins.compiler_version and not version_matches(self.pins.compiler_version, toolchain.compiler_version):
            out.append(
                f"profile {self.ref} needs neuronx-cc {self.pins.compiler_version}; the worker has "
                f"{toolchain.compiler_version} (build its image with NEURON_SDK_VERSION={self.version}, "
                f"or route the target to queue {self.queue})"
            )
        for package, pinned in sorted(self.pins.packages.items()):
            found = toolchain.packages.get(package)
            if not version_matches(pinned, found):
                out.append(f"profile {self.ref} needs {package} {pinned}; the worker has {found or 'none'}")
        return out

    # -- compiling ------------------------------------------------------------------------------
    def compile_settings(
        self,
        target: TargetSpec,
        model_type: str,
        quantized_dir: Path | None = None,
        model_config: Mapping[str, Any] | None = None,
    ) -> dict[str, Any]:
        """What the backend must be told to build for this consumer (empty: its defaults)."""
        return {}

    # -- publishing -----------------------------------------------------------------------------
    def assemble(self, job: AssembleJob) -> dict[str, str]:
        """Stage the artifact: the model folder, then the launch spec. Returns output name -> path
        relative to the artifact root (the manifest's `formats`)."""
        self.assemble_model(job, job.out / self.folder)
        outputs = {self.folder: self.folder}
        files = self.launch_spec(job.launch)
        if files:
            (job.out / LAUNCH_DIR).mkdir(parents=True, exist_ok=True)
            for name, text in files.items():
                (job.out / LAUNCH_DIR / name).write_text(text, encoding="utf-8")
            outputs[LAUNCH_DIR] = LAUNCH_DIR
        return outputs

    def assemble_model(self, job: AssembleJob, dest: Path) -> None:
        """Default: the build as the backend wrote it."""
        copy_tree(job.build_dir, dest)

    @abstractmethod
    def launch_spec(self, ctx: LaunchContext) -> dict[str, str]:
        """File name (under `launch/`) -> content."""

    def smoke_load(self, payload: Path) -> SmokeLoad:
        """How the consumer loads `payload` (the assembled artifact): by default its model folder
        alone, reading no compile cache."""
        return SmokeLoad(self.folder)

    @abstractmethod
    def preflight(self, artifact: Artifact) -> list[str]:
        """The consumer's load-time rules checked offline; each problem names the rule's source."""

    def store_problems(self, artifact: Artifact, store: ArtifactStore) -> list[str]:
        """What the artifact needs from the store outside its own folder and does not find there
        (`neuronforge verify`). Default: nothing — the artifact is self-contained."""
        return []

    def retrace_required(self) -> str | None:
        """Why `verify` calls an artifact of this profile deployable only after `retrace_problems` ran
        (a consumer fact its preflight cannot check offline), or None: preflight and the store check
        are enough."""
        return None

    def retrace(self, artifact: Artifact, work_dir: Path, python: ToolchainPython | None = None) -> Retrace | None:
        """The consumer's own start-up path traced again in a toolchain's interpreter without a device,
        compiling forbidden, against the published cache (needs the SDK image): the keys it found and
        the ones it would have compiled. `python`: that interpreter (default: this profile version's;
        a `re-verify` names a newer release's). None: this profile has no such check."""
        return None

    def retrace_problems(self, artifact: Artifact, work_dir: Path) -> list[str] | None:
        """`neuronforge verify --retrace`: `retrace`'s result as problem lines (none: every key found);
        None when the profile has no re-trace (its preflight and store check are all there is)."""
        found = self.retrace(artifact, work_dir)
        return None if found is None else found.problems()


def neuron_host_queue(release: str) -> str:
    """The Celery queue of the Neuron hosts of SDK `release`'s image (`neuron-2.33.0`): its profiles'
    device stages, and the smoke that attests a published build at `release` — which needs a worker of
    the release's image, not a profile registered for it."""
    return f"neuron-{release}"


def version_matches(pinned: str, found: str | None) -> bool:
    """PEP 440 `==pinned`: exact, or any local label of a pin that has none. A pin spelled with its
    label (`2.21.33363.0+82129205`) matches only that build; one a release does not publish a label
    for (SDK 2.33.0's) matches whatever label the image's wheel reports."""
    if found is None:
        return False
    return found == pinned or ("+" not in pinned and found.split("+", 1)[0] == pinned)


def copy_tree(src: Path, dest: Path) -> None:
    """Copy a materialized folder, leaving out its store bookkeeping (MANIFEST.json, the marker)."""
    from neuronforge.artifacts import layout
    from neuronforge.artifacts.localcache import MARKER

    def ignore(folder: str, names: list[str]) -> set[str]:
        return {n for n in names if n in (layout.MANIFEST, MARKER)} if Path(folder) == src else set()

    shutil.copytree(src, dest, ignore=ignore)


# `$NAME` / `${NAME}` in a launch script, expanded from its env file.
SHELL_VAR = re.compile(r"\$\{(\w+)\}|\$(\w+)")


def relocated(recorded: str, store: ArtifactStore, key: str) -> str:
    """Where a folder a build recorded in its `file://` store at publish time is on this host. A
    file:// store may be mounted at another path than the one it was published at (`run-lmi.sh` and
    `sync.sh` resolve the serving side the same way): a recorded file:// URI that is not here is
    looked for as `key` below the nearest folder that has it, from the one `verify` was pointed at
    (the store's root, or the artifact's own folder inside it) upwards — a walk up the path, never a
    listing. Anything else is returned as recorded."""
    local = recorded.removeprefix("file://")
    if not recorded.startswith("file://") or Path(local).exists() or not store.root_uri.startswith("file://"):
        return recorded
    here = Path(store.root_uri.removeprefix("file://"))
    for folder in (here, *here.parents):
        if (folder / key).is_dir():
            return f"file://{folder / key}"
    return recorded


def read_env_file(path: Path) -> dict[str, str]:
    """A launch env file's KEY=VALUE lines (comments and blanks skipped), as `set -a; . file` and
    `docker run --env-file` read them."""
    env = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        line = line.strip()
        if line and not line.startswith("#") and "=" in line:
            key, _, value = line.partition("=")
            env[key.strip()] = value.strip()
    return env


def tokenizer_problems(folder: Path, name: str, rule: str) -> list[str]:
    """A served folder needs a tokenizer: vLLM loads it from the model folder (`rule` says whose)."""
    if any((folder / f).is_file() for f in ("tokenizer.json", "tokenizer.model")):
        return []
    return [f"{name}/: no tokenizer.json or tokenizer.model ({rule})"]


def read_json(path: Path) -> dict[str, Any] | None:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


@dataclass(frozen=True)
class RefusedStack:
    """A serving stack people ask for that neuronforge does not build for (yet): why, and what to use."""

    name: str
    reason: str
    nearest: str  # the supported profile closest to it

    def message(self) -> str:
        return f"profile {self.name!r} is not supported: {self.reason}; the nearest supported profile is {self.nearest}"
