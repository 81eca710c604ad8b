"""FAKE transformers_neuronx.bloom.config.BloomConfig (0.13.380; 1ade6d74 bloom/config.py)."""

from transformers_neuronx import utils


class BloomConfig:
    def __init__(self, config, n_positions, batch_size, amp, tp_degree, **kwargs):
        self.embed_dim = config.hidden_size
        self.hidden_size = config.hidden_size
        self.attention_head_size = config.hidden_size // config.n_head
        self.n_head = config.n_head
        self.n_layer = config.num_hidden_layers
        self.vocab_size = config.vocab_size
        self.layer_norm_epsilon = config.layer_norm_epsilon
        self.bos_token_id = config.bos_token_id
        self.eos_token_id = config.eos_token_id
        utils.maybe_override_attributes(self, kwargs)
        self.n_positions = n_positions
        self.batch_size = batch_size
        self.amp = amp
        self.tp_degree = tp_degree
        self.model_type = "bloom"
