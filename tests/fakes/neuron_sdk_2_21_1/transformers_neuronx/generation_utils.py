"""FAKE transformers_neuronx.generation_utils (0.13.380): HuggingFaceGenerationModelAdapter, the
transformers `PreTrainedModel` that lets a `*ForSampling` model be driven by transformers' `generate`
(aws-neuron/transformers-neuronx 1ade6d74 src/transformers_neuronx/generation_utils.py:15-104, CODE).

Why the fake has it: LMI imports it at module level and SUBCLASSES it while its handler is imported
(djl-serving afece25d, and the 0.33.0-dlc branch 8b3b685b the 0.33.0-pytorch-inf2 image was built from,
engines/python/setup/djl_python/neuron_utils/utils.py:20 and :138 `NeuronXDynamicBatchModelAdapter`,
whose `__init__(model, config, ...)` calls `super().__init__(config, model)`; LMI wraps the loaded model
in it when `rolling_batch=disable`, model_loader.py:161-164 and :431).

Reproduced: the base class, the constructor (a config whose `_attn_implementation` is "sdpa" is switched
to "eager" with a warning, then `PreTrainedModel.__init__(config)`; `model`, `config` and `cur_len =
torch.zeros(1, dtype=torch.long)` set), `reset_generation`, `generate` (resets, then transformers'
`generate`) and `_reorder_cache` (asserts the model has a callable `reorder_cache`).
Not reproduced: `forward` and `prepare_inputs_for_generation` drive the compiled decoder step by step
(`model(input_ids, cache_ids, start_ids)`, `neuron_config.is_pp()`, `neuron_config.use_2d_cache_ids`),
which the fake models do not have — their one way to generate is `sample()`, what LMI's `use_sample`
path (`neuron_sample`) and our smoke call. Both raise NotImplementedError naming the fake, with the real
signatures. Note also that transformers >= 4.50's `PreTrainedModel` no longer inherits `generate`
(GenerationMixin); the LMI image pins transformers 4.45.2 (serving/docker/pytorch-inf2.Dockerfile
`ARG transformers_version`), where it does.
"""

import warnings

import torch
from transformers import PreTrainedModel

_NOT_FAKED = (
    "{}: the FAKE transformers-neuronx 0.13.380 (tests/fakes/neuron_sdk_2_21_1) has no step-by-step "
    "decoder to drive; generate with the model's sample() instead"
)


class HuggingFaceGenerationModelAdapter(PreTrainedModel):
    def __init__(self, config, model):
        if getattr(config, "_attn_implementation", None) == "sdpa":
            warnings.warn(
                "Warning: sdpa is unsupported as part of attention implementation. "
                "Falling back to eager attention implementation.",
                stacklevel=2,
            )
            config._attn_implementation = "eager"
        super().__init__(config)
        self.model = model
        self.config = config
        self.cur_len = torch.zeros(1, dtype=torch.long)

    def reset_generation(self):
        self.cur_len = torch.zeros(1, dtype=torch.long)

    def forward(
        self,
        input_ids,
        cache_ids,
        start_ids=None,
        output_hidden_states=False,
        output_attentions=False,
        attention_mask=None,
        return_dict=False,
    ):
        raise NotImplementedError(_NOT_FAKED.format("HuggingFaceGenerationModelAdapter.forward"))

    def generate(self, *args, **kwargs):
        """Stateless: every call starts from position 0."""
        self.reset_generation()
        return super().generate(*args, **kwargs)

    def _reorder_cache(self, past, beam_idx):
        """Beam search: the model reorders its own KV cache (`past` is ignored)."""
        reorder = getattr(self.model, "reorder_cache", None)
        assert callable(reorder), f"{type(self.model).__name__} doesn't have reorder_cache implemented for beam search"
        reorder(beam_idx)

    def prepare_inputs_for_generation(self, input_ids, past_key_values=None, inputs_embeds=None, **kwargs):
        raise NotImplementedError(_NOT_FAKED.format("HuggingFaceGenerationModelAdapter.prepare_inputs_for_generation"))
