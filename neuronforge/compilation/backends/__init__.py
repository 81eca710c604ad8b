"""Compile backends behind one interface (`neuronforge.compilation.backends.base.Backend`): `cpu`
(AOTInductor, here), `optimum` (optimum-neuron's exporter), `nxdi` (NxD Inference) and `tnx`
(transformers-neuronx, for LMI) and `vllm-native`
(the vLLM Neuron plugin of SDK 2.32+, through its own compile cache). Serving
profiles pick one; nothing else branches on a backend's name. The backends import their heavy
toolchains lazily, so this package imports anywhere."""

from __future__ import annotations

from neuronforge.compilation.backends.base import Backend


def all_backends() -> dict[str, Backend]:
    """Every backend by name: the one place they are registered."""
    from neuronforge.compilation.backends import cpu, nxdi, optimum, tnx, vllm_native

    return {b.name: b for b in (cpu.BACKEND, optimum.BACKEND, nxdi.BACKEND, tnx.BACKEND, vllm_native.BACKEND)}


def get_backend(name: str) -> Backend:
    from neuronforge.common.errors import InvalidInput

    backends = all_backends()
    if name not in backends:
        raise InvalidInput(f"unknown backend {name!r}; known: {', '.join(backends)}")
    return backends[name]


__all__ = ["Backend", "all_backends", "get_backend"]
