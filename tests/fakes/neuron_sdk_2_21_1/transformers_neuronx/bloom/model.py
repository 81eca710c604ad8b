"""FAKE transformers_neuronx.bloom.model.BloomForSampling (0.13.380 signature; behaviour in module.py)."""

from transformers_neuronx.module import DecoderSampling


class BloomForSampling(DecoderSampling):
    pass
