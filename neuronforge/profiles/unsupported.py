"""Serving stacks people ask for that neuronforge does not build for: the planner refuses them by
name with the reason and the nearest supported profile.

tgi-neuron: TGI's Neuron image installs optimum-neuron from one release tag beside pinned Neuron
packages (huggingface/text-generation-inference `Dockerfile.neuron`: v0.1.0 at 54d15462, v0.2.1 at
0c739846) and loads through it, and optimum-neuron refuses an export whose optimum-neuron or compiler
version is not the installed one (huggingface/optimum-neuron@v0.4.5 optimum/neuron/configuration_utils.py
`NeuronConfig.from_dict`). The 0.3.0 of its latest image is unverified: the revisions read pin the two
above.
"""

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
