"""FAKE transformers-neuronx 0.13.380 (Neuron SDK 2.21.1) — a test double, compiles nothing.

See tests/fakes/README.md. The top-level exports of the real package (aws-neuron/transformers-neuronx
main 1ade6d74, src/transformers_neuronx/__init__.py; each class with its real base and constructor).
NeuronAutoModelForCausalLM is imported last, as in the real file: modeling_auto.py reads the model
classes off this package while the package is being imported. `__version__` is read from the distribution's metadata
(`transformers_neuronx-0.13.380.dist-info`; the real one has `version.py`). Not reproduced:
`SparseAttnConfig` (sparse_attn_utils.py) and the `testing` subpackage, which neither neuronforge nor
LMI's handler imports (tests/profiles/test_lmi_handler_imports.py lists what the handler imports)."""

from importlib import metadata

from transformers_neuronx.bloom.model import BloomForSampling
from transformers_neuronx.config import ContinuousBatchingConfig, GenerationConfig, NeuronConfig, QuantizationConfig
from transformers_neuronx.constants import GQA, Layout
from transformers_neuronx.generation_utils import HuggingFaceGenerationModelAdapter
from transformers_neuronx.gpt2.model import GPT2ForSamplingWithContextBroadcasting
from transformers_neuronx.gptj.model import GPTJForSampling
from transformers_neuronx.gptneox.model import GPTNeoXForSampling
from transformers_neuronx.llama.model import LlamaForSampling
from transformers_neuronx.mistral.model import MistralForSampling
from transformers_neuronx.mixtral.model import MixtralForSampling
from transformers_neuronx.opt.model import OPTForSampling

# isort: split
from transformers_neuronx.modeling_auto import NeuronAutoModelForCausalLM  # after the classes it maps

__version__ = metadata.version("transformers-neuronx")
FAKE_OF = "transformers-neuronx 0.13.380 (Neuron SDK 2.21.1)"  # a fake: its smoke measurements are synthetic
__all__ = [
    "GQA",
    "BloomForSampling",
    "ContinuousBatchingConfig",
    "GPT2ForSamplingWithContextBroadcasting",
    "GPTJForSampling",
    "GPTNeoXForSampling",
    "GenerationConfig",
    "HuggingFaceGenerationModelAdapter",
    "Layout",
    "LlamaForSampling",
    "MistralForSampling",
    "MixtralForSampling",
    "NeuronAutoModelForCausalLM",
    "NeuronConfig",
    "OPTForSampling",
    "QuantizationConfig",
]
