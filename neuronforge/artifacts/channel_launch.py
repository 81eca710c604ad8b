"""A channel's launch files: `channels/<org>/<name>/<line>/<channel>/launch/`, written once when the
channel is created and never moved with it — they resolve the pointer each time they run. The scripts
are `launch_templates/resolve.sh` and `channel-shim.sh`, rendered by `launch_script.render`.

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
from dataclasses import dataclass
from typing import Any

from neuronforge.artifacts import k8s_manifest as k8s
from neuronforge.artifacts import launch_script
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
    resolve = launch_script.render("resolve.sh", STORE=store_uri, KEY=channel_key, NAME=name, SLUG=slug, K8S=K8S)
    files = {RESOLVE: resolve, K8S: _k8s(name, slug, resolve, first)}
    for script in scripts:
        if script != RESOLVE:
            files[script] = launch_script.render("channel-shim.sh", SCRIPT=script, NAME=name, RESOLVE=RESOLVE)
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
    target = manifest.hashed_target

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
