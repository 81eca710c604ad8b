"""FAKE transformers_neuronx.mistral.model.MistralForSampling (0.13.380 signature; behaviour in module.py)."""

from transformers_neuronx.module import DecoderSampling


class MistralForSampling(DecoderSampling):
    pass
