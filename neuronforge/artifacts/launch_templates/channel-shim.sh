#!/usr/bin/env bash
# Run @@SCRIPT:comment@@ of the build the release channel @@NAME:comment@@ points to NOW: resolve.sh fetches that
# build's launch files (verified against its manifest), then its @@SCRIPT:comment@@ runs with these arguments.
set -euo pipefail
script=@@SCRIPT@@
resolve=@@RESOLVE@@
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
dir="$(bash "$here/$resolve")"
exec bash "$dir/launch/$script" "$@"
