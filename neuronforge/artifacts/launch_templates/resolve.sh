#!/usr/bin/env bash
# Resolve the release channel @@NAME:comment@@ to the build it points to NOW, and fetch that build's
# launch files (with --all: every file of the build), each checked against the build's manifest
# (size, sha256); the manifest itself is checked against the digest the channel recorded.
# Usage: bash resolve.sh [--all] [DEST]   -> prints the folder (DEST, default
#   ${NEURONFORGE_CHANNEL_DIR:-${TMPDIR:-/tmp}/neuronforge-channels}/@@SLUG:comment@@/<key12>)
# DEST must not exist, be an empty folder, or be a folder this script made (it holds .neuronforge-resolve);
# anything else is refused, untouched. The new folder is staged beside DEST and renamed into its place.
# The store is @@STORE:comment@@ (NEURONFORGE_STORE_URI overrides it, e.g. a replica).
# s3:// is read with SYNC_TOOL: auto (the default: python3 with boto3, else aws, else s5cmd), boto3, aws
# or s5cmd, each honouring AWS_ENDPOINT_URL; with boto3, SYNC_CONCURRENCY parallel ranged reads of
# SYNC_PART_MB MiB (defaults sized to the host); file:// is read by python3. Each file is verified while
# it streams; a file DEST already holds verified (.neuronforge-sync.json) is linked, not fetched or read.
# What is missing is named in one line before anything is fetched. In a pod of this channel's
# k8s-init-container.yaml, NEURONFORGE_POD_IMAGE, NEURONFORGE_POD_FAMILY and NEURONFORGE_POD_CORES say
# what the pod was made for: a build that does not fit it is refused before any of its files is fetched.
# Every value from the store, the channel or an argument is data: quoted, or an argument of python3.
set -euo pipefail
me=resolve.sh
die() { printf '%s\n' "$me: $*" >&2; exit 2; }
store_uri=@@STORE@@
channel_key=@@KEY@@
channel_name=@@NAME@@
channel_slug=@@SLUG@@
k8s_file=@@K8S@@
marker=.neuronforge-resolve
store="${NEURONFORGE_STORE_URI:-$store_uri}"
all=0
if [ "${1:-}" = --all ]; then all=1; shift; fi
command -v python3 >/dev/null \
  || die "python3 is not on PATH (it reads channel.json and the build's manifest and checks each file):" \
    "use an image that has it"
@@include transfer.sh@@
transfer_tool_named
staging=""
work="$(mktemp -d)"; trap 'rm -rf "$work" ${staging:+"$staging"}' EXIT
get() {  # get <uri> <name>: one file into $work, that no record names (channel.json, the manifest)
  plan_line "$1" "$work" "$2" > "$work/one"
  transfer_fetch "$work/one"
}
# Every file comes from $store: the tool it needs, named before anything is fetched.
plan_line "$store/$channel_key" "$work" channel.json > "$work/first"
transfer_ready "$work/first"
get "$store/$channel_key" channel.json
# The build channel.json points to, each field checked, and the folder it goes to (DEST, or the default
# one), refused unless it is ours to replace: nothing is written outside $work before both are known.
python3 - "$work/channel.json" "$store/$channel_key" "${1:-}" \
  "${NEURONFORGE_CHANNEL_DIR:-${TMPDIR:-/tmp}/neuronforge-channels}/$channel_slug" "$marker" "$work/build" <<'PY'
import json, os, re, sys
path, uri, given, parent, marker, out = sys.argv[1:]
HEX = re.compile(r"[0-9a-f]{64}\Z")
def shown(text):  # one line, whatever the text holds
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)
def damaged(problem):
    print(f"resolve.sh: {shown(uri)}: {problem}: it is not a channel record; nothing fetched (restore the "
          "store's copy, or point NEURONFORGE_STORE_URI at a replica that holds it)", file=sys.stderr)
    sys.exit(2)
def at(obj, name, where):
    if not isinstance(obj, dict):
        damaged(f"{where[:-1] or 'the record'} is not an object")
    if name not in obj:
        damaged(f"{where}{name} is missing")
    return obj[name]
def in_store(text):  # a key relative to the store's root that stays in it
    words = text.split("/")
    return text and not any(w in ("", ".", "..") for w in words) and all(c.isprintable() for c in text)
try:
    with open(path, "rb") as f:
        record = json.loads(f.read().decode("utf-8"))
except UnicodeDecodeError:
    damaged("not UTF-8 text")
except ValueError as exc:
    damaged(f"not JSON ({exc})")
build = at(at(record, "current", ""), "build", "current.")
fields = []
for name in ("key", "artifact_prefix", "manifest", "manifest_sha256"):
    value = at(build, name, "current.build.")
    if not isinstance(value, str):
        damaged(f"current.build.{name} is {shown(json.dumps(value))}, not a string")
    fields.append(value)
key, prefix, manifest, digest = fields
if not HEX.match(key):
    damaged(f"current.build.key {shown(key)!r} is not a cache key (64 hex digits)")
if not HEX.match(digest):
    damaged(f"current.build.manifest_sha256 {shown(digest)!r} is not a sha256 (64 hex digits)")
for name, value in (("artifact_prefix", prefix), ("manifest", manifest)):
    if not in_store(value):
        damaged(f"current.build.{name} {shown(value)!r} is not a key inside the store")
dest = given or os.path.join(parent, key[:12])
target = os.path.abspath(dest)
def refuse(why):
    print(f"resolve.sh: {shown(dest)}: {why}: use an empty folder or one this script made", file=sys.stderr)
    sys.exit(2)
def ours(folder):
    made = os.path.join(folder, marker)
    return os.path.isfile(made) and not os.path.islink(made)
try:
    if os.path.islink(dest):
        target = os.path.realpath(dest)
        if not (os.path.isdir(target) and ours(target)):
            refuse(f"a symbolic link to {shown(target)}, which is not a folder this script made")
    elif os.path.lexists(dest):
        if not os.path.isdir(dest):
            refuse("not a folder")
        if os.listdir(dest) and not ours(dest):
            refuse(f"it holds files this script did not put there (no {marker})")
except OSError as exc:
    refuse(f"cannot be read ({exc.strerror})")
if target == "/":
    refuse("the root folder")
with open(out, "wb") as f:  # NUL-terminated: a path may hold any other byte
    f.write(b"".join(os.fsencode(v) + b"\0" for v in (key, prefix, manifest, digest, dest, target)))
PY
{ IFS= read -r -d '' key; IFS= read -r -d '' prefix; IFS= read -r -d '' manifest; IFS= read -r -d '' digest
  IFS= read -r -d '' dest; IFS= read -r -d '' target; } < "$work/build"
get "$store/$manifest" manifest.json
# The manifest (its digest, its fields, whether the build fits this pod), then the plan: each file of the
# build this host needs, into a staging folder made beside DEST (the fetcher refuses a path leaving it).
python3 - "$work/manifest.json" "$digest" "$store/$manifest" "$work/channel.json" "$channel_name" \
  "$k8s_file" "$all" "$store/$prefix" "$target" "$work/fetch" "$store" "${key:0:12}" <<'PY'
import hashlib, json, os, re, shlex, sys, tempfile
path, digest, uri, channel, name, k8s, every, artifact, target, plan, store, short = sys.argv[1:]
HEX = re.compile(r"[0-9a-f]{64}\Z")
def shown(text):  # one line, whatever the text holds
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)
raw = open(path, "rb").read()
if hashlib.sha256(raw).hexdigest() != digest:
    print(f"resolve.sh: {shown(uri)} is not the manifest {shown(name)} recorded (sha256 differs); nothing fetched",
          file=sys.stderr)
    sys.exit(1)
def word(text):  # a bash word for text, a path that is not printable UTF-8 included (launch_script.word)
    if text.isprintable():
        return shlex.quote(text)
    def byte(c):
        if "\udc80" <= c <= "\udcff":
            return "\\x%02x" % (ord(c) - 0xDC00)
        return "\\" + c if c in "\\'" else c if c.isprintable() else "".join("\\x%02x" % b for b in c.encode())
    return "$'" + "".join(byte(c) for c in text) + "'"
def damaged(problem):
    c = json.load(open(channel))
    words = [c.get(n) for n in ("model", "profile_line", "channel")]
    move = "move the channel to another build"
    if all(isinstance(w, str) and w for w in words):
        command = ["neuronforge", "rollback", words[0], "--profile", words[1], "--channel", words[2], "--store", store]
        move += ": " + " ".join(word(w) for w in command)
    print(f"resolve.sh: {shown(uri)}: {problem}: the build's manifest is damaged; nothing fetched ({move})",
          file=sys.stderr)
    sys.exit(2)
try:
    m = json.loads(raw.decode("utf-8"))
except UnicodeDecodeError:
    damaged("not UTF-8 text")
except ValueError as exc:
    damaged(f"not JSON ({exc})")
if not isinstance(m, dict):
    damaged("not a JSON object")
files = m.get("files")
if not isinstance(files, list) or not files:
    damaged("files is not a list of the build's files")
for i, f in enumerate(files):
    if not isinstance(f, dict):
        damaged(f"files[{i}] is not an object")
    p, size, sha = f.get("path"), f.get("size"), f.get("sha256")
    if not isinstance(p, str) or any(w in ("", ".", "..") for w in p.split("/")) or not p.isprintable():
        damaged(f"files[{i}].path {shown(json.dumps(p))} is not a path inside the build")
    if not isinstance(size, int) or isinstance(size, bool) or size < 0:
        damaged(f"files[{i}].size {shown(json.dumps(size))} is not a number of bytes")
    if not isinstance(sha, str) or not HEX.match(sha):
        damaged(f"files[{i}].sha256 {shown(json.dumps(sha))} is not a sha256 (64 hex digits)")
def part(where, value):
    if value is None:
        return {}
    if not isinstance(value, dict):
        damaged(f"{where} is not an object")
    return value
profile = part("profile", m.get("profile"))
target_spec = part("request.target", part("request", m.get("request")).get("target"))
def number(field):
    value = target_spec.get(field)
    if value is None:
        return 1
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        damaged(f"request.target.{field} {shown(json.dumps(value))} is not a whole number of at least 1")
    return value
need = number("tp_degree") * number("logical_nc_config")
image, family, cores = (os.environ.get(n, "") for n in ("NEURONFORGE_POD_IMAGE", "NEURONFORGE_POD_FAMILY",
                                                        "NEURONFORGE_POD_CORES"))
if cores and not cores.isdigit():
    print(f"resolve.sh: NEURONFORGE_POD_CORES={shown(cores)} is not a whole number of NeuronCores: set it in the "
          f"channel's {k8s} as written", file=sys.stderr)
    sys.exit(2)
built = profile.get("serving_image")
instance = target_spec.get("instance_type")
instance = instance if isinstance(instance, str) else ""
why = []
if image and isinstance(built, str) and built and built != image:
    why.append(f"it serves in {shown(built)}, the pod runs {shown(image)}")
# AWS names an instance type <family>.<size> (inf2.xlarge, trn2.48xlarge): the family is before the dot.
if family and instance and instance.split(".")[0] != family:
    why.append(f"it was compiled for {shown(instance)}, the pod is placed on {shown(family)} nodes")
if cores and need > int(cores):
    why.append(f"it needs {need} physical NeuronCores, the pod holds {cores}")
if why:
    ref = profile.get("ref") if isinstance(profile.get("ref"), str) and profile.get("ref") else "no profile"
    print(f"resolve.sh: build {short} ({shown(ref)}) does not fit this pod, which the channel's {k8s} made for its "
          f"first build: {'; '.join(why)}: set the image, NEURONFORGE_POD_IMAGE, _FAMILY, _CORES and the Neuron "
          "devices in that file for this build and apply it again; none of its files fetched", file=sys.stderr)
    sys.exit(2)
parent, base = os.path.split(target)
try:
    os.makedirs(parent, exist_ok=True)
    staging = tempfile.mkdtemp(prefix=f"{base}.partial.", dir=parent)
except OSError as exc:
    print(f"resolve.sh: cannot make a folder in {shown(parent)} ({exc.strerror}): the new folder is made beside "
          "DEST, then renamed into its place: name a DEST whose folder this user may write", file=sys.stderr)
    sys.exit(1)
def field(text):  # a plan's field (launch_fetch.read_plan): backslash, tab and newline escaped
    return text.replace("\\", "\\\\").replace("\t", "\\t").replace("\n", "\\n")
with open(plan, "w", encoding="utf-8", errors="surrogateescape") as out:
    for f in files:
        if every == "1" or f["path"].startswith("launch/"):
            row = [f"{artifact}/{f['path']}", staging, f["path"], str(f["size"]), f["sha256"], "the build's manifest"]
            out.write("\t".join(field(v) for v in row) + "\n")
with open(plan + ".staging", "wb") as out:
    out.write(os.fsencode(staging) + b"\0")
PY
IFS= read -r -d '' staging < "$work/fetch.staging"
# What DEST already holds verified is linked into the new folder, not read; the rest is fetched, verified.
reuse=""; if [ -d "$target" ]; then reuse="$target"; fi
transfer_fetch "$work/fetch" "$reuse"
cp "$work/manifest.json" "$staging/manifest.json"
cp "$work/channel.json" "$staging/channel.json"
printf '%s\n' "A release channel's build, resolved by its resolve.sh, which replaces this folder whole." \
  > "$staging/$marker"
# The swap: the old folder moved aside (into a new folder of its own), the new one renamed into its place.
if [ -e "$target" ]; then
  old="$(mktemp -d -- "$target.old.XXXXXX")"
  mv -- "$target" "$old/" || { rmdir -- "$old"; exit 1; }
  if ! mv -- "$staging" "$target"; then mv -- "$old/${target##*/}" "$target"; rmdir -- "$old"; exit 1; fi
  rm -rf -- "$old"
else
  mv -- "$staging" "$target"
fi
staging=""
printf '%s\n' "$me: $channel_name -> ${key:0:12} ($(wc -l < "$work/fetch") files verified)" >&2
printf '%s\n' "$dest"
