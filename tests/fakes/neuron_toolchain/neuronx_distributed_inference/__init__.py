"""FAKE neuronx-distributed-inference for neuronforge's tests (see tests/fakes/README.md)."""

FAKE = True
