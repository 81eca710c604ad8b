"""FAKE modeling module (tests/fakes/README.md)."""

from neuronx_distributed_inference.models._fake_model import make

NeuronQwen3MoeForCausalLM, Qwen3MoeInferenceConfig = make(
    "NeuronQwen3MoeForCausalLM", "Qwen3MoeInferenceConfig", moe=True
)
