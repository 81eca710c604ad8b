"""A channel's launch files: `channels/<org>/<name>/<line>/<channel>/launch/`, written once when the
channel is created and never moved with it — they resolve the pointer each time they run.

    resolve.sh              read channel.json, fetch the current build's manifest (checked against the
                            digest the channel recorded) and its launch files (or, with --all, every
                            file), each checked against the manifest (size, sha256); prints the folder
    <script>.sh             one per script of the builds' launch folder (serve.sh, sync.sh, ...): resolve,
                            then run that build's script with the same arguments
    k8s-init-container.yaml an init container that resolves the channel into the pod's /launch volume
                            at every start (then runs the build's sync.sh when it has one)

So a deployment names the channel once; a promotion or a rollback reaches it on its next start, and a
host never runs bytes other than those the build's manifest lists. The scripts need bash, python3,
sha256sum and, for an s3:// store, the AWS CLI (which honours AWS_ENDPOINT_URL) — what the build's own
launch scripts need.
"""

from __future__ import annotations

import shlex

from neuronforge.records.artifact_manifest import ArtifactManifest
from neuronforge.records.channel import ChannelBuild
from neuronforge.stores import ArtifactStore

RESOLVE = "resolve.sh"
K8S = "k8s-init-container.yaml"

_RESOLVE_SH = r"""#!/usr/bin/env bash
# Resolve the release channel @@NAME@@ to the build it points to NOW, and fetch that build's
# launch files (with --all: every file of the build), each checked against the build's manifest
# (size, sha256); the manifest itself is checked against the digest the channel recorded.
# Usage: bash resolve.sh [--all] [DEST]   -> prints the folder (DEST, default
#   ${NEURONFORGE_CHANNEL_DIR:-${TMPDIR:-/tmp}/neuronforge-channels}/@@SLUG@@/<key12>)
# The store is @@STORE@@ (NEURONFORGE_STORE_URI overrides it, e.g. a replica).
set -euo pipefail
store="${NEURONFORGE_STORE_URI:-@@STORE@@}"
channel_key=@@KEY@@
all=0
if [ "${1:-}" = --all ]; then all=1; shift; fi
fetch() {  # fetch <uri> <local path>
  mkdir -p "$(dirname "$2")"
  case "$1" in
    s3://*) aws s3 cp --only-show-errors "$1" "$2" ;;
    file://*) cp "${1#file://}" "$2" ;;
    *) echo "resolve.sh: cannot download $1" >&2; exit 2 ;;
  esac
}
work="$(mktemp -d)"; trap 'rm -rf "$work"' EXIT
fetch "$store/$channel_key" "$work/channel.json"
read -r key prefix manifest digest < <(python3 - "$work/channel.json" <<'PY'
import json, sys
b = json.load(open(sys.argv[1]))["current"]["build"]
print(b["key"], b["artifact_prefix"], b["manifest"], b["manifest_sha256"])
PY
)
fetch "$store/$manifest" "$work/manifest.json"
if [ "$(sha256sum "$work/manifest.json" | cut -d' ' -f1)" != "$digest" ]; then
  echo "resolve.sh: $store/$manifest is not the manifest @@NAME@@ recorded (sha256 differs); nothing fetched" >&2
  exit 1
fi
dest="${1:-${NEURONFORGE_CHANNEL_DIR:-${TMPDIR:-/tmp}/neuronforge-channels}/@@SLUG@@/${key:0:12}}"
python3 - "$work/manifest.json" "$all" > "$work/plan" <<'PY'
import json, sys
for f in json.load(open(sys.argv[1]))["files"]:
    p = f["path"]
    if ".." in p.split("/") or p.startswith("/"):
        sys.exit(f"resolve.sh: refusing {p!r}: it leaves the build's folder")
    if sys.argv[2] == "1" or p.startswith("launch/"):
        print(f["size"], f["sha256"], p)
PY
staging="$dest.partial.$$"
rm -rf "$staging"; mkdir -p "$staging"
while read -r size sha path; do
  if [ -f "$dest/$path" ] && [ "$(stat -c %s "$dest/$path")" = "$size" ] \
     && [ "$(sha256sum "$dest/$path" | cut -d' ' -f1)" = "$sha" ]; then
    mkdir -p "$(dirname "$staging/$path")"; cp "$dest/$path" "$staging/$path"; continue
  fi
  fetch "$store/$prefix/$path" "$staging/$path"
  if [ "$(stat -c %s "$staging/$path")" != "$size" ] \
     || [ "$(sha256sum "$staging/$path" | cut -d' ' -f1)" != "$sha" ]; then
    echo "resolve.sh: $store/$prefix/$path differs from the build's manifest (size or sha256); nothing changed" >&2
    rm -rf "$staging"; exit 1
  fi
done < "$work/plan"
cp "$work/manifest.json" "$staging/manifest.json"
cp "$work/channel.json" "$staging/channel.json"
rm -rf "$dest"; mv "$staging" "$dest"
echo "resolve.sh: @@NAME@@ -> ${key:0:12} ($(wc -l < "$work/plan") files verified)" >&2
echo "$dest"
"""

_SHIM = """#!/usr/bin/env bash
# Run {script} of the build the release channel {name} points to NOW: resolve.sh fetches that
# build's launch files (verified against its manifest), then its {script} runs with these arguments.
set -euo pipefail
here="$(cd "$(dirname "${{BASH_SOURCE[0]}}")" && pwd)"
dir="$(bash "$here/{resolve}")"
exec bash "$dir/launch/{script}" "$@"
"""

_K8S = """# Kubernetes: resolve the release channel {name} at every pod start.
# Mount this channel's launch/ folder (e.g. from a ConfigMap) at /channel, give the pod read access to
# the store (IRSA / Pod Identity), and run the init container in your serving image (it needs bash,
# python3, sha256sum and the AWS CLI, as the build's own launch scripts do). The build's launch files
# land in the `launch` volume; the serving container runs them from there (/launch/launch/serve.sh),
# or reads /launch/launch/serving.properties.
initContainers:
  - name: neuronforge-channel-resolve
    image: SERVING_IMAGE  # the image of your serving container
    command:
      - bash
      - -c
      - bash /channel/{resolve} /launch && if [ -f /launch/launch/sync.sh ]; then bash /launch/launch/sync.sh; fi
    volumeMounts:
      - {{name: channel, mountPath: /channel}}
      - {{name: launch, mountPath: /launch}}
volumes:
  - {{name: launch, emptyDir: {{}}}}
"""


def render(store_uri: str, channel_key: str, name: str, slug: str, scripts: list[str]) -> dict[str, str]:
    """The launch files of a channel (name -> text)."""
    resolve = (
        _RESOLVE_SH.replace("@@STORE@@", store_uri)
        .replace("@@KEY@@", shlex.quote(channel_key))
        .replace("@@NAME@@", name)
        .replace("@@SLUG@@", slug)
    )
    files = {RESOLVE: resolve, K8S: _K8S.format(name=name, resolve=RESOLVE)}
    for script in scripts:
        if script != RESOLVE:
            files[script] = _SHIM.format(script=script, name=name, resolve=RESOLVE)
    return files


def write_launch(store: ArtifactStore, prefix: str, name: str, build: ChannelBuild) -> list[str]:
    """Write the launch files of the channel at `prefix` (its record `<prefix>/channel.json`), with a shim
    for each script of `build`'s launch folder; what exists is left as it is. Returns the keys written."""
    manifest = ArtifactManifest.read(store, build.manifest)
    scripts = [n for n in manifest.launch_files() if n.endswith(".sh") and "/" not in n]
    slug = prefix.removeprefix("channels/").replace("/", "--")
    written = []
    for file_name, text in render(store.root_uri, f"{prefix}/channel.json", name, slug, scripts).items():
        key = f"{prefix}/launch/{file_name}"
        if store.put_if_absent(text.encode(), key):
            written.append(key)
    return written
