"""FAKE transformers_neuronx.opt.config.OPTConfig (0.13.380; 1ade6d74 opt/config.py)."""

from transformers_neuronx import utils


class OPTConfig:
    def __init__(self, config, n_positions, batch_size, amp, tp_degree, **kwargs):
        if not config.do_layer_norm_before:
            raise NotImplementedError("do_layer_norm_before=False not implemented")
        self.activation_function = config.activation_function
        self.eos_token_id = config.eos_token_id
        self.pad_token_id = config.pad_token_id
        self.ffn_dim = config.ffn_dim
        self.hidden_size = config.hidden_size
        self.max_position_embeddings = config.max_position_embeddings
        self.num_attention_heads = config.num_attention_heads
        self.num_hidden_layers = config.num_hidden_layers
        self.vocab_size = config.vocab_size
        self.word_embed_proj_dim = config.word_embed_proj_dim
        utils.maybe_override_attributes(self, kwargs)
        self.n_positions = n_positions
        self.batch_size = batch_size
        self.amp = amp
        self.tp_degree = tp_degree
        self.model_type = "opt"
