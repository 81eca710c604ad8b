"""A channel's launch files: `channels/<org>/<name>/<line>/<channel>/launch/`, written once when the
channel is created and never moved with it — they resolve the pointer each time they run.

    resolve.sh              read channel.json, fetch the current build's manifest (checked against the
                            digest the channel recorded) and its launch files (or, with --all, every
                            file), each checked against the manifest (size, sha256); prints the folder
    <script>.sh             one per script of the builds' launch folder (serve.sh, sync.sh, ...): resolve,
                            then run that build's script with the same arguments
    k8s-init-container.yaml a whole Kubernetes manifest, `kubectl apply -f` as written (`_k8s`): a
                            ConfigMap holding resolve.sh and, for a line whose builds have serve.sh, a
                            Deployment whose init container resolves the channel into the pod's launch
                            volume at every start (then runs the build's sync.sh when it has one) and
                            whose container runs the build's serve.sh

So a deployment names the channel once; a promotion or a rollback reaches it on its next start, and a
host never runs bytes other than those the build's manifest lists. The scripts need bash, python3
and, for an s3:// store, a transfer tool — python3 with boto3, the AWS CLI or s5cmd, chosen and checked
before anything is fetched by the same functions as a build's sync.sh (`transfer_sh`), which verify each
file as it streams and keep what a host already holds verified (`launch_fetch`).

The manifest is written once, from the build the channel is created with; the builds it may point to
later are of the same profile line but not always of the same version (another image) or target (other
Neuron devices). The Deployment is made for that first build, and says so to resolve.sh
(NEURONFORGE_POD_IMAGE, NEURONFORGE_POD_FAMILY, NEURONFORGE_POD_CORES): a build that serves in another
image, was compiled for another instance family or needs more NeuronCores is refused in one line before
any of its files is fetched, instead of starting a server that cannot load it.
"""

from __future__ import annotations

import hashlib
import re
import shlex
from dataclasses import dataclass
from typing import Any

from neuronforge.artifacts import k8s_manifest as k8s
from neuronforge.artifacts.transfer_sh import FUNCTIONS
from neuronforge.records.artifact_manifest import ArtifactManifest
from neuronforge.records.channel import ChannelBuild
from neuronforge.spec.instances import INSTANCES
from neuronforge.stores import ArtifactStore

RESOLVE = "resolve.sh"
K8S = "k8s-init-container.yaml"
# Where the pod holds what it resolves: the channel's resolve.sh (ConfigMap), the build's files
# (emptyDir; resolve.sh replaces the folder `build` below it, never the mount point), and, for a build
# with sync.sh (vllm-neuron-native), the model and the plugin's cache (emptyDirs: local disk, which the
# plugin requires), named to sync.sh and serve.sh by MODEL_DIR and VLLM_CACHE_ROOT, which they honour.
CHANNEL_MOUNT = "/channel"
LAUNCH_MOUNT = "/launch"
BUILD_DIR = f"{LAUNCH_MOUNT}/build"
MODEL_MOUNT = "/var/lib/neuronforge/model"
CACHE_MOUNT = "/var/cache/neuronforge/vllm"
# An image no build names: the Deployment is complete, but its image is the operator's to set (the
# kubelet reports InvalidImageName at once: upper case is no image reference).
NO_IMAGE = "SET-THE-SERVING-IMAGE"
POD_ENV = ("NEURONFORGE_POD_IMAGE", "NEURONFORGE_POD_FAMILY", "NEURONFORGE_POD_CORES")

_RESOLVE_SH = r"""#!/usr/bin/env bash
# Resolve the release channel @@NAME@@ to the build it points to NOW, and fetch that build's
# launch files (with --all: every file of the build), each checked against the build's manifest
# (size, sha256); the manifest itself is checked against the digest the channel recorded.
# Usage: bash resolve.sh [--all] [DEST]   -> prints the folder (DEST, default
#   ${NEURONFORGE_CHANNEL_DIR:-${TMPDIR:-/tmp}/neuronforge-channels}/@@SLUG@@/<key12>)
# The store is @@STORE@@ (NEURONFORGE_STORE_URI overrides it, e.g. a replica).
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
store="${NEURONFORGE_STORE_URI:-@@STORE@@}"
channel_key=@@KEY@@
all=0
if [ "${1:-}" = --all ]; then all=1; shift; fi
command -v python3 >/dev/null \
  || die "python3 is not on PATH (it reads channel.json and the build's manifest and checks each file):" \
    "use an image that has it"
"""
_RESOLVE_BODY = r"""transfer_tool_named
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
    print(f"resolve.sh: {sys.argv[4]} is not the manifest @@NAME@@ recorded (sha256 differs); nothing fetched",
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
          f"the channel's @@K8S@@ made for its first build: {'; '.join(why)}: set the image, NEURONFORGE_POD_IMAGE, "
          "_FAMILY, _CORES and the Neuron devices in that file for this build and apply it again; none of its "
          "files fetched", file=sys.stderr)
    sys.exit(2)
PY
dest="${1:-${NEURONFORGE_CHANNEL_DIR:-${TMPDIR:-/tmp}/neuronforge-channels}/@@SLUG@@/${key:0:12}}"
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
echo "resolve.sh: @@NAME@@ -> ${key:0:12} ($(wc -l < "$work/fetch") files verified)" >&2
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


@dataclass(frozen=True)
class FirstBuild:
    """What the channel's Kubernetes manifest is made for: the build the channel was created with."""

    key: str
    ref: str  # its profile (name@version)
    target: str  # its target slug
    launch_files: tuple[str, ...]
    image: str | None  # the image its profile serves in (None: none named)
    families: tuple[str, ...]  # the Neuron instance families its profile runs on (none: a CPU profile)
    port: int | None  # PORT of its launch env file
    instance_type: str | None
    tp: int
    lnc: int


def object_name(slug: str) -> str:
    """A Kubernetes name for the channel `slug` (`org--name--line--channel`): lower-case letters, digits
    and dashes, at most `k8s.NAME_LIMIT`, ending in 8 hex of the slug so two channels never share one."""
    digest = hashlib.sha256(slug.encode()).hexdigest()[:8]
    words = re.sub(r"-+", "-", re.sub(r"[^a-z0-9]+", "-", slug.lower())).strip("-")
    room = k8s.NAME_LIMIT - len("neuronforge-") - len(digest) - 1
    return f"neuronforge-{words[:room].rstrip('-')}-{digest}".replace("--", "-")


def render(
    store_uri: str, channel_key: str, name: str, slug: str, scripts: list[str], first: FirstBuild | None = None
) -> dict[str, str]:
    """The launch files of a channel (name -> text); the Kubernetes manifest is made for `first`."""
    resolve = (
        (_RESOLVE_SH + FUNCTIONS + _RESOLVE_BODY)
        .replace("@@STORE@@", store_uri)
        .replace("@@KEY@@", shlex.quote(channel_key))
        .replace("@@NAME@@", name)
        .replace("@@SLUG@@", slug)
        .replace("@@K8S@@", K8S)
    )
    files = {RESOLVE: resolve, K8S: _k8s(name, slug, resolve, first)}
    for script in scripts:
        if script != RESOLVE:
            files[script] = _SHIM.format(script=script, name=name, resolve=RESOLVE)
    return files


def _k8s(name: str, slug: str, resolve: str, first: FirstBuild | None) -> str:
    """The ConfigMap of resolve.sh, and the Deployment that serves the channel when its builds have a
    serve.sh (`FirstBuild`: what the Deployment is made for)."""
    obj = object_name(slug)
    labels = {"app.kubernetes.io/name": "neuronforge-channel", "app.kubernetes.io/instance": obj}
    configmaps = k8s.pack_configmaps(obj, labels, {RESOLVE: resolve}, suffix="channel")
    names = [c["metadata"]["name"] for c in configmaps]
    head = [
        f"Kubernetes: serve the release channel {name} — at every pod start, the build it points to then.",
        f"Apply as written: kubectl apply -f {K8S} [-n NAMESPACE]",
        f"- ConfigMap {', '.join(names)}: this channel's resolve.sh, at {CHANNEL_MOUNT}.",
    ]
    if first is None or "serve.sh" not in first.launch_files:
        files = ", ".join(first.launch_files) if first else "unknown"
        head += [
            f"Builds of this line have no serve.sh (launch files of {first.key[:12] if first else 'its build'}: "
            f"{files}): no Deployment is written. To resolve the channel in a pod of your own, mount the "
            f"ConfigMap at {CHANNEL_MOUNT} and run `bash {CHANNEL_MOUNT}/{RESOLVE} [--all] DIR` in an init "
            "container (DIR below an emptyDir, not its mount point)."
        ]
        if first is not None and "run-lmi.sh" in first.launch_files:
            head.append(
                "lmi-neuronx: run-lmi.sh starts LMI with `docker run` of its image, serving.properties and lmi.env "
                "at /opt/ml/model (where LMI reads them); on Kubernetes the same is a pod of that image with "
                "those two files at /opt/ml/model (resolve.sh --all into an emptyDir, then copy them) — not "
                "rendered here, UNVERIFIED on a cluster (docs/releasing.md)."
            )
        return k8s.header(head) + k8s.dump(configmaps)
    return k8s.header(head + _deployment_head(obj, first)) + k8s.dump(
        [*configmaps, k8s.deployment(obj, labels, _pod(names, first))]
    )


def _neuron(first: FirstBuild) -> tuple[str, int, list[str]] | None:
    """(instance family, whole Neuron devices, instance types) of the first build's target, or None."""
    instance = INSTANCES.get(first.instance_type or "")
    if instance is None or instance.family not in first.families or instance.family not in k8s.CORES_PER_DEVICE:
        return None  # a CPU profile's target names an instance type too (what it was planned for)
    devices = k8s.neuron_devices(instance.family, first.tp, first.lnc)
    return instance.family, devices, k8s.fitting_instances(instance.name, first.tp, first.lnc)


def _pod(configmaps: list[str], first: FirstBuild) -> dict[str, Any]:
    image = first.image or NO_IMAGE
    sync = "sync.sh" in first.launch_files
    folders = [{"name": "MODEL_DIR", "value": MODEL_MOUNT}, {"name": "VLLM_CACHE_ROOT", "value": CACHE_MOUNT}]
    data = [{"name": "model", "mountPath": MODEL_MOUNT}, {"name": "vllm-cache", "mountPath": CACHE_MOUNT}]
    neuron = _neuron(first)
    pod_env = [{"name": "NEURONFORGE_POD_IMAGE", "value": image}]
    if neuron is not None:
        family, devices, _ = neuron
        cores = devices * k8s.CORES_PER_DEVICE[family]
        pod_env += [
            {"name": "NEURONFORGE_POD_FAMILY", "value": family},
            {"name": "NEURONFORGE_POD_CORES", "value": str(cores)},
        ]
    script = f"bash {CHANNEL_MOUNT}/{RESOLVE} {BUILD_DIR}"
    if sync:
        script += f" && bash {BUILD_DIR}/launch/sync.sh"
    init = {
        "name": "resolve",
        "image": image,
        "command": ["bash", "-c", script],
        "env": [{"name": "SYNC_TOOL", "value": "auto"}, *pod_env, *(folders if sync else [])],
        "volumeMounts": [
            {"name": "channel", "mountPath": CHANNEL_MOUNT, "readOnly": True},
            {"name": "launch", "mountPath": LAUNCH_MOUNT},
            *(data if sync else []),
        ],
    }
    serve: dict[str, Any] = {
        "name": "serve",
        "image": image,
        "command": ["bash", f"{BUILD_DIR}/launch/serve.sh"],
        **({"env": folders} if sync else {}),
        **(k8s.http_port(first.port) if first.port else {}),
        "volumeMounts": [
            {"name": "launch", "mountPath": LAUNCH_MOUNT, "readOnly": True},
            *(data if sync else []),
            {"name": "dshm", "mountPath": "/dev/shm"},
        ],
    }
    pod: dict[str, Any] = {}
    if neuron is not None:
        serve["resources"], pod["affinity"] = k8s.neuron_pod_fields(neuron[1], neuron[2])
    pod["initContainers"] = [init]
    pod["containers"] = [serve]
    pod["volumes"] = [
        {"name": "channel", "projected": {"sources": [{"configMap": {"name": n}} for n in configmaps]}},
        {"name": "launch", "emptyDir": {}},
        *([{"name": "model", "emptyDir": {}}, {"name": "vllm-cache", "emptyDir": {}}] if sync else []),
        {"name": "dshm", "emptyDir": {"medium": "Memory"}},
    ]
    return pod


def _deployment_head(obj: str, first: FirstBuild) -> list[str]:
    sync = "sync.sh" in first.launch_files
    neuron = _neuron(first)
    then = (
        f"then the build's sync.sh (the model and the compiled graphs, verified, into the model and vllm-cache "
        f"emptyDirs at {MODEL_MOUNT} and {CACHE_MOUNT}: MODEL_DIR, VLLM_CACHE_ROOT)"
        if sync
        else "(its serve.sh fetches the model itself)"
    )
    out = [
        f"- Deployment {obj} (a controller brings the server back after an eviction; Recreate: a rolling update "
        f"would hold a second set of Neuron devices): init container `resolve` runs resolve.sh into {BUILD_DIR} "
        f"(an emptyDir: channel.json, the build's manifest checked against the digest the channel recorded, its "
        f"launch files each checked by size and sha256), {then}; container `serve` runs the build's "
        "launch/serve.sh.",
        f"Made for the channel's first build {first.key[:12]} ({first.ref}, {first.target}): "
        + (
            f"the image {first.image}"
            if first.image
            else f"no image, {first.ref} names none (its env file lists what to install): set `image` of both "
            f"containers and NEURONFORGE_POD_IMAGE to one you build ({NO_IMAGE} is no image)"
        )
        + (
            f"; {neuron[1]} whole Neuron device(s) ({k8s.DEVICE_RESOURCE}) on {neuron[0]} nodes "
            f"({', '.join(neuron[2])})"
            if neuron
            else ""
        )
        + ". A build the channel moves to later that serves in another image, was compiled for another family "
        "or needs more NeuronCores is refused by resolve.sh in one line before any of its files is fetched "
        "(NEURONFORGE_POD_IMAGE, NEURONFORGE_POD_FAMILY, NEURONFORGE_POD_CORES): edit this file for it and apply "
        "it again.",
        "Needs: "
        + ("the Neuron device plugin; " if neuron else "")
        + "read access to the store for the pod (IRSA or EKS Pod Identity: add serviceAccountName to the pod "
        "spec); in the image, bash, python3 and, for s3://, python3 with boto3 (SYNC_TOOL=boto3), the AWS CLI "
        "(SYNC_TOOL=aws) or s5cmd (SYNC_TOOL=s5cmd).",
    ]
    return out


def first_build(store: ArtifactStore, build: ChannelBuild, manifest: ArtifactManifest) -> FirstBuild:
    """The facts of `build` the Kubernetes manifest is made for: its manifest's profile and target, and
    PORT from its launch env file (one more read, once, when the channel is created)."""
    launch = tuple(manifest.launch_files())
    port = None
    for env_file in (n for n in launch if n.endswith(".env") and "/" not in n):
        for line in store.get_bytes(f"{build.artifact_prefix}/launch/{env_file}").decode().splitlines():
            if line.startswith("PORT=") and line[5:].strip().isdigit():
                port = int(line[5:].strip())
        if port is not None:
            break
    target = manifest.request.get("target")
    target = target if isinstance(target, dict) else {}

    def number(name: str) -> int:
        value = target.get(name)
        return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 1

    return FirstBuild(
        key=build.key,
        ref=manifest.profile.ref if manifest.profile is not None else "",
        target=manifest.target_slug,
        launch_files=launch,
        image=manifest.profile.serving_image if manifest.profile is not None else None,
        families=manifest.profile.instance_families if manifest.profile is not None else (),
        port=port,
        instance_type=target.get("instance_type") if isinstance(target.get("instance_type"), str) else None,
        tp=number("tp_degree"),
        lnc=number("logical_nc_config"),
    )


def write_launch(store: ArtifactStore, prefix: str, name: str, build: ChannelBuild) -> list[str]:
    """Write the launch files of the channel at `prefix` (its record `<prefix>/channel.json`), with a shim
    for each script of `build`'s launch folder and the Kubernetes manifest made for `build`; what exists
    is left as it is. Returns the keys written."""
    manifest = ArtifactManifest.read(store, build.manifest)
    scripts = [n for n in manifest.launch_files() if n.endswith(".sh") and "/" not in n]
    slug = prefix.removeprefix("channels/").replace("/", "--")
    first = first_build(store, build, manifest)
    written = []
    for file_name, text in render(store.root_uri, f"{prefix}/channel.json", name, slug, scripts, first).items():
        key = f"{prefix}/launch/{file_name}"
        if store.put_if_absent(text.encode(), key):
            written.append(key)
    return written
