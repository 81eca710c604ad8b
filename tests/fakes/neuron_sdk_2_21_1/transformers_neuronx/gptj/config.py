"""FAKE transformers_neuronx.gptj.config.GPTJConfig (0.13.380; 1ade6d74 gptj/config.py)."""

from transformers_neuronx import utils


class GPTJConfig:
    def __init__(self, config, batch_size, amp, tp_degree, **kwargs):
        self.activation_function = config.activation_function
        self.n_embd = config.n_embd
        self.n_head = config.n_head
        self.n_layer = config.n_layer
        self.n_positions = config.n_positions
        self.n_ctx = config.n_positions  # needed since self.n_positions will be overriden by input n_positions
        self.rotary_dim = config.rotary_dim
        self.vocab_size = config.vocab_size
        self.eos_token_id = config.eos_token_id
        utils.maybe_override_attributes(self, kwargs)
        self.intermediate_dim = self.n_embd * 4
        self.batch_size = batch_size
        self.amp = amp
        self.tp_degree = tp_degree
