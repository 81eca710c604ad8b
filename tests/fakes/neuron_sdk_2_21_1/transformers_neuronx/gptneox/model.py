"""FAKE transformers_neuronx.gptneox.model.GPTNeoXForSampling (0.13.380; 1ade6d74 gptneox/model.py).

`class GPTNeoXForSampling(module.PretrainedModel)` — NOT base.NeuronModelBase: no `save`, `load` or
`serialization_enabled`. Its `**kwargs` go to `GPTNeoXConfig`: `n_positions` (default: the
checkpoint's `max_position_embeddings`) is accepted, `context_length_estimate` is a KeyError.
NotImplementedError for `use_parallel_residual=False`, quantization, any `unroll` and
`init_n_active_tokens`. `to_neuron()` builds one decode graph per bucket of
`power_of_two_bucket_sizes(128, n_positions)` through the persistent cache. Behaviour in _fake.py."""

from transformers_neuronx import _fake, module, utils
from transformers_neuronx.config import NeuronConfig
from transformers_neuronx.gptneox.config import GPTNeoXConfig


class GPTNeoXForSampling(module.PretrainedModel):
    def __init__(
        self, config, batch_size=1, amp="f32", tp_degree=2, unroll=None, init_n_active_tokens=None, neuron_config=None,
        **kwargs,
    ):  # fmt: skip
        super().__init__()
        neox = GPTNeoXConfig(config, batch_size, amp, tp_degree, **kwargs)
        self.neuron_config = neuron_config if neuron_config else NeuronConfig()
        if not neox.use_parallel_residual:
            raise NotImplementedError("use_parallel_residual=False is not yet implemented")
        if self.neuron_config.quant:
            raise NotImplementedError("Support for quantization is not yet implemented")
        if unroll is not None:
            raise NotImplementedError(f"unroll={unroll} is not yet implemented")
        if init_n_active_tokens is not None:
            raise NotImplementedError(f"init_n_active_tokens={init_n_active_tokens} is not yet implemented")
        self.n_positions_list = utils.power_of_two_bucket_sizes(128, neox.n_positions)
        _fake.describe(
            self,
            config,
            graphs=[f"decode-seqlen{n}-batch{batch_size}" for n in self.n_positions_list],
            batches=[batch_size],
            max_positions=neox.n_positions,
            amp=amp,
            neuron_config=self.neuron_config,
            n_positions=neox.n_positions,
            batch_size=batch_size,
            tp_degree=tp_degree,
        )

    def to_neuron(self):
        _fake.compile_or_load(self)

    def sample(self, input_ids, sequence_length, start_ids=None, top_k=50, streamer=None):
        return _fake.sample(self, input_ids, sequence_length, top_k)
