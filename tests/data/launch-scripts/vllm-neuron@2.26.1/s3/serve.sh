#!/usr/bin/env bash
# Serve the NxD Inference build with vLLM 0.11.0 + vllm-neuron 0.2.0 (OpenAI API on $PORT).
# Usage: bash serve.sh [more vLLM options, e.g. --served-model-name NAME]. Do not repeat the
# flags below with other values: vLLM would schedule for a model other than the compiled one.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
set -a; . "$here/vllm.env"; set +a
mkdir -p "$MODEL_DIR"
case "$MODEL_URI" in
  s3://*) aws s3 sync --only-show-errors "$MODEL_URI" "$MODEL_DIR" ;;
  file://*) cp -R "${MODEL_URI#file://}/." "$MODEL_DIR/" ;;
  *) echo "serve.sh: cannot download $MODEL_URI" >&2; exit 2 ;;
esac
exec vllm serve "$MODEL_DIR" \
  --tensor-parallel-size 2 \
  --max-num-seqs 4 \
  --max-model-len 128 \
  --dtype bfloat16 \
  --no-enable-prefix-caching \
  --additional-config '{"override_neuron_config": {"fused_qkv": true, "logical_nc_config": 1, "save_sharded_checkpoint": true}}' \
  --port "$PORT" \
  "$@"
