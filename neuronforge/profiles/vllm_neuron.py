"""Profile `vllm-neuron`: vLLM on NxD Inference (vllm-neuron 0.2.x, SDK 2.26.1) (STUB: being completed)."""

from __future__ import annotations

from neuronforge.backends.nxdi import BACKEND
from neuronforge.profiles.base import Artifact, LaunchContext, Pins, ServingProfile

COMPILER_VERSION = "2.21.33363.0+82129205"  # neuronx-cc of SDK 2.26.1, with its local label


class VllmNeuronProfile(ServingProfile):
    name = "vllm-neuron"
    title = "vLLM on NxD Inference (vllm-neuron 0.2.x): NEURON_COMPILED_ARTIFACTS + vllm serve"
    pins = Pins(
        sdk_release="2.26.1",
        compiler_version=COMPILER_VERSION,
        packages={"neuronx-distributed-inference": "0.6.10598"},
    )
    backend = BACKEND
    instance_families = frozenset({"inf2", "trn1", "trn1n", "trn2"})
    folder = "nxdi"
    publishes = "nxdi/: NxD Inference compile output with pre-sharded weights, config.json and tokenizer"

    def compile_settings(self, target, model_type, quantized_dir=None):
        from neuronforge.backends.nxdi import neuron_config_kwargs

        return {"neuron_config": neuron_config_kwargs(target, quantized_dir)}

    def launch_spec(self, ctx: LaunchContext) -> dict[str, str]:
        return {}

    def preflight(self, artifact: Artifact) -> list[str]:
        return []


PROFILE = VllmNeuronProfile()
