#!/usr/bin/env bash
# Fill $MODEL_DIR with the model and $VLLM_CACHE_ROOT/neuron/compile_cache with every compiled graph of
# vllm-cache.json, each file verified against the artifact's manifest or vllm-cache.json (size, sha256)
# while it streams. s3:// is read with SYNC_TOOL: auto (the default: python3 with boto3, else aws, else
# s5cmd), boto3, aws or s5cmd, each honouring AWS_ENDPOINT_URL; with boto3, SYNC_CONCURRENCY parallel
# ranged reads of SYNC_PART_MB MiB (defaults sized to the host); a file:// store is read by python3. Needs
# bash and python3 (3.8+), and a transfer tool only for s3://; what is missing is named before anything
# is fetched. Re-running is cheap: what this script verified is kept without being read again
# (.neuronforge-sync.json in each folder), so a second start costs one read of the manifest.
# Every value from vllm.env, the manifests or the environment is data: quoted, or an argument of python3.
set -euo pipefail
me=sync.sh
artifact_manifest=@@MANIFEST@@
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
@@include env.sh@@
host_model_dir="${MODEL_DIR:-}"; host_cache_root="${VLLM_CACHE_ROOT:-}"
load_env "$here/vllm.env"
MODEL_DIR="${host_model_dir:-$MODEL_DIR}"; VLLM_CACHE_ROOT="${host_cache_root:-$VLLM_CACHE_ROOT}"
export NEURON_LIBTORCH_CACHE_ROOT="$VLLM_CACHE_ROOT"
die() { printf '%s\n' "$me: $*" >&2; exit 2; }
command -v python3 >/dev/null \
  || die "python3 is not on PATH (it reads $CACHE_MANIFEST and checks each file): use an image that has it"
@@include transfer.sh@@
transfer_tool_named
cache="$VLLM_CACHE_ROOT/neuron/compile_cache"
work="$cache/.sync"
mkdir -p "$cache" "$MODEL_DIR"; rm -rf "$work"; mkdir -p "$work"; trap 'rm -rf "$work"' EXIT
# The artifact's manifest: every file of the model, with its size and sha256 (the one read of a warm start).
plan_line "$ARTIFACT_URI/$artifact_manifest" "$work" manifest.json > "$work/first"
# Every tool the fetch needs, named before anything is fetched: the plan's files are all in these two stores.
{ plan_line "$ARTIFACT_URI/$artifact_manifest" "$work" manifest.json; plan_line "$CACHE_URI/" "$work" -; } \
  > "$work/stores"
transfer_ready "$work/stores"
# The plan: every file this host must hold (uri, root, path, size, sha256, the record it is checked against);
# an entry complete here is skipped whole, the rest is staged in .<key>.sync. It is made once the manifest
# is here, by the fetcher that read it (`--then`: one python3 and one botocore for the whole start).
export MODEL_DIR ARTIFACT_URI MODEL_URI CACHE_URI
cat > "$work/plan.py" <<'PY'
import json, os, re, shutil, sys
cache_manifest, artifact_manifest, cache, keys, manifest_name = sys.argv[1:]
KEY = re.compile(r"[0-9a-f]{32}\Z")  # a cache entry's folder (neuronforge.compilation.vllm_cache.KEY)
FIX = "the store's copy is damaged or is not this build's (`neuronforge verify` names what): publish it again"
out = open(sys.stdout.fileno(), "w", encoding="utf-8", errors="surrogateescape", closefd=False)
def shown(text):  # one line, whatever the text holds
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)
def read(path, where, fix):
    try:
        with open(path, "rb") as f:
            data = json.loads(f.read().decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        sys.exit(f"sync.sh: {shown(where)}: not JSON ({exc}): {fix}")
    if not isinstance(data, dict):
        sys.exit(f"sync.sh: {shown(where)}: not a JSON object: {fix}")
    return data
def files(data, name, where, fix):
    listed = data.get(name, [])
    if not isinstance(listed, list):
        sys.exit(f"sync.sh: {shown(where)}: {name} is not a list: {fix}")
    for f in listed:
        ok = isinstance(f, dict) and isinstance(f.get("path"), str) and isinstance(f.get("sha256"), str)
        size = f.get("size") if ok else None
        if not (ok and isinstance(size, int) and not isinstance(size, bool) and size >= 0):
            sys.exit(f"sync.sh: {shown(where)}: {shown(json.dumps(f))} is not a file (path, size, sha256): {fix}")
    return listed
def field(text):  # a plan's field (launch_fetch.read_plan): backslash, tab and newline escaped
    return text.replace("\\", "\\\\").replace("\t", "\\t").replace("\n", "\\n")
def line(uri, root, path, f, against):
    out.write("\t".join(field(v) for v in (uri, root, path, str(f["size"]), f["sha256"], against)) + "\n")
artifact, model = os.environ["ARTIFACT_URI"].rstrip("/"), os.environ["MODEL_URI"].rstrip("/")
if not model.startswith(artifact + "/"):
    sys.exit(f"sync.sh: MODEL_URI {shown(model)} is not a folder of ARTIFACT_URI {shown(artifact)}: fix vllm.env")
folder = model[len(artifact) + 1:] + "/"
where = f"{artifact}/{manifest_name}"
listed = files(read(artifact_manifest, where, FIX), "files", where, FIX)
model_files = [f for f in listed if f["path"].startswith(folder)]
if not model_files:
    sys.exit(f"sync.sh: {shown(where)} lists no file of {shown(model)}: is ARTIFACT_URI this build's?")
for f in model_files:
    line(f"{artifact}/{f['path']}", os.environ["MODEL_DIR"], f["path"][len(folder):], f, "the artifact's manifest")
ours, local = os.path.basename(cache_manifest), "run the launch/ folder of the artifact as published"
m = read(cache_manifest, cache_manifest, local)
entries = m.get("entries")
if not isinstance(entries, list) or not all(isinstance(e, dict) and KEY.match(str(e.get("key"))) for e in entries):
    sys.exit(f"sync.sh: {shown(cache_manifest)}: entries is not a list of cache entries (32-hex keys): {local}")
staged = []
for e in entries:
    key = e["key"]
    listed = files(e, "files", cache_manifest, local)
    if os.path.isfile(f"{cache}/{key}/.compilation_complete") and os.path.isfile(f"{cache}/{key}/.synced"):
        continue
    shutil.rmtree(f"{cache}/.{key}.sync", ignore_errors=True)  # what an interrupted sync left
    staged.append(key)
    for f in listed:
        line(f"{os.environ['CACHE_URI']}/{key}/{f['path']}", f"{cache}/.{key}.sync", f["path"], f, ours)
for f in files(m, "nki", cache_manifest, local):  # NKI results: in place, each renamed in once verified
    line(f"{os.environ['CACHE_URI']}/{f['path']}", cache, f["path"], f, ours)
with open(keys, "w") as f:
    f.write("".join(f"{key}\n" for key in staged))
PY
# The manifest, then the plan, then every file of it, verified as it streams.
transfer_fetch "$work/first" "" --then "$work/fetch" python3 "$work/plan.py" "$here/$CACHE_MANIFEST" \
    "$work/manifest.json" "$cache" "$work/keys" "$artifact_manifest" || {
  status=$?
  if [ -f "$work/keys" ]; then
    while IFS= read -r key; do rm -rf "$cache/.$key.sync"; done < "$work/keys"
  fi
  exit "$status"
}
# Whole entries appear at once, marker included: one process for all of them (four per entry, forked one
# by one, cost a tenth of a second at 30 entries); none when every entry was here.
[ ! -s "$work/keys" ] || python3 - "$cache" "$work/keys" <<'PY'
import os, shutil, sys
cache = sys.argv[1]
for key in open(sys.argv[2]).read().split():
    staged = os.path.join(cache, f".{key}.sync")
    os.makedirs(staged, exist_ok=True)
    open(os.path.join(staged, ".synced"), "w").close()
    shutil.rmtree(os.path.join(cache, key), ignore_errors=True)
    os.rename(staged, os.path.join(cache, key))
PY
read -r fetched _ < "$work/fetch.result"
shopt -s nullglob
complete=("$cache"/*/.compilation_complete)
echo "sync.sh: $fetched fetched; ${#complete[@]} graphs in $cache"
