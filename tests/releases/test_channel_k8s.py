"""A release channel's `launch/k8s-init-container.yaml` (issue 38 case 7's failure class, for channels)
applies as written, and what its init container runs brings the build the channel points to or says in
one line why not, before fetching anything.

- applies: the REAL kubectl (`kubectl apply --dry-run=client --validate=false`) against tests/kube.py's
  discovery stub, and every document strictly valid against the Kubernetes 1.37 schemas
  kubernetes-validate bundles. What main wrote (a fragment: initContainers + volumes, a `channel` mount
  with no `channel` volume, image `SERVING_IMAGE`) fails both.
- the image: the one the channel's first build's profile serves in (its manifest's `profile.serving_image`),
  in both containers and in NEURONFORGE_POD_IMAGE; with the target's whole Neuron devices and nodes.
- runs: the init container's command, taken from the manifest, over resolve.sh taken from its ConfigMap
  (as the projected volume lays it out at /channel), on a host whose PATH has no AWS CLI: a file:// store
  needs none; an s3:// store stops before any transfer with the line sync.sh says (one text:
  `artifacts.transfer_sh`); a build the channel moves to that serves in another image or needs more
  NeuronCores than the pod holds is refused before any of its files is fetched.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from neuronforge.artifacts import channel_launch, channels
from neuronforge.artifacts.transfer_sh import FUNCTIONS
from neuronforge.profiles import get_profile
from neuronforge.profiles.vllm_native import SYNC_SH
from neuronforge.stores import open_store
from tests.kube import applied, schema_problems
from tests.releases.builds import MODEL, publish

NATIVE = get_profile("vllm-neuron-native@2.32.0")
NATIVE_33 = get_profile("vllm-neuron-native@2.33.0")
NXDI = get_profile("vllm-neuron@2.28.0")
NXDI_0_2 = get_profile("vllm-neuron@2.26.1")  # vllm-neuron 0.2.0 is in no image: its host installs it
TRN2 = {"instance_type": "trn2.3xlarge", "tp_degree": 4, "logical_nc_config": 2, "batch_size": 1, "sequence_length": 64}
# A build's sync.sh as far as the pod is concerned: it runs after resolve.sh, in the build's folder, with
# the pod's MODEL_DIR and VLLM_CACHE_ROOT (the real one is tests/profiles/test_vllm_native_k8s.py's).
SYNC = b'#!/usr/bin/env bash\nset -eu\necho "synced $(basename "$(dirname "$0")")" > "$MODEL_DIR/synced"\n'
NATIVE_LAUNCH = {
    "serve.sh": b"#!/usr/bin/env bash\necho serving\n",
    "sync.sh": SYNC,
    "vllm.env": b"MODEL_DIR=/opt/neuronforge/models/x/model\nPORT=8000\n",
    "vllm-cache.json": b"{}\n",
}
# What main wrote for every channel (neuronforge/artifacts/channel_launch.py `_K8S` at dc32a84).
MAIN_FRAGMENT = """\
# Kubernetes: resolve the release channel builtin:tiny-llama · vllm-neuron-native · candidate at every pod start.
initContainers:
  - name: neuronforge-channel-resolve
    image: SERVING_IMAGE  # the image of your serving container
    command:
      - bash
      - -c
      - bash /channel/resolve.sh /launch && if [ -f /launch/launch/sync.sh ]; then bash /launch/launch/sync.sh; fi
    volumeMounts:
      - {name: channel, mountPath: /channel}
      - {name: launch, mountPath: /launch}
volumes:
  - {name: launch, emptyDir: {}}
"""


def _native(store, n: int, profile=NATIVE, **target: object) -> str:
    return publish(
        store,
        n,
        profile=profile.name,
        version=profile.version,
        launch=NATIVE_LAUNCH,
        serving_image=profile.serving_image,
        instance_families=sorted(profile.instance_families),
        target={**TRN2, **target},
    )


@pytest.fixture
def native(tmp_path: Path):
    """A vllm-neuron-native channel created with a 2.32.0 build for trn2.3xlarge tp 4 (LNC 2)."""
    store = open_store(f"file://{tmp_path / 'store'}")
    ref = channels.ChannelRef.parse(MODEL, NATIVE.name, "candidate")
    key = _native(store, 1)
    channels.promote(store, ref, build=key)
    return store, ref, tmp_path / "store" / ref.prefix / "launch"


def _docs(text: str) -> list[dict]:
    return [d for d in yaml.safe_load_all(text) if d]


def _said(text: str) -> str:
    """The manifest's header as one line (its comments are wrapped at 110 columns)."""
    lines = [line[1:].strip() for line in text.splitlines() if line.startswith("#")]
    return " ".join(lines)


def _pod(text: str) -> dict:
    return next(d for d in _docs(text) if d["kind"] == "Deployment")["spec"]["template"]["spec"]


def _applies(tmp_path: Path, manifest: Path) -> list[str]:
    done = applied(manifest, tmp_path)
    assert done.returncode == 0, done.stderr
    assert schema_problems(manifest.read_text()) == []
    return done.stdout.splitlines()


# -- applies as written ------------------------------------------------------------------------------------
def test_the_channel_manifest_applies_as_written_with_the_real_kubectl(native, tmp_path: Path) -> None:
    _, ref, launch = native
    applied = _applies(tmp_path, launch / "k8s-init-container.yaml")
    name = channel_launch.object_name(ref.prefix.removeprefix("channels/").replace("/", "--"))
    assert name == "neuronforge-builtin-tiny-llama-vllm-neuron-c7c4c4db"  # DNS-1123, <= 52, unique by its hash
    assert applied == [
        f"configmap/{name}-channel created (dry run)",
        f"deployment.apps/{name} created (dry run)",
    ]


@pytest.mark.parametrize(
    ("profile", "launch", "kinds"),
    [
        (NXDI, {"serve.sh": b"echo serving\n", "vllm.env": b"PORT=8000\n"}, ["configmap", "deployment.apps"]),
        (NXDI_0_2, {"serve.sh": b"echo serving\n", "vllm.env": b"PORT=8000\n"}, ["configmap", "deployment.apps"]),
        (get_profile("cpu"), {"load.py": b"print(1)\n"}, ["configmap"]),
        (get_profile("lmi-neuronx"), {"run-lmi.sh": b"true\n", "serving.properties": b"x=1\n"}, ["configmap"]),
    ],
)
def test_every_line_s_manifest_applies(tmp_path: Path, profile, launch: dict, kinds: list[str]) -> None:
    """vllm-neuron (no sync.sh, its serve.sh fetches the model; 2.26.1 names no image: the manifest says
    to set one), and the lines without serve.sh, whose manifest holds resolve.sh only (no server to run)
    and says how to use it."""
    store = open_store(f"file://{tmp_path / 'store'}")
    ref = channels.ChannelRef.parse(MODEL, profile.name, "candidate")
    target = {"instance_type": "inf2.xlarge", "tp_degree": 2, "logical_nc_config": 1, "batch_size": 1}
    key = publish(
        store, 1, profile=profile.name, version=profile.version, launch=launch, target=target,
        serving_image=profile.serving_image, instance_families=sorted(profile.instance_families),
    )  # fmt: skip
    channels.promote(store, ref, build=key)
    manifest = tmp_path / "store" / ref.prefix / "launch" / "k8s-init-container.yaml"
    assert [line.split("/")[0] for line in _applies(tmp_path, manifest)] == kinds
    text = manifest.read_text()
    assert (channel_launch.NO_IMAGE in text) == (profile is NXDI_0_2)  # only where the profile names none
    if "deployment.apps" in kinds:
        (serve,) = _pod(text)["containers"]
        assert serve["image"] == (profile.serving_image or channel_launch.NO_IMAGE)
        assert serve["ports"][0]["containerPort"] == 8000
        assert serve["resources"]["limits"] == {"aws.amazon.com/neuron": 1}  # inf2.xlarge tp 2: one Inferentia2
    else:
        said = _said(text)
        assert "no Deployment is written" in said and "`bash /channel/resolve.sh [--all] DIR`" in said
    if profile is NXDI_0_2:
        assert "no image, vllm-neuron@2.26.1 names none (its env file lists what to install)" in _said(text)
    if profile.name == "lmi-neuronx":
        assert "run-lmi.sh starts LMI with `docker run`" in _said(text)


def test_what_main_wrote_fails_both_checks(tmp_path: Path) -> None:
    """The checks can fail: main's fragment is no Kubernetes object for kubectl nor for the schema."""
    manifest = tmp_path / "old.yaml"
    manifest.write_text(MAIN_FRAGMENT)
    done = applied(manifest, tmp_path)
    assert done.returncode != 0 and "Object 'Kind' is missing" in done.stderr, done.stderr
    assert schema_problems(MAIN_FRAGMENT) == [
        "document 0: not a Kubernetes object (no apiVersion/kind; it has ['initContainers', 'volumes'])"
    ]


def test_the_deployment_is_made_for_the_first_build(native) -> None:
    _, _, launch = native
    text = (launch / "k8s-init-container.yaml").read_text()
    (configmap,) = [d for d in _docs(text) if d["kind"] == "ConfigMap"]
    assert configmap["data"] == {"resolve.sh": (launch / "resolve.sh").read_text()}  # byte for byte
    pod = _pod(text)
    volumes = {v["name"]: v for v in pod["volumes"]}
    (init,) = pod["initContainers"]
    (serve,) = pod["containers"]
    for container in (init, serve):
        assert {m["name"] for m in container["volumeMounts"]} <= set(volumes), container["name"]
        assert container["image"] == NATIVE.serving_image
    assert volumes["channel"]["projected"]["sources"] == [{"configMap": {"name": configmap["metadata"]["name"]}}]
    assert all(volumes[n] == {"name": n, "emptyDir": {}} for n in ("launch", "model", "vllm-cache"))  # local disk
    env = {e["name"]: e["value"] for e in init["env"]}
    assert env["NEURONFORGE_POD_IMAGE"] == NATIVE.serving_image
    assert (env["NEURONFORGE_POD_FAMILY"], env["NEURONFORGE_POD_CORES"]) == ("trn2", "8")  # one Trainium2 chip
    assert init["command"][-1] == "bash /channel/resolve.sh /launch/build && bash /launch/build/launch/sync.sh"
    assert serve["command"] == ["bash", "/launch/build/launch/serve.sh"]
    served_env = {e["name"]: e["value"] for e in serve["env"]}
    mounts = {m["name"]: m["mountPath"] for m in serve["volumeMounts"]}
    assert served_env == {"MODEL_DIR": mounts["model"], "VLLM_CACHE_ROOT": mounts["vllm-cache"]}
    assert {k: env[k] for k in served_env} == served_env  # sync.sh in the init container fills what serve.sh reads
    assert serve["resources"] == {"limits": {"aws.amazon.com/neuron": 1}, "requests": {"aws.amazon.com/neuron": 1}}
    (term,) = pod["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    assert term["matchExpressions"][0]["values"] == ["trn2.3xlarge", "trn2.48xlarge"]
    assert serve["ports"] == [{"name": "http", "containerPort": 8000}]  # vllm.env's PORT


def test_resolve_sh_and_sync_sh_read_the_store_with_one_text(native) -> None:
    _, _, launch = native
    assert FUNCTIONS in (launch / "resolve.sh").read_text() and FUNCTIONS in SYNC_SH


# -- the init container's command, on a host without the AWS CLI ------------------------------------------
def _host_path(tmp_path: Path) -> str:
    """A PATH with bash and the coreutils the scripts use and a python3 without boto3 (python -S drops
    site-packages) — and no aws or s5cmd."""
    bindir = tmp_path / "host-bin"
    if bindir.is_dir():
        return str(bindir)
    bindir.mkdir()
    for tool in ("bash", "sh", "basename", "cat", "cp", "cut", "dirname", "grep", "awk", "mkdir", "mktemp", "mv",
                 "rm", "sha256sum", "stat", "wc"):  # fmt: skip
        found = shutil.which(tool, path="/usr/bin:/bin")
        assert found, tool
        (bindir / tool).symlink_to(found)
    (bindir / "python3").write_text(f'#!/bin/sh\nexec "{sys.executable}" -S "$@"\n')
    (bindir / "python3").chmod(0o755)
    return str(bindir)


def _init(tmp_path: Path, text: str, **env: str) -> tuple[subprocess.CompletedProcess[str], Path]:
    """The init container's command in its volumes (each mount path mapped to a folder under `pod/`),
    with the container's env and `env`; returns the run and the pod's folder."""
    pod = _pod(text)
    (init,) = pod["initContainers"]
    root = tmp_path / "pod"
    mounts = {m["mountPath"]: root / m["name"] for m in init["volumeMounts"]}
    for path in mounts.values():
        path.mkdir(parents=True)
    for doc in _docs(text):
        if doc["kind"] == "ConfigMap":
            for name, body in doc["data"].items():
                (mounts["/channel"] / name).write_text(body)

    where = re.compile(r"(?<![\w./-])(" + "|".join(re.escape(m) for m in sorted(mounts, key=len, reverse=True)) + ")")

    def local(word: str) -> str:  # a path that starts with a mount path (not /launch inside /launch/build/launch)
        return where.sub(lambda m: str(mounts[m.group(0)]), word)

    pod_env = {e["name"]: local(e["value"]) for e in init["env"]}
    run_env = {"PATH": _host_path(tmp_path), "HOME": str(tmp_path), "TMPDIR": str(tmp_path), **pod_env, **env}
    command = [local(w) for w in init["command"]]
    done = subprocess.run(command, env=run_env, capture_output=True, text=True, timeout=120, check=False)
    return done, root


def test_the_init_container_resolves_and_syncs_a_file_store_without_any_transfer_tool(native, tmp_path: Path) -> None:
    store, ref, launch = native
    done, pod = _init(tmp_path, (launch / "k8s-init-container.yaml").read_text())
    assert done.returncode == 0, done.stderr
    build = pod / "launch" / "build"
    key = channels.get(store, ref).current.build.key
    assert sorted(p.name for p in (build / "launch").iterdir()) == sorted(NATIVE_LAUNCH)
    assert f"-> {key[:12]} (4 files verified)" in done.stderr
    assert (pod / "model" / "synced").read_text() == "synced launch\n"  # the build's sync.sh, with the pod's MODEL_DIR
    assert not (build / "model").exists()  # launch files only: serve.sh and sync.sh fetch the rest


NONE_HERE = (
    "needs the AWS CLI (aws), s5cmd or python3 with boto3, and none is here: use an image with awscli, "
    "or put s5cmd on PATH and set SYNC_TOOL=s5cmd"
)


@pytest.mark.parametrize(
    ("tool", "expected"),
    [
        (None, f"resolve.sh: reading s3://bucket/farm/channels/builtin/tiny-llama/vllm-neuron-native/candidate/"
               f"channel.json {NONE_HERE}"),
        ("aws", "SYNC_TOOL=aws but aws (the AWS CLI) is not on PATH: use an image with awscli, or set SYNC_TOOL=s5cmd"),
        ("s5cmd", "SYNC_TOOL=s5cmd but s5cmd is not on PATH"),
        ("boto3", "SYNC_TOOL=boto3 but python3 cannot import boto3: pip install boto3"),
        ("rclone", "SYNC_TOOL=rclone: one of auto, aws, s5cmd, boto3"),
    ],
)  # fmt: skip
def test_an_s3_store_without_the_tool_stops_in_one_line_before_fetching(
    native, tmp_path: Path, tool: str | None, expected: str
) -> None:
    """The channel's store on s3:// (a replica, NEURONFORGE_STORE_URI; no endpoint is ever contacted):
    the init container names what it lacks and what to do, in one line — sync.sh's sentence, from
    resolve.sh — having fetched nothing."""
    _, _, launch = native
    env = {"NEURONFORGE_STORE_URI": "s3://bucket/farm", **({"SYNC_TOOL": tool} if tool else {})}
    done, pod = _init(tmp_path, (launch / "k8s-init-container.yaml").read_text(), **env)
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and done.stderr.startswith("resolve.sh: ") and expected in done.stderr, (
        done.stderr
    )
    assert not [p for p in pod.rglob("*") if p.is_file() and "channel" not in p.parts]  # nothing fetched


@pytest.mark.parametrize(
    ("other", "why"),
    [
        (
            {"profile": NATIVE_33},
            f"it serves in {NATIVE_33.serving_image}, the pod runs {NATIVE.serving_image}",
        ),
        ({"instance_type": "trn2.48xlarge", "tp_degree": 32}, "it needs 64 physical NeuronCores, the pod holds 8"),
    ],
)
def test_a_build_that_does_not_fit_the_pod_is_refused_before_its_files_are_fetched(
    native, tmp_path: Path, other: dict, why: str
) -> None:
    """The manifest is written once, for the channel's first build; promoted to a build of another release
    (another image) or a bigger target, the pod's next start stops in one line saying what to change —
    not a server started in an image that cannot load the build. Rolled back, it starts again."""
    store, ref, launch = native
    channels.promote(store, ref, build=_native(store, 2, **other))
    text = (launch / "k8s-init-container.yaml").read_text()
    done, pod = _init(tmp_path, text)
    assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr
    assert (
        why in done.stderr
        and done.stderr.startswith("resolve.sh: build ")
        and "none of its files fetched" in done.stderr
    )
    assert "does not fit this pod, which the channel's k8s-init-container.yaml made for its first build" in done.stderr
    assert not (pod / "launch" / "build").exists() and not any((pod / "model").iterdir())
    channels.rollback(store, ref)
    shutil.rmtree(pod)
    again, _ = _init(tmp_path, text)
    assert again.returncode == 0, again.stderr


def test_outside_a_pod_the_fit_is_not_asked(native, tmp_path: Path) -> None:
    """A host running the channel's shims sets no NEURONFORGE_POD_*: any build of the line resolves."""
    store, ref, launch = native
    channels.promote(store, ref, build=_native(store, 2, profile=NATIVE_33))
    env = {k: v for k, v in os.environ.items() if not k.startswith("NEURONFORGE_POD_")}
    done = subprocess.run(
        ["bash", str(launch / "resolve.sh"), str(tmp_path / "host")], env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr


@pytest.mark.parametrize("tool", ["aws", "s5cmd", "boto3"])
def test_the_init_container_resolves_an_s3_store_with_each_tool(s3_bucket: str, tmp_path: Path, tool: str) -> None:
    """The channel in an S3 bucket (moto's real HTTP endpoint, AWS_ENDPOINT_URL): the init container
    resolves it and runs the build's sync.sh with the AWS CLI, s5cmd (this venv's) or python3 with boto3."""
    store = open_store(f"s3://{s3_bucket}/farm")
    ref = channels.ChannelRef.parse(MODEL, NATIVE.name, "candidate")
    channels.promote(store, ref, build=_native(store, 1))
    text = store.get_bytes(f"{ref.prefix}/launch/k8s-init-container.yaml").decode()
    bindir = Path(_host_path(tmp_path))
    (bindir / "python3").write_text(f'#!/bin/sh\nexec "{sys.executable}" "$@"\n')  # with boto3
    if tool != "boto3":
        (bindir / tool).symlink_to(Path(sys.executable).parent / tool)
    aws = {k: v for k, v in os.environ.items() if k.startswith("AWS_")}  # the endpoint and moto's credentials
    done, pod = _init(tmp_path, text, SYNC_TOOL=tool, **aws)
    assert done.returncode == 0, done.stderr
    assert sorted(p.name for p in (pod / "launch" / "build" / "launch").iterdir()) == sorted(NATIVE_LAUNCH)
    assert (pod / "model" / "synced").read_text() == "synced launch\n"
