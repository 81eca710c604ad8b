#!/usr/bin/env bash
# Serve the NxD Inference build with vLLM @@VLLM:comment@@ + vllm-neuron @@VLLM_NEURON:comment@@ (OpenAI API on $PORT).
# Usage: bash serve.sh [more vLLM options, e.g. --served-model-name NAME]. Do not repeat the
# flags below with other values: vLLM would schedule for a model other than the compiled one.
set -euo pipefail
me=serve.sh
env_file=@@ENV_FILE@@
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
@@include env.sh@@
load_env "$here/$env_file"
mkdir -p "$MODEL_DIR"
case "$MODEL_URI" in
  s3://*) aws s3 sync --only-show-errors "$MODEL_URI" "$MODEL_DIR" ;;
  file://*) cp -R "${MODEL_URI#file://}/." "$MODEL_DIR/" ;;
  *) echo "serve.sh: cannot download $MODEL_URI" >&2; exit 2 ;;
esac
exec @@COMMAND:args@@
