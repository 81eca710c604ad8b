"""FAKE transformers_neuronx.gptneox.config.GPTNeoXConfig (0.13.380; 1ade6d74 gptneox/config.py)."""

from transformers_neuronx import utils


class GPTNeoXConfig:
    def __init__(self, config, batch_size, amp, tp_degree, **kwargs):
        self.activation_function = config.hidden_act
        self.n_embd = config.hidden_size
        self.n_head = config.num_attention_heads
        self.n_layer = config.num_hidden_layers
        self.n_positions = config.max_position_embeddings
        self.n_ctx = self.n_positions
        head_size = self.n_embd // self.n_head
        self.rotary_dim = int(head_size * config.rotary_pct)
        self.vocab_size = config.vocab_size
        self.eos_token_id = config.eos_token_id
        self.rotary_emb_base = config.rotary_emb_base
        self.use_parallel_residual = config.use_parallel_residual
        utils.maybe_override_attributes(self, kwargs)
        self.intermediate_dim = config.intermediate_size
        self.batch_size = batch_size
        self.amp = amp
        self.tp_degree = tp_degree
