#!/usr/bin/env bash
# Serve with the vLLM Neuron plugin (vllm-neuron-native@2.33.0): sync the compiled graphs, then `vllm serve` with
# the exact command they were compiled for and compiling forbidden. Usage: bash serve.sh [more vLLM
# options that do not change the graphs, e.g. --served-model-name NAME].
set -euo pipefail
me=serve.sh
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# -- reading the launch env file (neuronforge/artifacts/launch_templates/env.sh) ---------------------
# load_env FILE: export each KEY=VALUE line of FILE with VALUE as it is written, as `docker run --env-file`
# reads it — never run as shell text, so a value holding $( ) ` ; or quotes (a store's path can) is that
# text and nothing runs. A name that changes how this host runs commands (PATH, LD_*, BASH_ENV, ...) is
# refused: no launch env file sets one.
load_env() {
  local line name n=0
  [ -f "$1" ] || { printf '%s\n' "$me: $1 is missing: run the launch/ folder of the artifact as published" >&2; exit 2; }
  while IFS= read -r line || [ -n "$line" ]; do
    n=$((n + 1))
    case "$line" in ''|'#'*) continue ;; esac
    name="${line%%=*}"
    case "$name" in
      "$line"|''|[0-9]*|*[!A-Za-z0-9_]*)
        printf '%s\n' "$me: $1 line $n is not KEY=VALUE: run the launch/ folder of the artifact as published" >&2
        exit 2 ;;
      PATH|IFS|ENV|BASH_ENV|BASHOPTS|SHELLOPTS|CDPATH|GLOBIGNORE|PS4|PROMPT_COMMAND|LD_*|PYTHON*|BASH_FUNC_*)
        printf '%s\n' "$me: $1 line $n sets $name, which would change how this host runs commands: no launch env file sets it; run the launch/ folder of the artifact as published" >&2
        exit 2 ;;
    esac
    export "$name=${line#*=}"
  done < "$1"
}
# -- end of reading the launch env file ----------------------------------------------------------------
host_model_dir="${MODEL_DIR:-}"; host_cache_root="${VLLM_CACHE_ROOT:-}"
load_env "$here/vllm.env"
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
