#!/usr/bin/env bash
# Serve with the vLLM Neuron plugin (@@REF:comment@@): sync the compiled graphs, then `vllm serve` with
# the exact command they were compiled for and compiling forbidden. Usage: bash serve.sh [more vLLM
# options that do not change the graphs, e.g. --served-model-name NAME].
set -euo pipefail
me=serve.sh
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
@@include env.sh@@
host_model_dir="${MODEL_DIR:-}"; host_cache_root="${VLLM_CACHE_ROOT:-}"
load_env "$here/vllm.env"
export MODEL_DIR="${host_model_dir:-$MODEL_DIR}" VLLM_CACHE_ROOT="${host_cache_root:-$VLLM_CACHE_ROOT}"
export NEURON_LIBTORCH_CACHE_ROOT="$VLLM_CACHE_ROOT"
bash "$here/sync.sh"
exec vllm serve "$MODEL_DIR" \
  @@FLAGS:args@@ \
  --port "$PORT" "$@"
