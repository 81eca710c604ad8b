"""Where the facts neuronforge encodes about the vLLM Neuron plugin were read, each named once as a
reader can open it: AWS's pages (a URL, or `aws-neuron/aws-neuron-sdk@<commit> <path>` for the docs'
sources as read in the SDK's repository) and public code (`owner/repo@<commit> <path>`, or the URL the
release table gives: where neuronforge/profiles/releases/sources.toml holds the same source, the
constant is its URL as written there, and tests/test_citations.py checks they agree).

Messages, docstrings, the stray-environment rule (`graph_env.RULES`, rendered into docs/profiles.md)
and the profile's refusals cite these constants, so a citation changes in one place. The plugin's
compile code moved into libtorch-neuronx-lite (LNL) with vLLM Neuron 0.24, and LNL is not public: its
in-plugin 0.21 ancestor is read in public forks of vllm-project/vllm-neuron, and LNL's behaviour in a
third party's code that calls it.
"""

from __future__ import annotations

NEURON_DOCS = "https://awsdocs-neuron.readthedocs-hosted.com/en"
# The vLLM Neuron docs as the SDK's repository held them (pages dated 2026-06 to 2026-08).
PLUGIN_DOCS = "aws-neuron/aws-neuron-sdk@81ce03ae vllm-neuron/docs"
# The compile cache's layout, its remote tier (NEURON_LIBTORCH_REMOTE_CACHE from 0.24), save and promote.
CACHE_PAGE = f"{NEURON_DOCS}/latest/vllm-neuron/docs/design/compilation/compilation_cache.html"
# CPU-compile mode and the fail-closed pair ("Preventing Compilation on Production Instances").
CPU_COMPILATION = f"{PLUGIN_DOCS}/design/compilation/cpu_compilation.md"
# "On Neuron, KV cache size is baked into the compiled program (NEFF) shape"; the KV budget's inputs.
KV_SIZE = f"{PLUGIN_DOCS}/design/vllm/determine_available_memory_design.md"

# The in-plugin 0.21 cache: complete entries, `create_cache_hash`, the remote tier, locks (the release
# table's source `vllm-native-cache-key`: its URL as releases/sources.toml gives it).
CACHE_CODE = "https://gh.072103.xyz/Infinity-AI-Institute/vllm-neuron/blob/7f4cca75/vllm_neuron/compile/cache.py"
# The in-plugin 0.21 backend: a local miss with VLLM_NEURON_DISABLE_WARMUP_COMPILE raises before the remote tier.
BACKEND_CODE = "longdct/vllm-neuron@2124255a vllm_neuron/compile/backend.py"
# The in-plugin 0.21 switches and `get_neuron_compile_cache_dir`.
ENVS_CODE = "AWShtokoyo/vllm-neuron@eabd4c9f vllm_neuron/envs.py"
# A third party calling LNL 2.11.0.1.0.1284 (SDK 2.32): its cache root and NKI results (the table's `lnl-cache`).
LNL_CACHE_CODE = "https://gh.072103.xyz/foxl-ai/kiln/blob/a04d1fab/kiln/compile_cache.py"
