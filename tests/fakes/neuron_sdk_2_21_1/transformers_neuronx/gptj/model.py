"""FAKE transformers_neuronx.gptj.model.GPTJForSampling (0.13.380 signature; behaviour in module.py)."""

from transformers_neuronx.module import FakeSampling


class GPTJForSampling(FakeSampling):
    serializable = False

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
        if neuron_config is not None and neuron_config.quant is not None:
            raise NotImplementedError("Support for quantization is not yet implemented")
        self._setup(config, n_positions, batch_size, amp, tp_degree, None, neuron_config)
