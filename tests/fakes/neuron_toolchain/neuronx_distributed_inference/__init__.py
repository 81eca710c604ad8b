"""FAKE neuronx-distributed-inference for neuronforge's tests (see tests/fakes/README.md)."""

FAKE = True
FAKE_OF = "neuronx-distributed-inference 0.6.10598 (Neuron SDK 2.26.1)"  # its smoke measurements are synthetic
