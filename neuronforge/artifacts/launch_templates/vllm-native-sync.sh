#!/usr/bin/env bash
# Fill $MODEL_DIR with the model and $VLLM_CACHE_ROOT/neuron/compile_cache with every compiled graph of
# vllm-cache.json, each file verified against the artifact's manifest or vllm-cache.json (size, sha256)
# while it streams. s3:// is read with SYNC_TOOL: auto (the default: python3 with boto3, else aws, else
# s5cmd), boto3, aws or s5cmd, each honouring AWS_ENDPOINT_URL; with boto3, SYNC_CONCURRENCY parallel
# ranged reads of SYNC_PART_MB MiB (defaults sized to the host); a file:// store is read by python3. Needs
# bash and python3 (3.8+), and a transfer tool only for s3://; what is missing is named before anything
# is fetched. Re-running is cheap: what this script verified is kept without being read again
# (.neuronforge-sync.json in each folder), so a second start costs one read of the manifest.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
host_model_dir="${MODEL_DIR:-}"; host_cache_root="${VLLM_CACHE_ROOT:-}"
set -a; . "$here/vllm.env"; set +a
MODEL_DIR="${host_model_dir:-$MODEL_DIR}"; VLLM_CACHE_ROOT="${host_cache_root:-$VLLM_CACHE_ROOT}"
export NEURON_LIBTORCH_CACHE_ROOT="$VLLM_CACHE_ROOT"
me=sync.sh
die() { echo "$me: $*" >&2; exit 2; }
command -v python3 >/dev/null \
  || die "python3 is not on PATH (it reads $CACHE_MANIFEST and checks each file): use an image that has it"
@@include transfer.sh@@
transfer_tool_named
cache="$VLLM_CACHE_ROOT/neuron/compile_cache"
work="$cache/.sync"
mkdir -p "$cache" "$MODEL_DIR"; rm -rf "$work"; mkdir -p "$work"; trap 'rm -rf "$work"' EXIT
# The artifact's manifest: every file of the model, with its size and sha256 (the one read of a warm start).
printf '%s\t%s\tmanifest.json\t-\t-\t-\n' "$ARTIFACT_URI/@@MANIFEST:raw@@" "$work" > "$work/first"
# Every tool the fetch needs, named before anything is fetched: the plan's files are all in these two stores.
printf '%s\n' "$ARTIFACT_URI/@@MANIFEST:raw@@" "$CACHE_URI/" > "$work/stores"
transfer_ready "$work/stores"
# The plan: every file this host must hold (uri, root, path, size, sha256, the record it is checked against);
# an entry complete here is skipped whole, the rest is staged in .<key>.sync. It is made once the manifest
# is here, by the fetcher that read it (`--then`: one python3 and one botocore for the whole start).
export MODEL_DIR ARTIFACT_URI MODEL_URI CACHE_URI
cat > "$work/plan.py" <<'PY'
import json, os, shutil, sys
cache_manifest, artifact_manifest, cache, keys = sys.argv[1:]
artifact, model = os.environ["ARTIFACT_URI"].rstrip("/"), os.environ["MODEL_URI"].rstrip("/")
if not model.startswith(artifact + "/"):
    sys.exit(f"sync.sh: MODEL_URI {model} is not a folder of ARTIFACT_URI {artifact}: fix vllm.env")
folder = model[len(artifact) + 1:] + "/"
model_files = [f for f in json.load(open(artifact_manifest))["files"] if f["path"].startswith(folder)]
if not model_files:
    sys.exit(f"sync.sh: {artifact}/@@MANIFEST:raw@@ lists no file of {model}: is ARTIFACT_URI this build's?")
def line(uri, root, path, f, against):
    print(uri, root, path, f["size"], f["sha256"], against, sep="\t")
for f in model_files:
    line(f"{artifact}/{f['path']}", os.environ["MODEL_DIR"], f["path"][len(folder):], f, "the artifact's manifest")
m = json.load(open(cache_manifest))
staged = []
for e in m["entries"]:
    key = e["key"]
    if os.path.isfile(f"{cache}/{key}/.compilation_complete") and os.path.isfile(f"{cache}/{key}/.synced"):
        continue
    shutil.rmtree(f"{cache}/.{key}.sync", ignore_errors=True)  # what an interrupted sync left
    staged.append(key)
    for f in e["files"]:
        line(f"{os.environ['CACHE_URI']}/{key}/{f['path']}", f"{cache}/.{key}.sync", f["path"], f, "@@CACHE:raw@@")
for f in m.get("nki", []):  # NKI results: in place, each renamed in once verified, before any graph calls them
    line(f"{os.environ['CACHE_URI']}/{f['path']}", cache, f["path"], f, "@@CACHE:raw@@")
open(keys, "w").write(" ".join(staged))
PY
# The manifest, then the plan, then every file of it, verified as it streams.
transfer_fetch "$work/first" "" --then "$work/fetch" \
    python3 "$work/plan.py" "$here/$CACHE_MANIFEST" "$work/manifest.json" "$cache" "$work/keys" || {
  status=$?
  for key in $(cat "$work/keys" 2>/dev/null || true); do rm -rf "$cache/.$key.sync"; done
  exit "$status"
}
keys="$(cat "$work/keys")"
# Whole entries appear at once, marker included: one process for all of them (four per entry, forked one
# by one, cost a tenth of a second at 30 entries); none when every entry was here.
[ -z "$keys" ] || python3 - "$cache" $keys <<'PY'
import os, shutil, sys
cache = sys.argv[1]
for key in sys.argv[2:]:
    staged = os.path.join(cache, f".{key}.sync")
    os.makedirs(staged, exist_ok=True)
    open(os.path.join(staged, ".synced"), "w").close()
    shutil.rmtree(os.path.join(cache, key), ignore_errors=True)
    os.rename(staged, os.path.join(cache, key))
PY
read -r fetched _ < "$work/fetch.result"
graphs="$(ls "$cache"/*/.compilation_complete 2>/dev/null | wc -l)"
echo "sync.sh: $fetched fetched; $graphs graphs in $cache"
