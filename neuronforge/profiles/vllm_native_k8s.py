"""The Kubernetes manifest of a `vllm-neuron-native` artifact (`launch/k8s-init-container.yaml`): one file
that `kubectl apply -f` takes as written. Its shape — ConfigMaps, Deployment, whole Neuron devices, node
affinity — is `artifacts.k8s_manifest`'s, which a release channel's manifest shares; what is this
profile's:

- ConfigMap(s) `<name>-launch[-N]`: the artifact's launch files (sync.sh, serve.sh, vllm.env,
  vllm-cache.json), projected together at /launch.
- Deployment `<name>`: init container `sync` runs `bash /launch/sync.sh` (the compiled graphs into the
  `vllm-cache` emptyDir — local disk, the plugin refuses a cache on NFS/Lustre — each checked against
  vllm-cache.json, and the model into the `model` emptyDir); container `vllm` runs `bash /launch/serve.sh`,
  whose own sync finds everything present and fetches nothing.
- The image the release serves in, and what is known of its tools (`IMAGE_TOOLS`).
"""

from __future__ import annotations

from collections.abc import Mapping

from neuronforge.artifacts import k8s_manifest as k8s

MOUNT = "/launch"
# What the image needs, per SDK release of the plugin (the init container runs the serving image).
IMAGE_TOOLS = {
    "2.32.0": (
        "it has the AWS CLI v2 and boto3 (CODE: aws-neuron/deep-learning-containers@f5346867 "
        "vllm/inference/0.24.0.1.1.0/Dockerfile.neuronx, the `Install AWS CLI` step and the pip install of boto3)"
    ),
}
IMAGE_TOOLS_UNVERIFIED = (
    "UNVERIFIED whether it has boto3 or the AWS CLI: its Dockerfile is not published; sync.sh takes python3 with "
    "boto3, else aws, else s5cmd (SYNC_TOOL=auto), and stops with one line naming what is missing"
)


def render(
    *,
    name: str,
    ref: str,
    sdk: str,
    image: str,
    files: Mapping[str, str],
    model_dir: str,
    cache_root: str,
    port: int,
    family: str,
    devices: int,
    instance_types: list[str],
) -> str:
    """The manifest: a header saying what to set, then the ConfigMap(s) and the Deployment."""
    labels = {"app.kubernetes.io/name": "neuronforge-vllm", "app.kubernetes.io/instance": name}
    configmaps = k8s.pack_configmaps(name, labels, files)
    names = [c["metadata"]["name"] for c in configmaps]
    mounts = [
        {"name": "launch", "mountPath": MOUNT, "readOnly": True},
        {"name": "vllm-cache", "mountPath": cache_root},
        {"name": "model", "mountPath": model_dir},
    ]
    resources, affinity = k8s.neuron_pod_fields(devices, instance_types)
    pod = {
        "affinity": affinity,
        "initContainers": [
            {
                "name": "sync",
                "image": image,
                "command": ["bash", f"{MOUNT}/sync.sh"],
                "env": [{"name": "SYNC_TOOL", "value": "auto"}],
                "volumeMounts": mounts,
            }
        ],
        "containers": [
            {
                "name": "vllm",
                "image": image,
                "command": ["bash", f"{MOUNT}/serve.sh"],
                **k8s.http_port(port),
                "resources": resources,
                "volumeMounts": [*mounts, {"name": "dshm", "mountPath": "/dev/shm"}],
            }
        ],
        "volumes": [
            {"name": "launch", "projected": {"sources": [{"configMap": {"name": n}} for n in names]}},
            {"name": "vllm-cache", "emptyDir": {}},
            {"name": "model", "emptyDir": {}},
            {"name": "dshm", "emptyDir": {"medium": "Memory"}},
        ],
    }
    tools = IMAGE_TOOLS.get(sdk, IMAGE_TOOLS_UNVERIFIED)
    paragraphs = [
        f"Kubernetes: serve this artifact ({ref}) with its compiled graphs synced before vLLM starts.",
        "Apply as written: kubectl apply -f k8s-init-container.yaml [-n NAMESPACE]",
        f"- ConfigMap {', '.join(names)}: the launch files, at {MOUNT}.",
        f"- Deployment {name} (a controller brings the server back after an eviction; Recreate: a rolling "
        "update would hold a second set of Neuron devices): init container `sync` runs sync.sh (every graph of "
        "vllm-cache.json into the vllm-cache emptyDir, local disk, and the model into the model emptyDir, "
        "each file checked by size and sha256 as it streams), then container `vllm` runs serve.sh (vllm serve, "
        "compiling forbidden).",
        f"Needs: the Neuron device plugin ({k8s.DEVICE_RESOURCE}: {devices} whole device(s) for this target) on "
        f"{family} nodes; read access to the store for the pod (IRSA or EKS Pod Identity: add "
        "serviceAccountName to the pod spec).",
        f"The image {image}: sync.sh needs bash, python3 and, for s3://, python3 with boto3 (parallel "
        f"ranged reads: SYNC_TOOL=boto3), the AWS CLI (SYNC_TOOL=aws) or s5cmd (SYNC_TOOL=s5cmd); {tools}.",
    ]
    return k8s.header(paragraphs) + k8s.dump([*configmaps, k8s.deployment(name, labels, pod)])
