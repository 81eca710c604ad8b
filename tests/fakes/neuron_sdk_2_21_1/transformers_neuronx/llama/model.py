"""FAKE transformers_neuronx.llama.model.LlamaForSampling (0.13.380; 1ade6d74 llama/model.py:
`class LlamaForSampling(base.NeuronModelBase)`, keyword-only constructor; behaviour in _fake.py)."""

from transformers_neuronx import _fake, base, bucket


class LlamaForSampling(base.NeuronModelBase):
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
        neuron_config=None,
        prefixed_length=0,
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

    def sample(self, input_ids, sequence_length, cache_ids=None, start_ids=None, top_k=50, top_p=1.0,
               eos_token_override=None, temperature=1.0, streamer=None, stopping_criteria_list=None,
               no_repeat_ngram_size=None, **kwargs):  # fmt: skip
        return _fake.sample(self, input_ids, sequence_length, top_k)
