"""FAKE transformers_neuronx.module (0.13.380) — compiles nothing.

The class hierarchy is the real one (aws-neuron/transformers-neuronx 1ade6d74,
src/transformers_neuronx/module.py and base.py):

    torch.nn.Module
      LowMemoryModule
        PretrainedModel                      from_pretrained (sanity checks, config, weights)
          GPTJForSampling, GPTNeoXForSampling  (their own to_neuron / sample; NO save / load)
          WrappingCheckpointCompatibleModel
            base.NeuronModelBase             save / load / to_neuron / serialization_enabled
              LlamaForSampling, MistralForSampling, MixtralForSampling, BloomForSampling,
              OPTForSampling, GPT2ForSampling, GPT2ForSamplingWithContextBroadcasting

`from_pretrained(path, **kwargs)` makes the real `_sanity_check` (max `n_positions` — default 2048 for
the check only — >= max `context_length_estimate`; under continuous batching
`batch_size_for_shared_caches == batch_size`), `AutoConfig.from_pretrained(path)`, `cls(config,
**kwargs)`, then looks for the weights in the real order (`model.safetensors`,
`model.safetensors.index.json`, the split `pytorch_model.bin/` folder, `pytorch_model.bin`,
`pytorch_model.bin.index.json`), else FileNotFoundError. What each class compiles and how the fake
stands in for HLO and NEFFs: the class's own model.py and `_fake.py`.
"""

import json
from pathlib import Path

import torch

_WEIGHTS = ("model.safetensors", "model.safetensors.index.json", "pytorch_model.bin", "pytorch_model.bin.index.json")


class LowMemoryModule(torch.nn.Module):
    pass


class PretrainedModel(LowMemoryModule):
    @classmethod
    def from_pretrained(cls, pretrained_model_path, *model_args, **kwargs):
        from transformers import AutoConfig

        n_positions = kwargs.get("n_positions", 2048)
        max_n_pos = max(n_positions) if isinstance(n_positions, list) else n_positions
        estimate = kwargs.get("context_length_estimate")
        max_cle = max(estimate) if isinstance(estimate, list) else estimate
        if isinstance(max_n_pos, int) and isinstance(max_cle, int):
            assert max_n_pos >= max_cle, (
                f"Max context_length_estimate {max_cle} cannot be more than max n_positions {max_n_pos}."
            )
        nc = kwargs.get("neuron_config")
        if nc is not None and nc.continuous_batching:
            expected = kwargs.get("batch_size")
            shared = nc.continuous_batching.batch_size_for_shared_caches
            assert shared == expected, f"invalid batch_size_for_shared_caches ({shared}), {expected} is expected"
        config = AutoConfig.from_pretrained(pretrained_model_path)
        model = cls(config, *model_args, **kwargs)
        model.load_state_dict_dir(pretrained_model_path)
        return model

    def load_state_dict_dir(self, pretrained_model_path):
        path = Path(pretrained_model_path)
        if not any((path / name).exists() for name in _WEIGHTS):
            raise FileNotFoundError(f"Can not find model.safetensors or pytorch_model.bin in {pretrained_model_path}")
        object.__setattr__(self, "_fake_weights_path", path)


class WrappingCheckpointCompatibleModel(PretrainedModel):
    def __init__(self, chkpt_model_cls, *args, **kwargs):
        super().__init__()


def save_pretrained_split(model, save_directory):
    """The legacy split format: `pytorch_model.bin/` with `key_to_filename.json` and one
    `torch.save` file per tensor named `p{idx}.{key}` (module.py, save_split)."""
    folder = Path(save_directory) / "pytorch_model.bin"
    folder.mkdir(parents=True, exist_ok=True)
    model.config.save_pretrained(str(save_directory))
    names = {}
    for idx, (key, tensor) in enumerate(model.state_dict().items()):
        names[key] = f"p{idx}.{key.replace('/', '_')}"
        torch.save(tensor, folder / names[key])
    (folder / "key_to_filename.json").write_text(json.dumps(names, indent=2))
