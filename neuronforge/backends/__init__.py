"""Compile backends. Each declares the architectures it can build; the planner checks that before
any compile (`supported_architectures`). The backends themselves import their heavy toolchains
lazily, so this package imports anywhere."""

from neuronforge.backends.support import BACKEND_ARCHITECTURES, supported_architectures

__all__ = ["BACKEND_ARCHITECTURES", "supported_architectures"]
