"""FAKE transformers_neuronx.gptj.model.GPTJForSampling (0.13.380; 1ade6d74 gptj/model.py).

`class GPTJForSampling(module.PretrainedModel)` — NOT base.NeuronModelBase: no `save`, `load` or
`serialization_enabled` (AttributeError), so its NEFFs exist only in the persistent cache. Its
`**kwargs` go to `GPTJConfig`: `n_positions` (default: the checkpoint's `n_positions`; above it a
ValueError) is accepted, `context_length_estimate` is a KeyError. Quantization and
`init_n_active_tokens` are NotImplementedError. `to_neuron()` builds one decode graph (one active
token) per bucket of `power_of_two_bucket_sizes(128, n_positions)` — no context graphs — through the
persistent cache (compiler.compile_hlo_module); the HLO depends on the config, batch size, amp and
tp degree, not on the NeuronConfig. Behaviour in _fake.py."""

from transformers_neuronx import _fake, module, utils
from transformers_neuronx.config import NeuronConfig
from transformers_neuronx.gptj.config import GPTJConfig


class GPTJForSampling(module.PretrainedModel):
    def __init__(
        self, config, batch_size=1, amp="f32", tp_degree=2, unroll=None, init_n_active_tokens=None, neuron_config=None,
        **kwargs,
    ):  # fmt: skip
        super().__init__()
        gptj = GPTJConfig(config, batch_size, amp, tp_degree, **kwargs)
        self.neuron_config = neuron_config if neuron_config else NeuronConfig()
        sequence_length = kwargs.get("n_positions")
        if sequence_length and sequence_length > gptj.n_ctx:
            raise ValueError(
                f"Sequence length ({sequence_length}) cannot be larger than position embedding's context size "
                f"({gptj.n_ctx})!"
            )
        if self.neuron_config.quant:
            raise NotImplementedError("Support for quantization is not yet implemented")
        if init_n_active_tokens is not None:
            raise NotImplementedError(f"init_n_active_tokens={init_n_active_tokens}")
        self.n_positions_list = utils.power_of_two_bucket_sizes(128, gptj.n_positions)
        _fake.describe(
            self,
            config,
            graphs=[f"decode-seqlen{n}-batch{batch_size}" for n in self.n_positions_list],
            batches=[batch_size],
            max_positions=gptj.n_positions,
            amp=amp,
            neuron_config=self.neuron_config,
            n_positions=gptj.n_positions,
            batch_size=batch_size,
            tp_degree=tp_degree,
            unroll=gptj.n_layer if unroll is None else unroll,
        )

    def to_neuron(self):
        _fake.compile_or_load(self)

    def sample(self, input_ids, sequence_length, start_ids=None, top_k=50, streamer=None):
        return _fake.sample(self, input_ids, sequence_length, top_k)
