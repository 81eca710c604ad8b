#!/usr/bin/env bash
# Run sync.sh of the build the release channel builtin:tiny-llama · vllm-neuron-native · stable points to NOW: resolve.sh fetches that
# build's launch files (verified against its manifest), then its sync.sh runs with these arguments.
set -euo pipefail
script=sync.sh
resolve=resolve.sh
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
dir="$(bash "$here/$resolve")"
exec bash "$dir/launch/$script" "$@"
