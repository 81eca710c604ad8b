"""FAKE transformers_neuronx.modeling_auto (0.13.380): NeuronAutoModelForCausalLM, which picks the
`*ForSampling` class from a checkpoint's config (aws-neuron/transformers-neuronx 1ade6d74
src/transformers_neuronx/modeling_auto.py, CODE; re-exported by the package's `__init__.py`).

LMI imports it from the package at module level (djl-serving afece25d, and the 0.33.0-dlc branch 8b3b685b
the 0.33.0-pytorch-inf2 image was built from, engines/python/setup/djl_python/neuron_utils/model_loader.py:24)
and calls `NeuronAutoModelForCausalLM.from_pretrained(model_path, neuron_config=..., **model_kwargs)` only
for a checkpoint it has not split itself (`load_auto_model`, :291-296); a split model (ours:
`load_split_model`) is loaded by the class of LMI's own table `MODEL_TYPE_TO_CLS_LOADER` (:117-126), which
differs for "gpt2": `gpt2.model.GPT2ForSampling` there, GPT2ForSamplingWithContextBroadcasting here.

The config's class decides first (a transformers config class of the table below), then its
`model_type`; anything else is an AssertionError with the real messages. The chosen class's own
`from_pretrained` does the rest (module.PretrainedModel.from_pretrained)."""

import transformers
from transformers import AutoConfig

import transformers_neuronx

NEURON_MODEL_FOR_CAUSAL_LM_MAPPING = {
    "bloom": transformers_neuronx.BloomForSampling,
    "code_llama": transformers_neuronx.LlamaForSampling,
    "gpt2": transformers_neuronx.GPT2ForSamplingWithContextBroadcasting,
    "gpt_neox": transformers_neuronx.GPTNeoXForSampling,
    "gptj": transformers_neuronx.GPTJForSampling,
    "llama": transformers_neuronx.LlamaForSampling,
    "mistral": transformers_neuronx.MistralForSampling,
    "mixtral": transformers_neuronx.MixtralForSampling,
    "opt": transformers_neuronx.OPTForSampling,
}

CONFIG_MAPPING = {
    transformers.BloomConfig: "bloom",
    transformers.LlamaConfig: "llama",
    transformers.GPT2Config: "gpt2",
    transformers.GPTNeoXConfig: "gpt_neox",
    transformers.GPTJConfig: "gptj",
    transformers.MistralConfig: "mistral",
    transformers.MixtralConfig: "mixtral",
    transformers.OPTConfig: "opt",
}


class NeuronAutoModelForCausalLM:
    @classmethod
    def from_pretrained(cls, pretrained_model_name_or_path, *model_args, **kwargs):
        config = AutoConfig.from_pretrained(pretrained_model_name_or_path)
        if type(config) in CONFIG_MAPPING:
            model_type = CONFIG_MAPPING[type(config)]
        elif hasattr(config, "model_type"):  # a custom or derived config class
            model_type = config.model_type
        else:
            raise AssertionError(f"Models based on '{type(config)}' are not supported by Neuron")
        if model_type not in NEURON_MODEL_FOR_CAUSAL_LM_MAPPING:
            raise AssertionError(f"The configuration model type '{model_type}' is not supported by Neuron")
        model_class = NEURON_MODEL_FOR_CAUSAL_LM_MAPPING[model_type]
        return model_class.from_pretrained(pretrained_model_name_or_path, *model_args, **kwargs)
