"""What the installed Neuron libraries can build: asked on the worker that will compile (each
backend class declares the model types it supports; `neuronforge.compilation.backends.base.Backend`).
"""

from __future__ import annotations

# Trn2 (NeuronCore-v3) arrived with Neuron SDK 2.21 (Dec 2024), whose compiler is neuronx-cc 2.16;
# an older compiler cannot emit trn2 NEFFs however the target is spelled.
MIN_COMPILER_FOR_TARGET: dict[str, tuple[int, int]] = {"trn2": (2, 16)}


def _version_tuple(version: str) -> tuple[int, ...]:
    return tuple(int(p) for p in version.split(".")[:2] if p.isdigit())


def toolchain_problems(target, toolchain, model_type: str) -> list[str]:
    """Why the detected toolchain cannot build `target` for `model_type` (empty when it can)."""
    problems = []
    family = target.instance.compile_target
    minimum = MIN_COMPILER_FOR_TARGET.get(family)
    if toolchain.compiler == "neuronxcc" and minimum and _version_tuple(toolchain.compiler_version) < minimum:
        problems.append(
            f"neuronx-cc {toolchain.compiler_version} on this worker cannot compile for {family} "
            f"(needs >= {'.'.join(map(str, minimum))}, Neuron SDK 2.21+); build the worker image with a newer "
            "NEURON_SDK_VERSION or route the target to workers that have it"
        )
    available = toolchain.worker.get("architectures")
    if available is not None and model_type not in available:
        problems.append(
            f"the installed {toolchain.backend} library ({toolchain.backend_version}) has no modeling code for "
            f"{model_type} (it has: {', '.join(available) or 'none'}); upgrade it or use another backend"
        )
    return problems
