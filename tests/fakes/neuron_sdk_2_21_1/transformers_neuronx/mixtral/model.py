"""FAKE transformers_neuronx.mixtral.model.MixtralForSampling (0.13.380 signature; behaviour in module.py)."""

from transformers_neuronx.module import DecoderSampling


class MixtralForSampling(DecoderSampling):
    pass
