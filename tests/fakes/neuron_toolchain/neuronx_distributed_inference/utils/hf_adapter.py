"""FAKE hf_adapter (tests/fakes/README.md): `load_pretrained_config` as in NxD Inference 0.6.10598
(utils/hf_adapter.py: a hook that copies the HF config's `to_dict()` onto the InferenceConfig, minus
`torch_dtype`, which sets `neuron_config.torch_dtype` unless the NeuronConfig was given one), and a
greedy generation adapter over the CPU model."""

from neuronx_distributed_inference.models.config import to_torch_dtype


def load_pretrained_config(model_path_or_name=None, hf_config=None):
    def load_config(self):
        if (model_path_or_name is None) == (hf_config is None):
            raise ValueError('Please provide only one of "model_path_or_name" or "hf_config"')
        from transformers import AutoConfig

        config = AutoConfig.from_pretrained(model_path_or_name) if hf_config is None else hf_config
        config_dict = config.to_dict()
        if config.transformers_version is not None:
            config_dict["transformers_version"] = config.transformers_version
        if "torch_dtype" in config_dict:
            if self.neuron_config is not None and not self.neuron_config.overrides_torch_dtype:
                dtype = config_dict["torch_dtype"]
                self.neuron_config.torch_dtype = to_torch_dtype(dtype) if isinstance(dtype, str) else dtype
            del config_dict["torch_dtype"]
        self.__dict__.update(config_dict)
        if hasattr(config, "attribute_map"):
            self.attribute_map = config.attribute_map

    return load_config


class HuggingFaceGenerationAdapter:
    def __init__(self, model):
        self.model = model

    def generate(self, input_ids, attention_mask=None, max_new_tokens=8, do_sample=False, **kw):
        import torch

        ids = input_ids
        with torch.no_grad():
            for _ in range(max_new_tokens):
                nxt = self.model.hf(input_ids=ids).logits[:, -1].argmax(-1, keepdim=True)
                ids = torch.cat([ids, nxt], dim=1)
        return ids
