"""FAKE transformers_neuronx.gpt2.model (0.13.380 signatures; behaviour in module.py). LMI loads
gpt2 with `GPT2ForSampling`; the top-level package exports the context-broadcasting variant."""

from transformers_neuronx.config import NeuronConfig
from transformers_neuronx.module import FakeSampling


class GPT2ForSampling(FakeSampling):
    def __init__(
        self,
        config,
        batch_size=1,
        amp="f32",
        tp_degree=2,
        unroll=None,
        init_n_active_tokens=None,
        neuron_config=None,
        n_positions=2048,
        **kwargs,
    ):
        self._setup(config, n_positions, batch_size, amp, tp_degree, None, neuron_config)


class GPT2ForSamplingWithContextBroadcasting(FakeSampling):
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
        self._setup(
            config, kwargs.pop("n_positions", 2048), batch_size, amp, tp_degree, context_length_estimate, neuron_config
        )
