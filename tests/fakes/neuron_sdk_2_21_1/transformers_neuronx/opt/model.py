"""FAKE transformers_neuronx.opt.model.OPTForSampling (0.13.380 signature; behaviour in module.py)."""

from transformers_neuronx.module import FakeSampling


class OPTForSampling(FakeSampling):
    def __init__(
        self,
        config,
        batch_size=1,
        amp=None,
        tp_degree=2,
        n_positions=2048,
        unroll=None,
        context_length_estimate=None,
        context_unroll=1,
        neuron_config=None,
        **kwargs,
    ):
        self._setup(config, n_positions, batch_size, amp, tp_degree, context_length_estimate, neuron_config)
