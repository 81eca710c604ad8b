#!/usr/bin/env bash
# Resolve the release channel @@NAME:comment@@ to the build it points to NOW, and fetch that build's
# launch files (with --all: every file of the build), each checked against the build's manifest
# (size, sha256); the manifest itself is checked against the digest the channel recorded.
# Usage: bash resolve.sh [--all] [DEST]   -> prints the folder (DEST, default
#   ${NEURONFORGE_CHANNEL_DIR:-${TMPDIR:-/tmp}/neuronforge-channels}/@@SLUG:comment@@/<key12>)
# The store is @@STORE:comment@@ (NEURONFORGE_STORE_URI overrides it, e.g. a replica).
# s3:// is read with SYNC_TOOL: auto (the default: python3 with boto3, else aws, else s5cmd), boto3, aws
# or s5cmd, each honouring AWS_ENDPOINT_URL; with boto3, SYNC_CONCURRENCY parallel ranged reads of
# SYNC_PART_MB MiB (defaults sized to the host); file:// is read by python3. Each file is verified while
# it streams; a file DEST already holds verified (.neuronforge-sync.json) is linked, not fetched or read.
# What is missing is named in one line before anything is fetched. In a pod of this channel's
# k8s-init-container.yaml, NEURONFORGE_POD_IMAGE, NEURONFORGE_POD_FAMILY and NEURONFORGE_POD_CORES say
# what the pod was made for: a build that does not fit it is refused before any of its files is fetched.
set -euo pipefail
me=resolve.sh
die() { echo "$me: $*" >&2; exit 2; }
store="${NEURONFORGE_STORE_URI:-@@STORE:raw@@}"
channel_key=@@KEY@@
all=0
if [ "${1:-}" = --all ]; then all=1; shift; fi
command -v python3 >/dev/null \
  || die "python3 is not on PATH (it reads channel.json and the build's manifest and checks each file):" \
    "use an image that has it"
@@include transfer.sh@@
transfer_tool_named
work="$(mktemp -d)"; trap 'rm -rf "$work"' EXIT
get() {  # get <uri> <name>: one file into $work, that no record names (channel.json, the manifest)
  printf '%s\t%s\t%s\t-\t-\t-\n' "$1" "$work" "$2" > "$work/one"
  transfer_fetch "$work/one"
}
# Every file comes from $store: the tool it needs, named before anything is fetched.
printf '%s\t%s\tchannel.json\t-\t-\t-\n' "$store/$channel_key" "$work" > "$work/first"
transfer_ready "$work/first"
get "$store/$channel_key" channel.json
read -r key prefix manifest digest < <(python3 - "$work/channel.json" <<'PY'
import json, sys
b = json.load(open(sys.argv[1]))["current"]["build"]
print(b["key"], b["artifact_prefix"], b["manifest"], b["manifest_sha256"])
PY
)
get "$store/$manifest" manifest.json
python3 - "$work/manifest.json" "${key:0:12}" "$digest" "$store/$manifest" <<'PY'
import hashlib, json, os, sys
raw = open(sys.argv[1], "rb").read()
if hashlib.sha256(raw).hexdigest() != sys.argv[3]:
    print(f"resolve.sh: {sys.argv[4]} is not the manifest @@NAME:raw@@ recorded (sha256 differs); nothing fetched",
          file=sys.stderr)
    sys.exit(1)
m = json.loads(raw)
profile = m.get("profile") if isinstance(m.get("profile"), dict) else {}
request = m.get("request") if isinstance(m.get("request"), dict) else {}
target = request.get("target") if isinstance(request.get("target"), dict) else {}
image, family, cores = (os.environ.get(n, "") for n in ("NEURONFORGE_POD_IMAGE", "NEURONFORGE_POD_FAMILY",
                                                        "NEURONFORGE_POD_CORES"))
built = profile.get("serving_image")
instance = str(target.get("instance_type") or "")
why = []
if image and isinstance(built, str) and built and built != image:
    why.append(f"it serves in {built}, the pod runs {image}")
# AWS names an instance type <family>.<size> (inf2.xlarge, trn2.48xlarge): the family is before the dot.
if family and instance and instance.split(".")[0] != family:
    why.append(f"it was compiled for {instance}, the pod is placed on {family} nodes")
need = int(target.get("tp_degree") or 1) * int(target.get("logical_nc_config") or 1)
if cores and need > int(cores):
    why.append(f"it needs {need} physical NeuronCores, the pod holds {cores}")
if why:
    print(f"resolve.sh: build {sys.argv[2]} ({profile.get('ref') or 'no profile'}) does not fit this pod, which "
          f"the channel's @@K8S:raw@@ made for its first build: {'; '.join(why)}: set the image, NEURONFORGE_POD_IMAGE, "
          "_FAMILY, _CORES and the Neuron devices in that file for this build and apply it again; none of its "
          "files fetched", file=sys.stderr)
    sys.exit(2)
PY
dest="${1:-${NEURONFORGE_CHANNEL_DIR:-${TMPDIR:-/tmp}/neuronforge-channels}/@@SLUG:raw@@/${key:0:12}}"
staging="$dest.partial.$$"
rm -rf "$staging"; mkdir -p "$staging"
# The plan: each file of the build this host needs (the fetcher refuses a path that leaves the folder).
python3 - "$work/manifest.json" "$all" "$store/$prefix" "$staging" > "$work/fetch" <<'PY'
import json, sys
manifest, every, uri, staging = sys.argv[1:]
for f in json.load(open(manifest))["files"]:
    if every == "1" or f["path"].startswith("launch/"):
        print(f"{uri}/{f['path']}", staging, f["path"], f["size"], f["sha256"], "the build's manifest", sep="\t")
PY
# What DEST already holds verified is linked into the new folder, not read; the rest is fetched, verified.
transfer_fetch "$work/fetch" "$dest" || { status=$?; rm -rf "$staging"; exit "$status"; }
cp "$work/manifest.json" "$staging/manifest.json"
cp "$work/channel.json" "$staging/channel.json"
rm -rf "$dest"; mv "$staging" "$dest"
echo "resolve.sh: @@NAME:raw@@ -> ${key:0:12} ($(wc -l < "$work/fetch") files verified)" >&2
echo "$dest"
