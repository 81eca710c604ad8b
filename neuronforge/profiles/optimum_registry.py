"""optimum-neuron 0.4.5's Hub cache registry for the `optimum-neuron` profile's builds.

What a registry entry is and where it lives: `neuronforge.artifacts.hub_registry`. This module holds
what depends on the consumer: its entry is computed, and its lookup run, by optimum-neuron's own code
in the profile's toolchain interpreter (`neuronforge_toolchain/optimum_registry.py`) — the entry's
folder is a digest over the model config as the consumer's transformers serialises it, so neither
may run in this process, whose transformers is not the consumer's.

Version lock: an entry is found only by the optimum-neuron release that wrote it (its folder is
`0_REGISTRY/<optimum-neuron version>`, under the compiler folder whose name starts with the
neuronx-cc version that optimum-neuron pins: hub_cache.py `REGISTRY_FOLDER`, `hub_registry_path`),
and its digest follows transformers. So each entry is labelled with the (optimum-neuron, neuronx-cc,
transformers) that built it, and a build whose toolchain is not the profile's consumer pins is
refused before anything is written.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from neuronforge.common.errors import InvalidInput

if TYPE_CHECKING:
    from neuronforge.artifacts.hub_registry import CacheRepo
    from neuronforge.compilation.backends.base import Backend
    from neuronforge.compilation.backends.interpreter import ToolchainPython

TASK = "text-generation"  # NeuronModelForCausalLM.task: the decoders this profile exports
RULE_LAYOUT = "optimum-neuron v0.4.5 optimum/neuron/cache/hub_cache.py (REGISTRY_FOLDER, hub_registry_path)"
RULE_DIGEST = (
    "optimum-neuron v0.4.5 optimum/neuron/cache/entries/single_model.py arch_digest; the lookup builds the "
    "config from the Hub as is (SingleModelCacheEntry.from_hub), the export after setting its dtype "
    "(models/inference/backend/pretrained_model.py _export)"
)
LOOKUP_TIMEOUT_S = 600.0


@dataclass(frozen=True)
class RegistryEntry:
    """One entry as optimum computed it (`neuronforge_toolchain.optimum_registry.entry`)."""

    registry_folder: str
    arch_digest: str
    lookup_digest: str
    hash: str
    model_type: str
    json: str
    neuron: dict[str, Any]
    versions: dict[str, str]

    @classmethod
    def of(cls, found: dict[str, Any]) -> RegistryEntry:
        return cls(
            str(found["registry_folder"]),
            str(found["arch_digest"]),
            str(found["lookup_digest"]),
            str(found["hash"]),
            str(found["model_type"]),
            str(found["json"]),
            dict(found["neuron"]),
            {str(k): str(v) for k, v in dict(found["versions"]).items()},
        )


@dataclass(frozen=True)
class OptimumRegistry:
    """The registry of one optimum-neuron release: its consumer pins and its toolchain-side calls."""

    optimum_neuron: str  # the consumer's optimum-neuron, exactly
    neuronx_cc: str  # the consumer's neuronxcc.__version__, exactly (from_pretrained compares it)
    transformers: str  # what optimum-neuron requires (its wheel's Requires-Dist), a PEP 440 specifier

    @property
    def rule_digest(self) -> str:
        return RULE_DIGEST

    def describe(self) -> dict[str, str]:
        """The consumer versions an entry is found with (the profile's description, the manifest's)."""
        return {"optimum-neuron": self.optimum_neuron, "neuronx-cc": self.neuronx_cc, "transformers": self.transformers}

    def version_problems(self, packages: dict[str, str]) -> list[str]:
        """Why a toolchain with `packages` may not publish registry entries for this consumer."""
        from packaging.specifiers import SpecifierSet
        from packaging.version import InvalidVersion, Version

        out = []
        for name, want in (("optimum-neuron", self.optimum_neuron), ("neuronx-cc", self.neuronx_cc)):
            got = packages.get(name)
            if got != want:
                out.append(f"{name} {got or 'missing'} built it, the consumer runs {want}")
        got = packages.get("transformers")
        try:
            ok = got is not None and Version(got) in SpecifierSet(self.transformers)
        except InvalidVersion:
            ok = False
        if not ok:
            needs = self.transformers
            out.append(f"transformers {got or 'missing'} built it, the consumer's optimum-neuron needs {needs}")
        return out

    def check_versions(self, packages: dict[str, str]) -> None:
        problems = self.version_problems(packages)
        if problems:
            raise InvalidInput(
                f"refusing to register: {'; '.join(problems)} — optimum-neuron finds an entry only with the versions "
                f"that wrote it ({RULE_LAYOUT}); build on a worker of the profile's image"
            )

    def entry(
        self,
        backend: Backend,
        python: ToolchainPython | None,
        *,
        checkpoint_dir: Path,
        neuron_config: dict[str, Any],
        model_id: str,
        revision: str,
    ) -> RegistryEntry:
        """The entry optimum's export would register for this build (computed by optimum itself)."""
        spec = {
            "checkpoint_dir": str(checkpoint_dir),
            "model_id": model_id,
            "revision": revision,
            "task": TASK,
            "neuron_config": neuron_config,
        }
        found, _ = backend.run(
            python, "registry_entry", spec, env={}, timeout_s=LOOKUP_TIMEOUT_S, what="optimum registry entry"
        )
        entry = RegistryEntry.of(found)
        if entry.arch_digest != entry.lookup_digest:
            dtype = neuron_config.get("torch_dtype")
            raise InvalidInput(
                f"optimum-neuron's lookup would not find this build of {model_id}: its entry goes under digest "
                f"{entry.arch_digest[:12]} (the config with dtype {dtype}), the lookup reads "
                f"{entry.lookup_digest[:12]} "
                f"(the model's config.json as it is) — {RULE_DIGEST}; build with the dtype of the model's config.json, "
                "or leave --hub-registry out"
            )
        return entry

    def lookup(
        self, backend: Backend, python: ToolchainPython | None, repo: CacheRepo, model_id: str, neuron: dict[str, Any]
    ) -> dict[str, Any]:
        """optimum's own `get_hub_cached_entries` / `select_hub_cached_entries` / `get_hub_cached_models`
        for the build's shape, against the repository, in a child with a fresh HF_HOME."""
        import tempfile

        spec = {
            "model_id": model_id,
            "task": TASK,
            "repo_id": repo.repo_id,
            "instance_type": neuron.get("target"),
            "batch_size": neuron.get("batch_size"),
            "sequence_length": neuron.get("sequence_length"),
            "tp_degree": neuron.get("tp_degree"),
            "dtype": neuron.get("torch_dtype"),
        }
        with tempfile.TemporaryDirectory(prefix="nf-hf-home-") as home:
            found, _ = backend.run(
                python,
                "registry_lookup",
                spec,
                env={**repo.env(), "HF_HOME": home},
                timeout_s=LOOKUP_TIMEOUT_S,
                what=f"optimum-neuron's lookup in {repo.repo_id}",
            )
        return found


def same_entry(found: dict[str, Any], ours: dict[str, Any]) -> bool:
    """The lookup returned our neuron config, field for field (JSON-normalised)."""
    return json.dumps(found, sort_keys=True, default=str) == json.dumps(ours, sort_keys=True, default=str)
