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
- `queue`: Neuron compile and smoke tasks go to `neuron-<sdk release>` (one worker image per release).

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

from neuronforge.backends.base import Backend

if TYPE_CHECKING:
    from neuronforge.modelconfig import ModelArch
    from neuronforge.request import Toolchain
    from neuronforge.stores import ArtifactStore
    from neuronforge.target import TargetSpec

LAUNCH_DIR = "launch"  # the launch spec's files, next to the model folder


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
    def from_manifest(cls, root: Path, manifest: dict[str, Any]) -> Artifact:
        from neuronforge.request import Toolchain
        from neuronforge.target import TargetSpec

        return cls(root, TargetSpec.from_key_material(manifest["request"]), Toolchain.from_json(manifest["toolchain"]))


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
    def queue(self) -> str | None:
        """The Celery queue of its compile and smoke tasks; None: the default queue."""
        return f"neuron-{self.version}" if self.neuron else None

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
        }

    # -- planning ------------------------------------------------------------------------------
    def problems(self, target: TargetSpec, model_type: str | None = None) -> list[str]:
        """Why this profile cannot build `target` (for `model_type`, when known), each with the fix.
        Subclasses add their consumer's limits to these."""
        out = []
        family = target.instance.family
        if self.instance_families and family not in self.instance_families:
            out.append(
                f"profile {self.ref} serves {', '.join(sorted(self.instance_families))} instances, "
                f"not {target.instance_type}"
            )
        if model_type is not None and model_type not in self.architectures:
            from neuronforge.profiles.registry import profiles_for

            others = [p.name for p in profiles_for(model_type) if p.name != self.name]
            fix = f"use profile {' or '.join(others)}" if others else "no profile supports it yet"
            out.append(f"profile {self.name!r} does not support {model_type}; {fix}")
        return out

    def arch_problems(self, target: TargetSpec, arch: ModelArch) -> list[str]:
        """What the consumer cannot do with this model's shapes at this target (the planner asks
        once the config is known). Default: nothing beyond `problems`."""
        return []

    def toolchain_problems(self, toolchain: Toolchain) -> list[str]:
        """The detected toolchain must be the pinned one: the consumer checks the versions at load."""
        out = []
        if toolchain.backend != self.backend.name:
            out.append(f"profile {self.ref} compiles with backend {self.backend.name}, not {toolchain.backend}")
        if self.pins.compiler_version and toolchain.compiler_version != self.pins.compiler_version:
            out.append(
                f"profile {self.ref} needs neuronx-cc {self.pins.compiler_version}; the worker has "
                f"{toolchain.compiler_version} (build its image with NEURON_SDK_VERSION={self.version}, "
                f"or route the target to queue {self.queue})"
            )
        for package, pinned in sorted(self.pins.packages.items()):
            found = toolchain.packages.get(package)
            if found != pinned:
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
                (job.out / LAUNCH_DIR / name).write_text(text)
            outputs[LAUNCH_DIR] = LAUNCH_DIR
        return outputs

    def assemble_model(self, job: AssembleJob, dest: Path) -> None:
        """Default: the build as the backend wrote it."""
        copy_tree(job.build_dir, dest)

    @abstractmethod
    def launch_spec(self, ctx: LaunchContext) -> dict[str, str]:
        """File name (under `launch/`) -> content."""

    @abstractmethod
    def preflight(self, artifact: Artifact) -> list[str]:
        """The consumer's load-time rules checked offline; each problem names the rule's source."""

    def store_problems(self, artifact: Artifact, store: ArtifactStore) -> list[str]:
        """What the artifact needs from the store outside its own folder and does not find there
        (`neuronforge verify`). Default: nothing — the artifact is self-contained."""
        return []


def copy_tree(src: Path, dest: Path) -> None:
    """Copy a materialized folder, leaving out its store bookkeeping (MANIFEST.json, the marker)."""
    from neuronforge import layout
    from neuronforge.localcache import MARKER

    def ignore(folder: str, names: list[str]) -> set[str]:
        return {n for n in names if n in (layout.MANIFEST, MARKER)} if Path(folder) == src else set()

    shutil.copytree(src, dest, ignore=ignore)


# `$NAME` / `${NAME}` in a launch script, expanded from its env file.
SHELL_VAR = re.compile(r"\$\{(\w+)\}|\$(\w+)")


def read_env_file(path: Path) -> dict[str, str]:
    """A launch env file's KEY=VALUE lines (comments and blanks skipped), as `set -a; . file` and
    `docker run --env-file` read them."""
    env = {}
    for line in path.read_text().splitlines():
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
        return json.loads(path.read_text())
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
