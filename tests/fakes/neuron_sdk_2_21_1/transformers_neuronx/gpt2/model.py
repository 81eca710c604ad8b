"""FAKE transformers_neuronx.gpt2.model (0.13.380; 1ade6d74 gpt2/model.py; behaviour in _fake.py).

`GPT2ForSampling(base.NeuronModelBase)` — the class LMI loads for gpt2 — takes no `n_positions` or
`context_length_estimate` parameter: its `**kwargs` go to `GPT2Config`, which takes `n_positions`
(the HF config has it; above `max_position_embeddings` it is a ValueError) and refuses
`context_length_estimate` (KeyError 'Found invalid key "context_length_estimate".'). It builds token
graphs only (one per bucket of `config.n_positions`) and always runs in decode mode.
`GPT2ForSamplingWithContextBroadcasting` (what the package exports) also builds context graphs."""

from transformers_neuronx import _fake, base, bucket
from transformers_neuronx.config import NeuronConfig
from transformers_neuronx.gpt2.config import GPT2Config


class GPT2ForSampling(base.NeuronModelBase):
    def __init__(
        self,
        config,
        batch_size=1,
        amp="f32",
        tp_degree=2,
        unroll=None,
        init_n_active_tokens=None,
        neuron_config=None,
        tag=None,
        **kwargs,
    ):
        gpt2 = GPT2Config(config, batch_size, amp, tp_degree, **kwargs)
        super().__init__(None, gpt2)
        self.neuron_config = neuron_config if neuron_config else NeuronConfig()
        sequence_length = kwargs.get("n_positions")
        if sequence_length and sequence_length > gpt2.max_position_embeddings:
            raise ValueError(
                f"Sequence length ({sequence_length}) cannot be larger than position embedding's context size "
                f"({gpt2.max_position_embeddings})!"
            )
        _fake.decoder(
            self,
            config,
            n_positions=gpt2.n_positions,
            batch_size=batch_size,
            amp=amp,
            tp_degree=tp_degree,
            context_length_estimate=None,
            neuron_config=self.neuron_config,
        )

    def sample(self, input_ids, sequence_length, start_ids=None, top_k=50, streamer=None):
        return _fake.sample(self, input_ids, sequence_length, top_k)


class GPT2ForSamplingWithContextBroadcasting(base.NeuronModelBase):
    def __init__(
        self,
        config,
        batch_size=1,
        prompt_batch_size=1,
        amp="f32",
        tp_degree=2,
        unroll=None,
        context_length_estimate=None,
        context_unroll=1,
        neuron_config=NeuronConfig(),  # noqa: B008  (the real signature)
        reorder_cache=False,
        **kwargs,
    ):
        gpt2 = GPT2Config(config, batch_size, amp, tp_degree, **kwargs)
        super().__init__(None, gpt2)
        self.neuron_config = neuron_config if neuron_config else NeuronConfig()
        assert context_length_estimate != 0, (
            "context_length_estimate cannot be set to 0 in the GPT2ForSamplingWithContextBroadcasting class."
        )
        if context_length_estimate is None:
            context_length_estimate = gpt2.n_positions
        _fake.decoder(
            self,
            config,
            n_positions=gpt2.n_positions,
            batch_size=batch_size,
            amp=amp,
            tp_degree=tp_degree,
            context_length_estimate=bucket.context_sizes(context_length_estimate, bucket.token_sizes(gpt2.n_positions)),
            neuron_config=self.neuron_config,
        )

    def sample(self, input_ids, sequence_length, cache_ids=None, start_ids=None, top_k=50, streamer=None,
               output_scores=False, **kwargs):  # fmt: skip
        return _fake.sample(self, input_ids, sequence_length, top_k)
