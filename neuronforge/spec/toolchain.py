"""The toolchain a build used: backend library, compiler and the traced packages' versions, the
normalized compiler flags. A value type: detection lives in `neuronforge.compilation.detect`."""

from __future__ import annotations

import shlex
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    pass


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
