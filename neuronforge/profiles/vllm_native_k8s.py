"""The Kubernetes manifest of a `vllm-neuron-native` artifact (`launch/k8s-init-container.yaml`): one file
that `kubectl apply -f` takes as written.

- ConfigMap(s) `<name>-launch[-N]`: the artifact's launch files (sync.sh, serve.sh, vllm.env,
  vllm-cache.json), projected together at /launch. A client-side `kubectl apply` stores the whole object
  in the `kubectl.kubernetes.io/last-applied-configuration` annotation, and the API server refuses
  annotations over 256 KiB in total (k8s.io/apimachinery pkg/api/validation/objectmeta.go
  `TotalAnnotationSizeLimitB = 256 * (1 << 10)`, CODE) — so the files are packed into as many ConfigMaps
  as keep each one under that, far below the 1 MiB a ConfigMap's data may hold (kubernetes
  pkg/apis/core/validation/validation.go `ValidateConfigMap`: `totalSize > core.MaxSecretSize`, CODE). A
  single file over the budget cannot be split: refused with one line (`InvalidInput`).
- Deployment `<name>`, not a bare Pod: a server must come back after an eviction or a node's loss, which
  only a controller does; one replica, `Recreate` (a rolling update would hold a second set of Neuron
  devices while the old pod still runs). Init container `sync` runs `bash /launch/sync.sh` (the compiled
  graphs into the `vllm-cache` emptyDir — local disk, the plugin refuses a cache on NFS/Lustre — each
  checked against vllm-cache.json, and the model into the `model` emptyDir); container `vllm` runs
  `bash /launch/serve.sh`, whose own sync finds everything present and fetches nothing.
- Neuron devices: `aws.amazon.com/neuron`, whole devices ("used for allocating entire Neuron devices to
  containers (all cores belonging to the device)", DOCS:
  https://awsdocs-neuron.readthedocs-hosted.com/en/latest/containers/tutorials/k8s-neuron-device-plugin.html),
  as many as tp x LNC physical cores need: a Trainium2 chip holds eight NeuronCore-v3 and a Trainium3
  device eight NeuronCore-v4 (DOCS: about-neuron/arch/neuron-hardware/trainium2.rst and trainium3.rst).
  Whole devices rather than `aws.amazon.com/neuroncore`: cores of one device, no scheduler extension needed.
- Node affinity on `node.kubernetes.io/instance-type` (a well-known label): the instance types of the
  target's family with enough cores, since a NEFF compiled for trn2 does not run on an inf2 node that
  advertises the same resource.
"""

from __future__ import annotations

import json
import textwrap
from collections.abc import Mapping
from math import ceil
from typing import Any

import yaml

from neuronforge.common.errors import InvalidInput

DEVICE_RESOURCE = "aws.amazon.com/neuron"
# Physical NeuronCores per Neuron device (DOCS: the Trainium2 / Trainium3 architecture pages).
CORES_PER_DEVICE = {"trn2": 8, "trn3": 8}
ANNOTATION_LIMIT = 256 * 1024  # apimachinery TotalAnnotationSizeLimitB (CODE)
CONFIGMAP_LIMIT = 1024 * 1024  # core.MaxSecretSize, what ValidateConfigMap allows (CODE)
LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"
# What the rest of a ConfigMap's last-applied JSON may take besides the files (name, labels, braces).
CONFIGMAP_OVERHEAD = 4 * 1024
MOUNT = "/launch"
# What the image needs, per SDK release of the plugin (the init container runs the serving image).
IMAGE_TOOLS = {
    "2.32.0": (
        "it has the AWS CLI v2 and boto3 (CODE: aws-neuron/deep-learning-containers@f5346867 "
        "vllm/inference/0.24.0.1.1.0/Dockerfile.neuronx, the `Install AWS CLI` step and the pip install of boto3)"
    ),
}
IMAGE_TOOLS_UNVERIFIED = (
    "UNVERIFIED whether it has the AWS CLI: its Dockerfile is not published; sync.sh takes aws, else s5cmd, "
    "else python3 with boto3 (SYNC_TOOL=auto), and stops with one line naming what is missing"
)


def neuron_devices(family: str, tp: int, lnc: int) -> int:
    """Whole Neuron devices for `tp` logical cores of `lnc` physical cores each."""
    try:
        per_device = CORES_PER_DEVICE[family]
    except KeyError:
        raise InvalidInput(
            f"Kubernetes manifest: NeuronCores per device of instance family {family!r} are not known; "
            f"known: {', '.join(sorted(CORES_PER_DEVICE))}"
        ) from None
    return max(1, ceil(tp * lnc / per_device))


def last_applied_size(obj: Mapping[str, Any]) -> int:
    """Bytes of the annotation a client-side `kubectl apply` stores for `obj`: its JSON as Go's
    encoding/json writes it (compact; `<`, `>`, `&`, U+2028 and U+2029 escaped as \\uXXXX)."""
    text = json.dumps(obj, separators=(",", ":"), ensure_ascii=False)
    escaped = sum(text.count(c) for c in "<>&\u2028\u2029")
    return len(LAST_APPLIED) + len(text.encode()) + 5 * escaped


def pack_configmaps(name: str, labels: Mapping[str, str], files: Mapping[str, str]) -> list[dict[str, Any]]:
    """The launch files in as few ConfigMaps as keep each one's last-applied annotation under the limit."""

    def configmap(index: int, data: dict[str, str]) -> dict[str, Any]:
        suffix = "" if index == 0 else f"-{index + 1}"
        return {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": f"{name}-launch{suffix}", "labels": dict(labels)},
            "data": data,
        }

    budget = ANNOTATION_LIMIT - CONFIGMAP_OVERHEAD
    groups: list[dict[str, str]] = [{}]
    for file_name in sorted(files):
        alone = last_applied_size(configmap(0, {file_name: files[file_name]}))
        if alone > budget or len(files[file_name].encode()) > CONFIGMAP_LIMIT:
            raise InvalidInput(
                f"Kubernetes manifest: launch/{file_name} is {len(files[file_name].encode())} bytes, more than one "
                f"ConfigMap holds through `kubectl apply` ({budget} bytes of the {ANNOTATION_LIMIT}-byte "
                "last-applied annotation); serve from the launch folder on a volume instead (sync.sh, serve.sh)"
            )
        trial = {**groups[-1], file_name: files[file_name]}
        if groups[-1] and last_applied_size(configmap(len(groups) - 1, trial)) > budget:
            groups.append({file_name: files[file_name]})
        else:
            groups[-1] = trial
    return [configmap(i, data) for i, data in enumerate(groups)]


class _Literal(str):
    """A multi-line string written as a YAML literal block (`|`), as the files read."""


def _literal(dumper: yaml.SafeDumper, value: _Literal) -> yaml.ScalarNode:
    return dumper.represent_scalar("tag:yaml.org,2002:str", str(value), style="|")


class _Dumper(yaml.SafeDumper):
    def ignore_aliases(self, data: Any) -> bool:  # every mount and label written out, no &id001 anchors
        return True


_Dumper.add_representer(_Literal, _literal)


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
    configmaps = pack_configmaps(name, labels, files)
    names = [c["metadata"]["name"] for c in configmaps]
    mounts = [
        {"name": "launch", "mountPath": MOUNT, "readOnly": True},
        {"name": "vllm-cache", "mountPath": cache_root},
        {"name": "model", "mountPath": model_dir},
    ]
    resources = {"limits": {DEVICE_RESOURCE: devices}, "requests": {DEVICE_RESOURCE: devices}}
    pod = {
        "affinity": {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [
                        {
                            "matchExpressions": [
                                {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": instance_types}
                            ]
                        }
                    ]
                }
            }
        },
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
                "ports": [{"name": "http", "containerPort": port}],
                "readinessProbe": {"httpGet": {"path": "/health", "port": "http"}, "periodSeconds": 10},
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
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "labels": labels},
        "spec": {
            "replicas": 1,
            "strategy": {"type": "Recreate"},
            "selector": {"matchLabels": labels},
            "template": {"metadata": {"labels": labels}, "spec": pod},
        },
    }
    for c in configmaps:
        c["data"] = {k: _Literal(v) for k, v in c["data"].items()}
    tools = IMAGE_TOOLS.get(sdk, IMAGE_TOOLS_UNVERIFIED)
    paragraphs = [
        f"Kubernetes: serve this artifact ({ref}) with its compiled graphs synced before vLLM starts.",
        "Apply as written: kubectl apply -f k8s-init-container.yaml [-n NAMESPACE]",
        f"- ConfigMap {', '.join(names)}: the launch files, at {MOUNT}.",
        f"- Deployment {name} (a controller brings the server back after an eviction; Recreate: a rolling "
        "update would hold a second set of Neuron devices): init container `sync` runs sync.sh (every graph of "
        "vllm-cache.json into the vllm-cache emptyDir, local disk, each checked by sha256; the model into the "
        "model emptyDir), then container `vllm` runs serve.sh (vllm serve, compiling forbidden).",
        f"Needs: the Neuron device plugin ({DEVICE_RESOURCE}: {devices} whole device(s) for this target) on "
        f"{family} nodes; read access to the store for the pod (IRSA or EKS Pod Identity: add "
        "serviceAccountName to the pod spec).",
        f"The image {image}: sync.sh needs bash, python3, sha256sum and, for s3://, the AWS CLI, s5cmd "
        f"(SYNC_TOOL=s5cmd) or python3 with boto3 (SYNC_TOOL=boto3); {tools}.",
    ]
    header = "".join(
        textwrap.fill(
            text,
            width=110,
            initial_indent="# ",
            subsequent_indent="#   ",
            break_on_hyphens=False,
            break_long_words=False,
        )
        + "\n"
        for text in paragraphs
    )
    body = yaml.dump_all([*configmaps, deployment], Dumper=_Dumper, sort_keys=False, width=120)
    return header + body
