#!/usr/bin/env bash
# Serve the export with optimum-neuron 0.4.5's vLLM platform (OpenAI API on $PORT).
# Usage: bash serve.sh [extra vLLM options, e.g. --served-model-name NAME]
# The folder is downloaded first: optimum-cli reads a local folder (or a Hub id), not s3://.
# The flags below are the export's batch size, sequence length and tensor parallel size;
# optimum-cli neuron serve refuses other values (it also checks the instance type).
set -euo pipefail
me=serve.sh
env_file=optimum-neuron.env
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
load_env "$here/$env_file"
case "$MODEL_URI" in
  s3://*) mkdir -p "$MODEL_DIR"; aws s3 sync --only-show-errors "$MODEL_URI" "$MODEL_DIR" ;;
  file://*) MODEL_DIR="${MODEL_URI#file://}" ;;
  *) MODEL_DIR="$MODEL_URI" ;;
esac
exec optimum-cli neuron serve --model "$MODEL_DIR" --tensor_parallel_size 2 --batch_size 4 --sequence_length 128 --port "$PORT" "$@"
