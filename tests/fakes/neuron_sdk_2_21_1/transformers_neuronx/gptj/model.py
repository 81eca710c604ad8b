"""FAKE transformers_neuronx.gptj.model.GPTJForSampling (0.13.380 signature; behaviour in module.py)."""

from transformers_neuronx.module import LegacySampling


class GPTJForSampling(LegacySampling):
    pass
