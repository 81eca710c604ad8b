"""Which model types each backend can compile.

- `optimum`: optimum-neuron 0.4.5 registers these for `text-generation` inference
  (`optimum/neuron/models/inference/auto_models.py`; note: no `mistral` there).
- `nxdi`: NxD Inference model classes in its demo map (llama, mistral, mixtral, qwen2, qwen3,
  qwen3_moe; dbrx and gemma3 exist but neuronforge does not plan them yet).
- `cpu`: the local ahead-of-time backend, over transformers' own modeling code for the dense
  Llama-layout families.
"""

from __future__ import annotations

BACKEND_ARCHITECTURES: dict[str, frozenset[str]] = {
    "optimum": frozenset(
        {"granite", "llama", "llama4_text", "mixtral", "phi3", "qwen2", "qwen3", "qwen3_moe", "smollm3"}
    ),
    "nxdi": frozenset({"llama", "mistral", "mixtral", "qwen2", "qwen3", "qwen3_moe"}),
    "cpu": frozenset({"llama", "mistral", "qwen2", "qwen3"}),
}


def supported_architectures(backend: str) -> frozenset[str]:
    return BACKEND_ARCHITECTURES.get(backend, frozenset())
