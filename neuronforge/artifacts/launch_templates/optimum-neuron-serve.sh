#!/usr/bin/env bash
# Serve the export with optimum-neuron @@VERSION:comment@@'s vLLM platform (OpenAI API on $PORT).
# Usage: bash serve.sh [extra vLLM options, e.g. --served-model-name NAME]
# The folder is downloaded first: optimum-cli reads a local folder (or a Hub id), not s3://.
# The flags below are the export's batch size, sequence length and tensor parallel size;
# optimum-cli neuron serve refuses other values (it also checks the instance type).
set -euo pipefail
me=serve.sh
env_file=@@ENV_FILE@@
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
@@include env.sh@@
load_env "$here/$env_file"
case "$MODEL_URI" in
  s3://*) mkdir -p "$MODEL_DIR"; aws s3 sync --only-show-errors "$MODEL_URI" "$MODEL_DIR" ;;
  file://*) MODEL_DIR="${MODEL_URI#file://}" ;;
  *) MODEL_DIR="$MODEL_URI" ;;
esac
exec optimum-cli neuron serve --model "$MODEL_DIR" --tensor_parallel_size @@TP@@ --batch_size @@BATCH@@ --sequence_length @@SEQ@@ --port "$PORT" "$@"
