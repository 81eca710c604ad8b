"""FAKE modeling module (tests/fakes/README.md)."""

from neuronx_distributed_inference.models._fake_model import make

NeuronMixtralForCausalLM, MixtralInferenceConfig = make("NeuronMixtralForCausalLM", "MixtralInferenceConfig", moe=True)
