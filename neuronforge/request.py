"""`CompileRequest` and its cache key: the content address of everything neuronforge publishes.

The key is sha256 over canonical JSON (sorted keys, no whitespace) of exactly the inputs that change
the compiled output. Inputs IN the key, and why:

- `model_revision`: the resolved, immutable revision (Hub commit sha or files digest). The repo
  *name* is not in it: the same bytes compile to the same graphs wherever they were copied from.
- the normalized `TargetSpec`: instance type (compile target and core count are checked at load),
  tp degree, logical NeuronCore config, batch size, sequence length, max context length, buckets,
  dtype — each one changes the traced graphs or their sharding.
- `quantization` (dtype and method): changes the weights and the graphs' weight dtype.
- the serving `profile` (name, version and its pins: SDK release, compiler version with its local
  label, library versions), the `backend` it compiles with and `backend_options`: different
  exporters and consumer settings emit different graphs.
- the `Toolchain`: backend library version, compiler name and version, and the versions of the
  packages whose modeling code is traced (torch, transformers, neuronx-distributed, …). NEFFs are
  tied to the compiler version; an SDK upgrade must produce new keys.
- `compiler_flags`, normalized (flag groups sorted): flags change the NEFF (optimum-neuron#457 is a
  cache-miss/cache-poisoning bug from a key that left flags out).
- `compile_target` (Neuron profiles): the target the compiler is told (`NEURON_PLATFORM_TARGET_OVERRIDE`:
  inf2 and trn1n compile for trn1), since compiles run on CPU hosts that have no target of their own.

NOT in the key: where the store is, who asked, when, smoke-test prompts, publish formats — none of
them changes the compiled bytes. `KEY_SCHEMA` versions the layout of the material itself.
"""

from __future__ import annotations

import hashlib
import json
import shlex
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from neuronforge.errors import InvalidInput
from neuronforge.source import ModelSource
from neuronforge.target import TargetSpec

if TYPE_CHECKING:
    from neuronforge.profiles.base import ServingProfile

# 2: the serving profile (name, version, pins) replaced the bare backend; 3: the compile target named
# explicitly to the Neuron compilers (they compile on hosts without devices, so nothing is guessed).
KEY_SCHEMA = 3


def normalize_flags(flags: str | list[str] | tuple[str, ...] | None) -> tuple[str, ...]:
    """Canonical compiler flags: shell-split, each flag kept with the values that follow it
    (`--model-type transformer`), the groups sorted. So order and whitespace do not change the key;
    `--opt=value` and `--opt value` stay distinct, as the compiler's argv differs."""
    if flags is None:
        return ()
    tokens = shlex.split(flags) if isinstance(flags, str) else [t for f in flags for t in shlex.split(f)]
    groups: list[list[str]] = []
    for tok in tokens:
        if tok.startswith("-") or not groups:
            groups.append([tok])
        else:
            groups[-1].append(tok)
    return tuple(sorted(" ".join(g) for g in groups))


@dataclass(frozen=True)
class Toolchain:
    """Versions of what turns a checkpoint into compiled graphs, as detected on the worker."""

    backend: str
    backend_version: str
    compiler: str  # e.g. "neuronxcc" or "torch-inductor": also names the compile-cache directory
    compiler_version: str
    packages: dict[str, str] = field(default_factory=dict)
    compiler_flags: tuple[str, ...] = ()
    # Facts about the worker that do not change the compiled graphs, so they are recorded in the
    # manifest but kept out of the key: the Neuron runtime/driver versions (newer runtimes load older
    # NEFFs) and the model types the installed library has modeling code for.
    worker: dict[str, Any] = field(default_factory=dict, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "compiler_flags", normalize_flags(self.compiler_flags))
        object.__setattr__(self, "packages", dict(sorted(self.packages.items())))

    def to_json(self) -> dict[str, Any]:
        return {
            "backend": self.backend,
            "backend_version": self.backend_version,
            "compiler": self.compiler,
            "compiler_version": self.compiler_version,
            "packages": dict(self.packages),
            "compiler_flags": list(self.compiler_flags),
            "worker": dict(self.worker),
        }

    def keyed_json(self) -> dict[str, Any]:
        """What the cache key hashes: everything but the `worker` facts."""
        data = self.to_json()
        del data["worker"]
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Toolchain:
        return cls(
            backend=data["backend"],
            backend_version=data["backend_version"],
            compiler=data["compiler"],
            compiler_version=data["compiler_version"],
            packages=dict(data.get("packages", {})),
            compiler_flags=tuple(data.get("compiler_flags", ())),
            worker=dict(data.get("worker", {})),
        )


@dataclass(frozen=True)
class CompileRequest:
    """What to build: the pinned source, the target (its profile spelled `name@version`), and that
    profile — resolved once, at the edge (`neuronforge.profiles.compile_request`), so that this value
    and the stages that receive it resolve nothing."""

    source: ModelSource
    target: TargetSpec
    profile: ServingProfile

    def __post_init__(self) -> None:
        if self.target.profile != self.profile.ref:
            raise ValueError(f"target names profile {self.target.profile!r}, the request carries {self.profile.ref!r}")


def cache_key_material(request: CompileRequest, toolchain: Toolchain) -> dict[str, Any]:
    """The exact JSON object the key hashes (shown by `neuronforge cache-key --explain`)."""
    if not request.source.is_resolved:
        raise InvalidInput(
            f"cannot compute a cache key for {request.source}: resolve it to an immutable revision first"
        )
    profile = request.profile
    if toolchain.backend != profile.backend.name:
        raise InvalidInput(
            f"toolchain is for backend {toolchain.backend!r} but profile {profile.ref} compiles with "
            f"{profile.backend.name!r}"
        )
    target = request.target.normalized().model_dump(mode="json")
    quantization = target.pop("quantization")
    target.pop("profile")
    backend_options = target.pop("backend_options")
    material = {
        "key_schema": KEY_SCHEMA,
        "model_revision": request.source.resolved_revision,
        "target": target,
        "quantization": quantization,
        "profile": profile.key_material(),
        "backend": profile.backend.name,
        "backend_options": backend_options,
        "toolchain": toolchain.keyed_json(),
    }
    compile_target = profile.compile_target(request.target)
    if compile_target is not None:
        material["compile_target"] = compile_target
    return material


def canonical_json(obj: Any) -> str:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=True)


def cache_key(request: CompileRequest, toolchain: Toolchain) -> str:
    """64 hex chars; the first 12 name the artifact directory."""
    return hashlib.sha256(canonical_json(cache_key_material(request, toolchain)).encode()).hexdigest()
