"""FAKE libtorch-neuronx-lite (tests/fakes/README.md): only the compile cache the vLLM Neuron plugin uses."""
