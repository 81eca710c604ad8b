"""FAKE `neuronx_distributed_inference.utils.constants` (tests/fakes/README.md): the keys of
`MODEL_TYPES` — what vllm-neuron's `_get_neuron_model_cls` looks an architecture up in — as each
imitated release has them (aws-neuron/neuronx-distributed-inference, src/neuronx_distributed_inference/
utils/constants.py):
- v0.6.10598 (e07f0567, SDK 2.26.1): dbrx, llama, llama4, mixtral, mllama, qwen2, qwen3, qwen3_moe;
- 0.8 (cd3abf30, "Neuron SDK Release 2.28.0"; wheel 0.8.16251): + gpt_oss, pixtral, qwen2_vl, qwen3_vl;
- 0.9 (ef2731ef, "sync code base to release-2.29-v2"): + gemma3, mistral. 0.10.18399 (SDK 2.31.1) was
  published as a wheel only: the fake gives it 0.9's keys, the last readable source.
The values are the real classes' names (`"causal-lm"` only), not the classes: the fake has modeling
code for llama, mixtral, qwen2, qwen3 and qwen3_moe only.
"""

from neuronx_distributed_inference._release import at_least

_CLASSES = {
    "dbrx": "NeuronDbrxForCausalLM",
    "llama": "NeuronLlamaForCausalLM",
    "llama4": "NeuronLlama4ForCausalLM",
    "mixtral": "NeuronMixtralForCausalLM",
    "mllama": "NeuronMllamaForCausalLM",
    "qwen2": "NeuronQwen2ForCausalLM",
    "qwen3": "NeuronQwen3ForCausalLM",
    "qwen3_moe": "NeuronQwen3MoeForCausalLM",
}
if at_least(0, 8):
    _CLASSES.update(
        gpt_oss="NeuronGptOssForCausalLM",
        pixtral="NeuronPixtralForCausalLM",
        qwen2_vl="NeuronQwen2VLForCausalLM",
        qwen3_vl="NeuronQwen3VLForCausalLM",
    )
if at_least(0, 9):
    _CLASSES.update(gemma3="NeuronGemma3ForCausalLM", mistral="NeuronMistralForCausalLM")

MODEL_TYPES = {model_type: {"causal-lm": name} for model_type, name in _CLASSES.items()}
