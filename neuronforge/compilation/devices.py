"""Neuron devices a target occupies: what a Kubernetes pod requests (`aws.amazon.com/neuron`)
and what the prepare stage records for it."""

from __future__ import annotations

import math

from neuronforge.spec.target import TargetSpec

# Physical NeuronCores per Neuron device (what the Neuron device plugin counts as one `neuron`).
CORES_PER_DEVICE = {"inf2": 2, "trn1": 2, "trn1n": 2, "trn2": 8}


def neuron_devices(target: TargetSpec) -> int:
    """Neuron devices the target needs: its tp degree in physical cores, rounded up."""
    t = target.normalized()
    return math.ceil(t.tp_degree * t.logical_nc_config / CORES_PER_DEVICE[t.instance.family])
