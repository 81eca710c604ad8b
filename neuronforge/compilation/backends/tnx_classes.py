"""What each transformers-neuronx 0.13 `*ForSampling` class can build, per model family: the limits
the planner applies before any download when a target's profile compiles with the `tnx` backend.

Read from aws-neuron/transformers-neuronx at 1ade6d74 (0.13, "Sync internal repo to external Dec 12
2024"), src/transformers_neuronx/<family>/{model,config}.py, and from the Neuron developer guide for
transformers-neuronx (https://awsdocs-neuron.readthedocs-hosted.com/en/latest/archive/transformers-neuronx/
transformers-neuronx-developer-guide.html, archived):
- "The number of attention heads needs to be divisible by the tensor-parallelism degree" (guide,
  tensor-parallelism principles; its examples: opt-13b's 40 heads, opt-30b's 56, gpt2-xl's 25, which
  "runs without tensor-parallelism only") — the planner's `heads_divisible` check, for every class.
- "the Neuron runtime supports tensor-parallelism degrees 1, 2, 8, and 32 on Trn1 and supports
  tensor-parallelism degrees 1, 2, 4, 8, and 24 on Inf2" (guide, principle 3): `GUIDE_TP`.
- `amp` is one of 'bf16', 'f16', 'f32' for every class (guide, compile-time configurations); the
  target's dtypes are exactly those three.
- `context_length_estimate` "is not supported in GPTNeoXForSampling and GPTJForSampling" (guide);
  their `__init__` builds one program per power-of-two n_positions bucket and no context-encoding
  network (gptj/model.py, gptneox/model.py).
- GPT-J and GPT-NeoX: quantization raises NotImplementedError (gptj/model.py, gptneox/model.py);
  the lmi-neuronx profile refuses int8 for them (`NO_INT8`).
- OPT: `do_layer_norm_before=False` raises NotImplementedError (opt/config.py OPTConfig), and so does
  `ffn_dim != 4 * hidden_size` (opt/config.py opt_config_to_gpt2_config).
- GPT-NeoX: `use_parallel_residual=False` raises NotImplementedError (gptneox/model.py).
- GPT-2, OPT, GPT-J: n_positions may not exceed the position table (gpt2/model.py, opt/model.py,
  gptj/model.py raise ValueError "Sequence length ... cannot be larger than position embedding's
  context size"); GPT-NeoX's rotary embeddings are bounded by max_position_embeddings the same way
  (gptneox/config.py sets n_ctx from it) — the planner's `sequence_length` check. BLOOM uses ALiBi:
  no limit from the config (bloom/model.py takes any n_positions).
- GQA options (`group_query_attention`, `shard_over_sequence`) exist only for the GQA classes
  (llama, mistral, mixtral); the five families here are multi-head attention: nothing to choose.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from neuronforge.spec.modelconfig import ModelArch
    from neuronforge.spec.target import TargetSpec

SOURCE = "transformers-neuronx 0.13 (1ade6d74)"
# model_type -> the *ForSampling class LMI loads for it
CLASSES = {
    "gpt2": "GPT2ForSampling",
    "opt": "OPTForSampling",
    "bloom": "BloomForSampling",
    "gptj": "GPTJForSampling",
    "gpt_neox": "GPTNeoXForSampling",
    "llama": "LlamaForSampling",
    "mistral": "MistralForSampling",
    "mixtral": "MixtralForSampling",
}
AMP = ("bf16", "f16", "f32")  # every class
GUIDE_TP = {"trn1": (1, 2, 8, 32), "trn1n": (1, 2, 8, 32), "inf2": (1, 2, 4, 8, 24)}
NO_CONTEXT_LENGTH_ESTIMATE = frozenset({"gptj", "gpt_neox"})
GQA_CLASSES = frozenset({"llama", "mistral", "mixtral"})
# BloomForSampling's default n_positions, the sequence lengths a sweep walks when ALiBi sets no limit
BLOOM_DEFAULT_N_POSITIONS = 2048


def guide_tps(family: str, cores: int) -> list[int] | None:
    """The guide's tp degrees on an instance of `family` with `cores` NeuronCores (None: not in the guide)."""
    if family not in GUIDE_TP:
        return None
    return [tp for tp in GUIDE_TP[family] if tp <= cores]


def class_problems(arch: ModelArch, target: TargetSpec) -> list[str]:
    """Why the family's transformers-neuronx class cannot build `target` for `arch`, each with the fix."""
    cls = CLASSES.get(arch.model_type, arch.model_type)
    out: list[str] = []
    inst = target.instance
    allowed = guide_tps(inst.family, inst.cores())
    if allowed is not None and target.tp_degree not in allowed:
        good = [tp for tp in allowed if arch.num_heads % tp == 0]
        out.append(
            f"tp={target.tp_degree}: the transformers-neuronx guide's Neuron runtime supports tensor-parallelism "
            f"degrees {list(GUIDE_TP[inst.family])} on {inst.family}; use tp in {good} on {inst.name}"
        )
    if arch.model_type in NO_CONTEXT_LENGTH_ESTIMATE:
        t = target.normalized()
        if t.context_encoding_buckets:
            out.append(
                f"context_encoding_buckets {list(t.context_encoding_buckets)}: {cls} has no context_length_estimate "
                f"(the guide: not supported in GPTNeoXForSampling and GPTJForSampling; {SOURCE}); leave them unset"
            )
        if t.max_context_length is not None and t.max_context_length != t.sequence_length:
            out.append(
                f"max_context_length={t.max_context_length}: {cls} encodes the prompt in its n_positions buckets and "
                f"has no separate context length (no context_length_estimate, {SOURCE}); leave it unset"
            )
    if arch.model_type == "opt":
        if not arch.layer_norm_before:
            out.append(
                f"do_layer_norm_before=false (a post-norm OPT such as opt-350m): {cls} raises NotImplementedError "
                f"({SOURCE} opt/config.py); use another OPT size or another profile"
            )
        if arch.intermediate_size != 4 * arch.hidden_size:
            out.append(
                f"ffn_dim {arch.intermediate_size} != 4 x hidden_size {arch.hidden_size}: {cls} raises "
                f"NotImplementedError ({SOURCE} opt/config.py opt_config_to_gpt2_config); use another profile"
            )
    if arch.model_type == "gpt_neox" and not arch.parallel_residual:
        out.append(
            f"use_parallel_residual=false: {cls} raises NotImplementedError ({SOURCE} gptneox/model.py); "
            "use another profile"
        )
    return out
