"""FAKE transformers_neuronx.mixtral.model.MixtralForSampling (0.13.380; 1ade6d74 mixtral/model.py:
`class MixtralForSampling(base.NeuronModelBase)`, keyword-only constructor whose neuron_config defaults
to `NeuronConfig()`; behaviour in _fake.py)."""

from transformers_neuronx import _fake, base, bucket
from transformers_neuronx.config import NeuronConfig


class MixtralForSampling(base.NeuronModelBase):
    def __init__(
        self,
        config,
        *,
        n_positions=2048,
        batch_size=1,
        amp="f32",
        tp_degree=2,
        context_length_estimate=None,
        context_unroll=None,
        unroll=None,
        neuron_config=NeuronConfig(),  # noqa: B008  (the real signature)
        **kwargs,
    ):
        super().__init__(None, config)
        self.neuron_config = neuron_config
        self.batch_sizes = bucket.batch_sizes(batch_size)
        if context_length_estimate is None:
            context_length_estimate = bucket.context_sizes(None, bucket.token_sizes(n_positions))
        _fake.decoder(
            self,
            config,
            n_positions=n_positions,
            batch_size=batch_size,
            amp=amp,
            tp_degree=tp_degree,
            context_length_estimate=context_length_estimate,
            neuron_config=neuron_config,
        )

    def sample(self, input_ids, sequence_length, start_ids=None, top_k=50, top_p=1.0, eos_token_override=None,
               temperature=1.0, streamer=None, stopping_criteria_list=None):  # fmt: skip
        return _fake.sample(self, input_ids, sequence_length, top_k)
