"""Serving profiles: the stack that will serve a model decides how it is compiled, published,
launched and checked. See `neuronforge.profiles.base` and the registry."""

from neuronforge.profiles.base import Artifact, AssembleJob, LaunchContext, Pins, ServingProfile
from neuronforge.profiles.registry import (
    all_profiles,
    device_queues,
    get_profile,
    neuron_queues,
    parse_target,
    pin,
    profile_names,
    profile_of,
)

__all__ = [
    "Artifact",
    "AssembleJob",
    "LaunchContext",
    "Pins",
    "ServingProfile",
    "all_profiles",
    "device_queues",
    "get_profile",
    "neuron_queues",
    "parse_target",
    "pin",
    "profile_names",
    "profile_of",
]
