"""FAKE vLLM Neuron plugin (tests/fakes/README.md): the platform `vllm.LLM` runs on. Its cache lives in
libtorch_neuronx_lite.compile.cache (0.24+); `graphs` derives the graphs the engine would trace."""
