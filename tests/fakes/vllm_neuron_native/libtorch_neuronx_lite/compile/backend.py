"""FAKE libtorch-neuronx-lite `compile/backend.py`: the compiler arguments a graph is hashed and compiled
with. `compile()` normalises them before hashing "so the cache key reflects what neuroncc_compile will
actually run" (in-plugin 0.21: longdct/vllm-neuron@2124255a vllm_neuron/compile/backend.py; LNL's own
`_apply_platform_compiler_args` is named by foxl-ai/kiln@a04d1fab kiln/compile_cache.py).

NEURON_CC_FLAGS: the SDK's compiler docs say a framework plugin forwards options through it
(aws-neuron-sdk@81ce03ae compiler/about-neuronx-cc.rst l.34-37) and vLLM Neuron's own tutorials set it
(tutorial-qwen3-vl-32b.md:53); whether LNL appends it to the HASHED args is UNVERIFIED (the 0.21 hash
reads only options["compiler_args"]). The fake appends it before hashing: the case in which a flag set
on a compile worker and not in the launch files changes every key."""

import os
import shlex

from libtorch_neuronx_lite.compile.cache import _parse_compiler_args


def _apply_platform_compiler_args(options):
    """`options` with NEURON_CC_FLAGS's words after the runner's `compiler_args` (a list)."""
    args = _parse_compiler_args(options.get("compiler_args")) + shlex.split(os.environ.get("NEURON_CC_FLAGS", ""))
    return {**options, "compiler_args": args}
