"""FAKE `vllm_neuron/model/registry.py`: `get_models()`, the (HF architecture, the plugin's class) pairs
that `NeuronWorker.__init__` registers into vLLM's ModelRegistry (aws-neuron/aws-neuron-sdk@81ce03ae
vllm-neuron/docs/design/framework/model_factory_design.md), per installed plugin release:

- 0.24.0.1.1.0 (release-0.24.0.1.1.0, f8abae6, registry.py:21-25; read by foxl-ai/kiln@f5a7faf3
  docs/research/vllm-neuron-parity.md): LlamaForCausalLM, GptOssForCausalLM, Eagle3LlamaForCausalLM,
  Qwen3ForCausalLM, Qwen3VLForConditionalGeneration.
- 0.29 (the tag was not read; vllm-project/vllm-neuron@5528be7a, after 0.24): the same and DFlashDraftModel.
- `SyntheticNeuronModel` only with VLLM_NEURON_SYNTHETIC_MODEL=1 (both).
The classes are stand-ins: only the names are the plugin's."""

import os
from importlib import metadata


class NeuronModel:
    """Stand-in for the plugin's model classes: the plugin's runner builds them with `from_configs`."""

    @classmethod
    def from_configs(cls, hf_config, neuron_config):
        return cls()


def _plugin():
    return tuple(int(x) for x in metadata.version("vllm-neuron").split("+")[0].split(".")[:2])


def get_models():
    names = [
        "LlamaForCausalLM",
        "GptOssForCausalLM",
        "Eagle3LlamaForCausalLM",
        "Qwen3ForCausalLM",
        "Qwen3VLForConditionalGeneration",
    ]
    if _plugin() >= (0, 29):
        names.append("DFlashDraftModel")
    models = [(name, type(name, (NeuronModel,), {})) for name in names]
    if os.environ.get("VLLM_NEURON_SYNTHETIC_MODEL") == "1":
        models.append(("SyntheticNeuronModel", type("SyntheticNeuronModel", (NeuronModel,), {})))
    return models
