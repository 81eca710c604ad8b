"""FAKE transformers_neuronx.gpt2.config.GPT2Config (0.13.380; 1ade6d74 gpt2/config.py): the HF
config's fields, overridden by the model's `**kwargs` (`n_positions` is one; anything else unknown is
a KeyError)."""

from transformers_neuronx import utils


class GPT2Config:
    def __init__(self, config, batch_size, amp, tp_degree, **kwargs):
        self.activation_function = config.activation_function
        self.n_embd = config.n_embd
        self.n_head = config.n_head
        self.n_kv_head = config.n_kv_head if hasattr(config, "n_kv_head") else config.n_head
        self.n_layer = config.n_layer
        self.n_positions = config.n_positions
        self.max_position_embeddings = config.max_position_embeddings
        self.vocab_size = config.vocab_size
        self.eos_token_id = config.eos_token_id
        utils.maybe_override_attributes(self, kwargs)
        self.intermediate_dim = self.n_embd * 4
        self.batch_size = batch_size
        self.amp = amp
        self.tp_degree = tp_degree
        self.model_type = "gpt2"
