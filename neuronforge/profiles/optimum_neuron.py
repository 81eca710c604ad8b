"""Profile `optimum-neuron`: optimum-neuron 0.4.5 on Neuron SDK 2.26.1 (STUB: being completed)."""

from __future__ import annotations

from neuronforge.backends.optimum import BACKEND
from neuronforge.profiles.base import Artifact, LaunchContext, Pins, ServingProfile

COMPILER_VERSION = "2.21.33363.0+82129205"  # neuronx-cc of SDK 2.26.1, with its local label


class OptimumNeuronProfile(ServingProfile):
    name = "optimum-neuron"
    title = "optimum-neuron 0.4.5: NeuronModelForCausalLM.from_pretrained / optimum-cli neuron serve"
    pins = Pins(sdk_release="2.26.1", compiler_version=COMPILER_VERSION, packages={"optimum-neuron": "0.4.5"})
    backend = BACKEND
    instance_families = frozenset({"inf2", "trn1", "trn1n", "trn2"})
    folder = "optimum-neuron"
    publishes = (
        "optimum-neuron/: the export as optimum writes it "
        "(config, neuron_config, model.pt, checkpoint/weights, tokenizer)"
    )

    def problems(self, target, model_type=None) -> list[str]:
        from neuronforge.backends.optimum import unsupported

        return super().problems(target, model_type) + unsupported(target)

    def compile_settings(self, target, model_type, quantized_dir=None):
        return {}

    def launch_spec(self, ctx: LaunchContext) -> dict[str, str]:
        return {}

    def preflight(self, artifact: Artifact) -> list[str]:
        return []


PROFILE = OptimumNeuronProfile()
