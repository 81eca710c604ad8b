"""FAKE entry point of optimum-neuron — a test double for machines without the Neuron SDK.

Only `NeuronModelForCausalLM` is replaced: optimum-neuron's export and load paths import
`neuronx_distributed`, which cannot be installed here. Everything else under `optimum.neuron`
(`NxDNeuronConfig`, its JSON (de)serialisation and version checks, instance-type normalisation,
`align_compilation_target`) is the REAL installed optimum-neuron: this package's `__path__` ends
with the real package directory, so those submodules resolve there.

Tests put `tests/fakes/optimum_neuron` on the PYTHONPATH of child processes only (the backend's
compile and smoke children). The test process itself keeps the real `optimum.neuron`.
"""

import os
import sys

_here = os.path.dirname(os.path.abspath(__file__))
_real = [
    d
    for d in (os.path.join(p, "optimum", "neuron") for p in sys.path if p)
    if os.path.abspath(d) != _here and os.path.isfile(os.path.join(d, "__init__.py"))
]
__path__ = [_here, _real[0]]
__version__ = "0.4.5"
FAKE_OF = "optimum-neuron 0.4.5 (Neuron SDK 2.26.1)"  # a fake: its smoke measurements are synthetic

from ._fake_causal_lm import NeuronModelForCausalLM  # noqa: E402

__all__ = ["NeuronModelForCausalLM"]
