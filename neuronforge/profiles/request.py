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
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from neuronforge.common.errors import InvalidInput
from neuronforge.spec.source import ModelSource
from neuronforge.spec.target import TargetSpec
from neuronforge.spec.toolchain import Toolchain

if TYPE_CHECKING:
    from neuronforge.profiles.base import ServingProfile

# 2: the serving profile (name, version, pins) replaced the bare backend; 3: the compile target named
# explicitly to the Neuron compilers (they compile on hosts without devices, so nothing is guessed).
KEY_SCHEMA = 3


@dataclass(frozen=True)
class CompileRequest:
    """What to build: the pinned source, the target (its profile spelled `name@version`), and that
    profile — resolved once, at the edge (`neuronforge.profiles.request`), so that this value
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
