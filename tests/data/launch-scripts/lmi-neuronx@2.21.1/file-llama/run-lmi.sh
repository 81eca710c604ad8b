#!/usr/bin/env bash
# Start LMI on this artifact (lmi-neuronx@2.21.1) with Docker, wherever its store is mounted on this host.
# serving.properties and lmi.env name LMI's container paths (/opt/ml/model); this script puts them there:
# a run folder holding serving.properties and lmi.env is mounted at /opt/ml/model (where LMI reads
# serving.properties), the artifact's split/ read-only at /opt/ml/model/split, and, for a class without
# load(dir) (GPT-J, GPT-NeoX), the NEFF cache entries neff-cache.json lists are copied into the run
# folder's neuron-cache/ (NEURON_COMPILE_CACHE_URL). Then it runs the docker command, or prints it.
# Usage: bash run-lmi.sh [--print]
#   STORE_ROOT    the folder the store is mounted at (default: found from where this script is)
#   ARTIFACT_DIR  the artifact's folder (default: the folder above launch/)
#   LMI_RUN_DIR   the run folder (default: ${TMPDIR:-/tmp}/neuronforge-lmi/0123456789ab)
#   LMI_PORT      the host port for LMI's 8080 (default 8080); LMI_IMAGE (default deepjavalibrary/djl-serving:0.33.0-pytorch-inf2)
# Needs bash, python3 (GPT-J/NeoX: it reads neff-cache.json) and, without --print, docker.
# Every value from the artifact, its records or the environment is data: quoted, or an argument of python3.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)"
die() { echo "run-lmi.sh: $*" >&2; exit 2; }
print=0
case "${1:-}" in --print) print=1 ;; "") ;; *) die "unknown argument $1: usage: bash run-lmi.sh [--print]" ;; esac
kind=local; artifact_prefix=artifacts/hf/org/model/rev/lmi-neuronx-inf2.xlarge-tp2-b4-s128-bf16/0123456789ab; cache_prefix=neuron-cache
key=0123456789ab; neuron_devices=1; image=deepjavalibrary/djl-serving:0.33.0-pytorch-inf2
run="${LMI_RUN_DIR:-${TMPDIR:-/tmp}/neuronforge-lmi/$key}"
for f in serving.properties lmi.env neff-cache.json; do
  [ -f "$here/$f" ] || die "$here/$f is missing: run the launch/ folder of the artifact as published"
done
mkdir -p "$run"
cp "$here/serving.properties" "$here/lmi.env" "$run/"
mounts=(-v "$run:/opt/ml/model")
if [ "$kind" != s3 ]; then
  artifact="${ARTIFACT_DIR:-$(cd "$here/.." && pwd -P)}"
  [ -f "$artifact/split/model/config.json" ] \
    || die "$artifact/split/model/config.json is missing: set ARTIFACT_DIR to the folder the artifact is at"
  mkdir -p "$run/split"
  mounts+=(-v "$artifact/split:/opt/ml/model/split:ro")
fi
if [ "$kind" = local ] && ! compgen -G "$artifact/split/neff/*.neff" > /dev/null; then
  die "$artifact/split/neff/ holds no .neff files: LMI's model.load would find no graph"
fi
if [ "$kind" = local-cache ]; then
  if [ -z "${STORE_ROOT:-}" ]; then
    case "$artifact" in
      */"$artifact_prefix") STORE_ROOT="${artifact%/"$artifact_prefix"}" ;;
      *) die "$artifact is not at $artifact_prefix in a store: set STORE_ROOT to the folder the store is mounted at" ;;
    esac
  fi
  command -v python3 > /dev/null || die "python3 is not on PATH (it reads neff-cache.json)"
  cache="$STORE_ROOT/$cache_prefix"
  # The entries neff-cache.json lists, each a folder inside the cache (one line each: checked printable).
  python3 - "$here/neff-cache.json" > "$run/.entries" <<'PY'
import json, sys
def inside(text):
    return isinstance(text, str) and not any(w in ("", ".", "..") for w in text.split("/")) and text.isprintable()
try:
    c = json.load(open(sys.argv[1], encoding="utf-8"))
except (UnicodeDecodeError, ValueError) as exc:
    sys.exit(f"run-lmi.sh: {sys.argv[1]}: not JSON ({exc}): run the launch/ folder of the artifact as published")
entries = c.get("entries") if isinstance(c, dict) else None
if not (isinstance(entries, list) and inside(c.get("compiler_dir")) and all(inside(e) for e in entries)):
    sys.exit(f"run-lmi.sh: {sys.argv[1]}: compiler_dir and entries are not folders inside the NEFF cache: run the "
             "launch/ folder of the artifact as published")
for e in entries:
    print(c["compiler_dir"] + "/" + e)
PY
  while read -r entry; do
    [ -f "$cache/$entry/model.done" ] \
      || die "$cache/$entry is not a complete NEFF cache entry (no model.done): set STORE_ROOT to the store's folder"
    dest="$run/neuron-cache/$entry"
    if [ ! -f "$dest/model.done" ]; then  # whole entries, model.done included, appear at once
      rm -rf "$dest.partial"; mkdir -p "$(dirname "$dest")"
      cp -R "$cache/$entry" "$dest.partial"; rm -rf "$dest"; mv "$dest.partial" "$dest"
    fi
  done < "$run/.entries"
  rm -f "$run/.entries"
fi
devices=()
for ((i = 0; i < neuron_devices; i++)); do devices+=(--device "/dev/neuron$i"); done
cmd=(docker run --rm -p "${LMI_PORT:-8080}:8080" "${devices[@]}" "${mounts[@]}" --env-file "$run/lmi.env")
for name in AWS_REGION AWS_DEFAULT_REGION AWS_ACCESS_KEY_ID AWS_SECRET_ACCESS_KEY AWS_SESSION_TOKEN AWS_ENDPOINT_URL; do
  if [ -n "${!name:-}" ]; then cmd+=(-e "$name"); fi  # the name only: docker passes the host's value
done
cmd+=("${LMI_IMAGE:-$image}")
printf '%q ' "${cmd[@]}"; echo
if [ "$print" = 1 ]; then exit 0; fi
command -v docker > /dev/null || die "docker is not on PATH: run the command above where Docker is"
exec "${cmd[@]}"
