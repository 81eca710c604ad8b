"""FAKE transformers_neuronx.gptneox.model.GPTNeoXForSampling (0.13.380 signature; behaviour in module.py)."""

from transformers_neuronx.module import LegacySampling


class GPTNeoXForSampling(LegacySampling):
    pass
