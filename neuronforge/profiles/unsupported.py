"""Serving stacks people ask for that neuronforge does not build for: the planner refuses them by
name with the reason and the nearest supported profile (sources: shared/reference/CONSUMERS.md)."""

from __future__ import annotations

from neuronforge.profiles.base import RefusedStack

STACKS: tuple[RefusedStack, ...] = (
    RefusedStack(
        "tgi-neuron",
        "TGI's Neuron backend loads only exports made by its image's own pinned optimum-neuron (0.3.0) and "
        "compiler, with equality checks on both",
        "optimum-neuron",
    ),
)
