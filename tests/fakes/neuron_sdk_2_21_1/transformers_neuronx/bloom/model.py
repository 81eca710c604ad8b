"""FAKE transformers_neuronx.bloom.model.BloomForSampling (0.13.380 signature; behaviour in module.py)."""

from transformers_neuronx.module import FakeSampling


class BloomForSampling(FakeSampling):
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
        **kwargs,
    ):
        self._setup(config, n_positions, batch_size, amp, tp_degree, context_length_estimate, neuron_config)
