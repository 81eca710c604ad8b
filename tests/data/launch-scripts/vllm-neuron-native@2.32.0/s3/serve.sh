#!/usr/bin/env bash
# Serve with the vLLM Neuron plugin (vllm-neuron-native@2.32.0): sync the compiled graphs, then `vllm serve` with
# the exact command they were compiled for and compiling forbidden. Usage: bash serve.sh [more vLLM
# options that do not change the graphs, e.g. --served-model-name NAME].
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
host_model_dir="${MODEL_DIR:-}"; host_cache_root="${VLLM_CACHE_ROOT:-}"
set -a; . "$here/vllm.env"; set +a
export MODEL_DIR="${host_model_dir:-$MODEL_DIR}" VLLM_CACHE_ROOT="${host_cache_root:-$VLLM_CACHE_ROOT}"
export NEURON_LIBTORCH_CACHE_ROOT="$VLLM_CACHE_ROOT"
bash "$here/sync.sh"
exec vllm serve "$MODEL_DIR" \
  --tensor-parallel-size 4 \
  --max-model-len 256 \
  --max-num-seqs 2 \
  --max-num-batched-tokens 256 \
  --block-size 32 \
  --num-gpu-blocks-override 17 \
  --dtype bfloat16 \
  --no-enable-prefix-caching \
  --port "$PORT" "$@"
