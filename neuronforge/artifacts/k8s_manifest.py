"""The pieces of a Kubernetes manifest that `kubectl apply -f` takes as written, shared by the two that
neuronforge publishes: a `vllm-neuron-native` build's `launch/k8s-init-container.yaml`
(`profiles.vllm_native_k8s`) and a release channel's (`artifacts.channel_launch`).

- Files travel in ConfigMaps (`pack_configmaps`). A client-side `kubectl apply` stores the whole object in
  the `kubectl.kubernetes.io/last-applied-configuration` annotation, and the API server refuses
  annotations over 256 KiB in total (k8s.io/apimachinery pkg/api/validation/objectmeta.go
  `TotalAnnotationSizeLimitB = 256 * (1 << 10)`, CODE) — so the files are packed into as many ConfigMaps
  as keep each one under that, far below the 1 MiB a ConfigMap's data may hold (kubernetes
  pkg/apis/core/validation/validation.go `ValidateConfigMap`: `totalSize > core.MaxSecretSize`, CODE). A
  single file over the budget cannot be split: refused with one line (`InvalidInput`).
- A server is a Deployment, not a bare Pod (`deployment`): it must come back after an eviction or a
  node's loss, which only a controller does; one replica, `Recreate` (a rolling update would hold a
  second set of Neuron devices while the old pod still runs).
- Neuron devices (`neuron_devices`): `aws.amazon.com/neuron`, whole devices ("used for allocating entire
  Neuron devices to containers (all cores belonging to the device)", DOCS:
  https://awsdocs-neuron.readthedocs-hosted.com/en/latest/containers/tutorials/k8s-neuron-device-plugin.html),
  as many as tp x LNC physical cores need. Whole devices rather than `aws.amazon.com/neuroncore`: cores
  of one device, no scheduler extension needed.
- Node affinity on `node.kubernetes.io/instance-type` (a well-known label, `fitting_instances`): the
  instance types of the target's family with enough cores, since a NEFF compiled for trn2 does not run
  on an inf2 node that advertises the same resource.
"""

from __future__ import annotations

import json
import textwrap
from collections.abc import Mapping
from math import ceil
from typing import Any

import yaml

from neuronforge.common.errors import InvalidInput
from neuronforge.spec.instances import INSTANCES

DEVICE_RESOURCE = "aws.amazon.com/neuron"
# Physical NeuronCores per Neuron device, DOCS (awsdocs-neuron.readthedocs-hosted.com, about-neuron/arch/
# neuron-hardware/): an Inferentia2 chip holds two NeuronCore-v2 (inferentia2.rst), a Trainium chip two
# NeuronCore-v2 (trainium.rst; Trn1 and Trn1n carry the same 16 chips, trn1-arch.rst), a Trainium2 chip
# eight NeuronCore-v3 (trainium2.rst), a Trainium3 device eight NeuronCore-v4 (trainium3.rst).
CORES_PER_DEVICE = {"inf2": 2, "trn1": 2, "trn1n": 2, "trn2": 8, "trn3": 8}
ANNOTATION_LIMIT = 256 * 1024  # apimachinery TotalAnnotationSizeLimitB (CODE)
CONFIGMAP_LIMIT = 1024 * 1024  # core.MaxSecretSize, what ValidateConfigMap allows (CODE)
LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"
# What the rest of a ConfigMap's last-applied JSON may take besides the files (name, labels, braces).
CONFIGMAP_OVERHEAD = 4 * 1024
# An object name that also goes into a label value (`app.kubernetes.io/instance`: at most 63 characters)
# with room for the `-launch-N` / `-channel` suffix of its ConfigMaps.
NAME_LIMIT = 52


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


def fitting_instances(instance_type: str, tp: int, lnc: int) -> list[str]:
    """The instance types of `instance_type`'s family with `tp` logical cores at `lnc` (the target's own
    when the table knows no other)."""
    family = INSTANCES[instance_type].family if instance_type in INSTANCES else None
    fitting = sorted(i.name for i in INSTANCES.values() if i.family == family and i.cores(lnc) >= tp)
    return fitting or [instance_type]


def last_applied_size(obj: Mapping[str, Any]) -> int:
    """Bytes of the annotation a client-side `kubectl apply` stores for `obj`: its JSON as Go's
    encoding/json writes it (compact; `<`, `>`, `&`, U+2028 and U+2029 escaped as \\uXXXX)."""
    text = json.dumps(obj, separators=(",", ":"), ensure_ascii=False)
    escaped = sum(text.count(c) for c in "<>&\u2028\u2029")
    return len(LAST_APPLIED) + len(text.encode()) + 5 * escaped


def pack_configmaps(
    name: str, labels: Mapping[str, str], files: Mapping[str, str], suffix: str = "launch"
) -> list[dict[str, Any]]:
    """The files in as few ConfigMaps (`<name>-<suffix>`, `<name>-<suffix>-2`, ...) as keep each one's
    last-applied annotation under the limit."""

    def configmap(index: int, data: dict[str, str]) -> dict[str, Any]:
        tail = "" if index == 0 else f"-{index + 1}"
        return {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": f"{name}-{suffix}{tail}", "labels": dict(labels)},
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


def neuron_pod_fields(devices: int, instance_types: list[str]) -> tuple[dict[str, Any], dict[str, Any]]:
    """(the serving container's `resources`, the pod's `affinity`): whole devices, on those instance types."""
    resources = {"limits": {DEVICE_RESOURCE: devices}, "requests": {DEVICE_RESOURCE: devices}}
    match = {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": instance_types}
    term = {"matchExpressions": [match]}
    affinity = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [term]}}}
    return resources, affinity


def http_port(port: int) -> dict[str, Any]:
    """The serving container's port named `http` and a readiness probe on vLLM's `GET /health`: 200 while
    the engine lives, 503 once it is dead (CODE: vllm-project/vllm@98b137c6
    vllm/entrypoints/serve/instrumentator/health.py; earlier releases served it from
    entrypoints/openai/api_server.py — which vLLM releases the Neuron images hold it where is UNVERIFIED,
    the route is the same)."""
    return {
        "ports": [{"name": "http", "containerPort": port}],
        "readinessProbe": {"httpGet": {"path": "/health", "port": "http"}, "periodSeconds": 10},
    }


def deployment(name: str, labels: Mapping[str, str], pod: Mapping[str, Any]) -> dict[str, Any]:
    """One replica of `pod`, recreated (never two sets of Neuron devices at once)."""
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "labels": dict(labels)},
        "spec": {
            "replicas": 1,
            "strategy": {"type": "Recreate"},
            "selector": {"matchLabels": dict(labels)},
            "template": {"metadata": {"labels": dict(labels)}, "spec": dict(pod)},
        },
    }


def header(paragraphs: list[str]) -> str:
    """`# ` comment lines, each paragraph wrapped at 110 columns (continuations indented)."""
    return "".join(
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


class _Literal(str):
    """A multi-line string written as a YAML literal block (`|`), as the files read."""


def _literal(dumper: yaml.SafeDumper, value: _Literal) -> yaml.ScalarNode:
    return dumper.represent_scalar("tag:yaml.org,2002:str", str(value), style="|")


class _Dumper(yaml.SafeDumper):
    def ignore_aliases(self, data: Any) -> bool:  # every mount and label written out, no &id001 anchors
        return True


_Dumper.add_representer(_Literal, _literal)


def dump(documents: list[dict[str, Any]]) -> str:
    """The documents as one YAML stream; a ConfigMap's files as literal blocks, byte for byte."""
    out = []
    for doc in documents:
        if doc.get("kind") == "ConfigMap":
            doc = {**doc, "data": {k: _Literal(v) for k, v in doc["data"].items()}}
        out.append(doc)
    return yaml.dump_all(out, Dumper=_Dumper, sort_keys=False, width=120, allow_unicode=True)
