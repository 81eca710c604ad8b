"""FAKE transformers-neuronx 0.13.380 (Neuron SDK 2.21.1) — a test double, compiles nothing.

See tests/fakes/README.md. The top-level exports of the real package (aws-neuron/transformers-neuronx
main 1ade6d74, src/transformers_neuronx/__init__.py; each class with its real base and constructor);
`__version__` is read from the distribution's
metadata (`transformers_neuronx-0.13.380.dist-info`)."""

from importlib import metadata

from transformers_neuronx.bloom.model import BloomForSampling
from transformers_neuronx.config import ContinuousBatchingConfig, NeuronConfig, QuantizationConfig
from transformers_neuronx.constants import GQA, Layout
from transformers_neuronx.gpt2.model import GPT2ForSamplingWithContextBroadcasting
from transformers_neuronx.gptj.model import GPTJForSampling
from transformers_neuronx.gptneox.model import GPTNeoXForSampling
from transformers_neuronx.llama.model import LlamaForSampling
from transformers_neuronx.mistral.model import MistralForSampling
from transformers_neuronx.mixtral.model import MixtralForSampling
from transformers_neuronx.opt.model import OPTForSampling

__version__ = metadata.version("transformers-neuronx")
__all__ = [
    "GQA",
    "BloomForSampling",
    "ContinuousBatchingConfig",
    "GPT2ForSamplingWithContextBroadcasting",
    "GPTJForSampling",
    "GPTNeoXForSampling",
    "Layout",
    "LlamaForSampling",
    "MistralForSampling",
    "MixtralForSampling",
    "NeuronConfig",
    "OPTForSampling",
    "QuantizationConfig",
]
