"""The Kubernetes manifest of a `vllm-neuron-native` artifact (`launch/k8s-init-container.yaml`, issue 38
case 7) applies as written, and the init container's `sync.sh` brings what it runs or says in one line
what is missing.

- applies: the REAL kubectl (`kubectl apply --dry-run=client --validate=false`) against a discovery stub on
  127.0.0.1 (tests/kube.py), and every document strictly valid against the Kubernetes 1.37 schemas
  kubernetes-validate bundles. The snippet main rendered (a fragment: initContainers + volumes, mounting a
  `launch` volume it never declares) fails both.
- runs: the init container's command, taken from the manifest, over the launch files taken from the
  manifest's ConfigMap(s) (as the projected volume lays them out at /launch), on a host whose PATH has no
  AWS CLI: a file:// store needs none; an s3:// store stops before any transfer with one line naming the
  tools it would take (the AWS CLI, s5cmd or python3 with boto3) and what to do.

The artifact here is made by hand (cache entries written into a file:// store, the manifest recorded from
them, the launch files rendered by the profile), so the manifest is exercised without the fake plugin;
test_vllm_native.py checks the one a real (fake-SDK) build publishes.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from neuronforge.artifacts import layout
from neuronforge.common.errors import InvalidInput
from neuronforge.compilation.backends.vllm_native import CACHE_MANIFEST
from neuronforge.compilation.vllm_cache import MARKER, CacheManifest, entry_record
from neuronforge.profiles import get_profile
from neuronforge.profiles.base import LaunchContext, read_env_file
from neuronforge.records.local import write_local
from neuronforge.records.tree import StoredFile
from neuronforge.spec.target import TargetSpec
from neuronforge.spec.toolchain import Toolchain
from tests.kube import applied, schema_problems

KEY = "abcdef012345"
NAME = f"neuronforge-{KEY}"
TOOLCHAIN = Toolchain("vllm-neuron-native", "0.24.0", "neuronxcc", "2.27.5334.0+f702b353")
# What main rendered for a trn2.3xlarge tp-4 target (profiles/vllm_native.py `_k8s` at fdfae05): no
# apiVersion/kind, and a `launch` mount with no `launch` volume.
OLD_SNIPPET = """\
# Kubernetes: an init container fills the pod's local cache before vLLM starts (vllm-neuron-native@2.32.0).
initContainers:
  - name: neuronforge-vllm-cache-sync
    image: public.ecr.aws/neuron/pytorch-inference-vllm-neuronx:0.24.0.1.1.0-neuronx-sdk2.32.0
    command: ["bash", "-c", "set -a; . /launch/vllm.env; set +a; bash /launch/sync.sh"]
    volumeMounts:
      - {name: launch, mountPath: /launch}
      - {name: vllm-cache, mountPath: /var/cache/neuronforge/vllm}
      - {name: model, mountPath: /opt/neuronforge/models/abcdef012345/model}
volumes:
  - {name: vllm-cache, emptyDir: {}}  # local disk: the plugin refuses a cache on NFS/Lustre
  - {name: model, emptyDir: {}}
"""


def _target(profile: str = "vllm-neuron-native@2.32", **kw: object) -> TargetSpec:
    base = {"instance_type": "trn2.3xlarge", "tp_degree": 4, "batch_size": 2, "sequence_length": 256}
    return TargetSpec.parse({**base, "profile": profile, **kw})


def _artifact(
    tmp_path: Path, profile: str = "vllm-neuron-native@2.32", entries: int = 2, store_name: str = "store"
) -> tuple[Path, dict]:
    """A file:// store (the folder `store_name`) holding `entries` complete cache entries, one NKI file and
    the model folder; the launch files the profile renders for them. Returns (the store's folder, name -> text)."""
    p = get_profile(profile)
    store = tmp_path / store_name
    cache = store / layout.vllm_cache_prefix(p.version)
    records = []
    for i in range(entries):
        key = f"{i + 1:032x}"
        entry = cache / key
        entry.mkdir(parents=True)
        (entry / "graph.hlo").write_bytes(os.urandom(256))
        (entry / f"graph_{key}.neff").write_bytes(os.urandom(1024))
        (entry / MARKER).write_text("")
        records.append(entry_record(entry))
    (cache / "nki").mkdir()
    (cache / "nki" / "k1.json").write_text('{"kernel": 1}\n')
    nki = [StoredFile(path="nki/k1.json", size=14, sha256=_sha(cache / "nki" / "k1.json"))]
    model = store / "artifacts" / "m" / KEY / "model"
    model.mkdir(parents=True)
    (model / "config.json").write_text('{"model_type": "llama"}\n')
    _write_manifest(model.parent)
    t = _target(profile)
    command = p.serve_command(t)
    manifest = CacheManifest(
        profile=p.ref,
        store_prefix=f"file://{cache}",
        versions={"neuronx-cc": p.release.compiler, **p.release.packages()},
        target="trn2",
        route=p.release.route,
        image=p.release.image,
        argv=list(command.argv),
        env=dict(command.env),
        entries=records,
        nki=nki,
    )
    build = tmp_path / "build"
    build.mkdir()
    write_local(manifest, build / CACHE_MANIFEST)
    ctx = LaunchContext(
        t.normalized(), TOOLCHAIN, f"file://{model.parent}", f"file://{store}/neuron-cache", "llama", None, build
    )
    return store, p.launch_spec(ctx)


def _write_manifest(root: Path) -> None:
    """The artifact's manifest.json, listing every file under `root` as the publish stage would (sync.sh
    reads it for the model's files)."""
    from neuronforge.records.artifact_manifest import ArtifactManifest, SourceRef, ToolchainRef
    from neuronforge.records.parts import FileEntry

    files = [
        FileEntry(path=p.relative_to(root).as_posix(), size=p.stat().st_size, sha256=_sha(p))
        for p in sorted(root.rglob("*"))
        if p.is_file() and p.name != "manifest.json"
    ]
    manifest = ArtifactManifest(cache_key="0" * 64, source=SourceRef(), toolchain=ToolchainRef(), files=files)
    (root / "manifest.json").write_bytes(manifest.to_bytes())


def _sha(path: Path) -> str:
    import hashlib

    return hashlib.sha256(path.read_bytes()).hexdigest()


def _write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def _docs(text: str) -> list[dict]:
    return [d for d in yaml.safe_load_all(text) if d]


def _deployment(text: str) -> dict:
    return next(d for d in _docs(text) if d["kind"] == "Deployment")


# -- applies as written ------------------------------------------------------------------------------------
@pytest.mark.parametrize("profile", ["vllm-neuron-native@2.32", "vllm-neuron-native@2.33"])
def test_the_manifest_applies_as_written_with_the_real_kubectl(tmp_path: Path, profile: str) -> None:
    _store, files = _artifact(tmp_path, profile)
    manifest = tmp_path / "k8s-init-container.yaml"
    manifest.write_text(files["k8s-init-container.yaml"])
    done = applied(manifest, tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        f"configmap/{NAME}-launch created (dry run)",
        f"deployment.apps/{NAME} created (dry run)",
    ]
    assert schema_problems(manifest.read_text()) == []


def test_the_snippet_main_rendered_fails_both_checks(tmp_path: Path) -> None:
    """The checks can fail: main's fragment is no Kubernetes object for kubectl nor for the schema."""
    manifest = tmp_path / "old.yaml"
    manifest.write_text(OLD_SNIPPET)
    done = applied(manifest, tmp_path)
    assert done.returncode != 0 and "Object 'Kind' is missing" in done.stderr, done.stderr
    assert schema_problems(OLD_SNIPPET) == [
        "document 0: not a Kubernetes object (no apiVersion/kind; it has ['initContainers', 'volumes'])"
    ]


def test_a_field_the_schema_does_not_know_is_named(tmp_path: Path) -> None:
    _store, files = _artifact(tmp_path)
    broken = files["k8s-init-container.yaml"].replace("readinessProbe:", "readinesProbe:")
    problems = schema_problems(broken)
    assert len(problems) == 1 and "Deployment" in problems[0] and "readinesProbe" in problems[0], problems


def test_every_mount_names_a_declared_volume_and_the_configmap_carries_the_launch_files(tmp_path: Path) -> None:
    _store, files = _artifact(tmp_path)
    text = files["k8s-init-container.yaml"]
    docs = _docs(text)
    configmaps = {d["metadata"]["name"]: d["data"] for d in docs if d["kind"] == "ConfigMap"}
    pod = _deployment(text)["spec"]["template"]["spec"]
    volumes = {v["name"]: v for v in pod["volumes"]}
    for container in pod["initContainers"] + pod["containers"]:
        assert {m["name"] for m in container["volumeMounts"]} <= set(volumes), container["name"]
    sources = [s["configMap"]["name"] for s in volumes["launch"]["projected"]["sources"]]
    assert sources == sorted(configmaps)  # every ConfigMap the pod reads is in the file, and only those
    carried = {k: v for data in configmaps.values() for k, v in data.items()}
    assert carried == {k: v for k, v in files.items() if k != "k8s-init-container.yaml"}  # byte for byte
    (init,) = pod["initContainers"]
    (serve,) = pod["containers"]
    assert init["command"] == ["bash", "/launch/sync.sh"] and serve["command"] == ["bash", "/launch/serve.sh"]
    # the mounts are where vllm.env puts the cache and the model; the cache is local disk (emptyDir)
    env = read_env_file(_write(tmp_path / "vllm.env", files["vllm.env"]))
    mounts = {m["name"]: m["mountPath"] for m in serve["volumeMounts"]}
    assert mounts["vllm-cache"] == env["VLLM_CACHE_ROOT"] and mounts["model"] == env["MODEL_DIR"]
    assert volumes["vllm-cache"] == {"name": "vllm-cache", "emptyDir": {}}
    # tp 4 at LNC 2 = 8 physical cores = one Trainium2 device, on trn2 nodes only
    assert serve["resources"] == {"limits": {"aws.amazon.com/neuron": 1}, "requests": {"aws.amazon.com/neuron": 1}}
    (term,) = pod["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    assert term["matchExpressions"][0]["values"] == ["trn2.3xlarge", "trn2.48xlarge"]
    assert serve["ports"][0]["containerPort"] == int(env["PORT"])


def test_whole_devices_for_tp_times_lnc_cores() -> None:
    from neuronforge.artifacts import k8s_manifest as k8s

    assert k8s.neuron_devices("trn2", 4, 2) == 1
    assert k8s.neuron_devices("trn2", 64, 2) == 16  # trn2.48xlarge: 16 Trainium2 chips
    assert k8s.neuron_devices("trn2", 16, 1) == 2
    assert k8s.neuron_devices("trn3", 2, 2) == 1
    assert k8s.neuron_devices("inf2", 2, 1) == 1  # inf2.xlarge: one Inferentia2 chip, two NeuronCore-v2
    assert k8s.neuron_devices("trn1", 32, 1) == 16  # trn1.32xlarge: 16 Trainium chips
    with pytest.raises(InvalidInput, match="NeuronCores per device of instance family 'inf1'"):
        k8s.neuron_devices("inf1", 2, 1)


def test_the_image_notes_say_what_is_proven() -> None:
    """2.32: the DLC's Dockerfile installs the AWS CLI and boto3 (CODE); 2.33: its Dockerfile is not
    published, so the manifest says UNVERIFIED and relies on sync.sh's own check."""
    from neuronforge.profiles import vllm_native_k8s as k8s

    assert "Dockerfile.neuronx" in k8s.IMAGE_TOOLS["2.32.0"] and "2.33.0" not in k8s.IMAGE_TOOLS
    assert "UNVERIFIED" in k8s.IMAGE_TOOLS_UNVERIFIED


def test_launch_files_over_one_configmap_are_split_and_one_file_over_it_is_refused() -> None:
    """`kubectl apply` keeps the whole object in an annotation of at most 256 KiB: the files are packed
    into ConfigMaps that each stay under it, and a single file over it is refused in one line."""
    from neuronforge.artifacts import k8s_manifest as k8s

    labels = {"app.kubernetes.io/name": "x"}
    files = {"a.json": "a" * 150_000, "b.json": "b" * 150_000, "c.sh": "echo <&>\n" * 100}
    maps = k8s.pack_configmaps("nf", labels, files)
    assert [m["metadata"]["name"] for m in maps] == ["nf-launch", "nf-launch-2"]
    assert {k: v for m in maps for k, v in m["data"].items()} == files
    assert all(k8s.last_applied_size(m) <= k8s.ANNOTATION_LIMIT - k8s.CONFIGMAP_OVERHEAD for m in maps)
    with pytest.raises(InvalidInput) as refused:
        k8s.pack_configmaps("nf", labels, {"vllm-cache.json": "x" * 300_000})
    assert "\n" not in str(refused.value) and "launch/vllm-cache.json is 300000 bytes" in str(refused.value)


def test_a_split_manifest_applies_too(tmp_path: Path) -> None:
    from neuronforge.profiles import vllm_native_k8s as k8s

    text = k8s.render(
        name=NAME, ref="vllm-neuron-native@2.32.0", sdk="2.32.0", image="img", port=8000, family="trn2",
        files={"vllm-cache.json": "{}" + " " * 200_000, "sync.sh": "x\n" * 50_000, "serve.sh": "y\n"},
        model_dir="/m", cache_root="/c", devices=1, instance_types=["trn2.3xlarge"],
    )  # fmt: skip
    manifest = tmp_path / "split.yaml"
    manifest.write_text(text)
    done = applied(manifest, tmp_path)
    assert done.returncode == 0, done.stderr
    assert [line.split()[0] for line in done.stdout.splitlines()] == [
        f"configmap/{NAME}-launch",
        f"configmap/{NAME}-launch-2",
        f"deployment.apps/{NAME}",
    ]
    assert schema_problems(text) == []


# -- the init container's command, on a host without the AWS CLI ------------------------------------------
def _host_path(tmp_path: Path, boto3: bool = False, fresh: bool = True) -> str:
    """A PATH with bash, coreutils, grep, awk and a python3 — without boto3 unless asked (python -S
    drops site-packages) — and no aws or s5cmd (`fresh`: made now, else the one made before)."""
    bindir = tmp_path / "host-bin"
    if not fresh:
        return str(bindir)
    bindir.mkdir()
    for tool in ("bash", "sh", "cat", "cp", "cut", "dirname", "find", "grep", "awk", "ls", "mkdir", "mv", "rm",
                 "sha256sum", "stat", "touch", "wc"):  # fmt: skip
        found = shutil.which(tool, path="/usr/bin:/bin")
        assert found, tool
        (bindir / tool).symlink_to(found)
    (bindir / "python3").write_text(f'#!/bin/sh\nexec "{sys.executable}" {"" if boto3 else "-S "}"$@"\n')
    (bindir / "python3").chmod(0o755)
    assert not any((bindir / t).exists() for t in ("aws", "s5cmd"))
    return str(bindir)


def _pod_launch(tmp_path: Path, text: str) -> tuple[Path, list[str]]:
    """The /launch folder the projected volume lays out from the manifest's ConfigMap(s), and the init
    container's command with /launch pointing at it."""
    launch = tmp_path / "launch"
    launch.mkdir()
    for doc in _docs(text):
        if doc["kind"] == "ConfigMap":
            for name, body in doc["data"].items():
                (launch / name).write_text(body)
    (init,) = _deployment(text)["spec"]["template"]["spec"]["initContainers"]
    return launch, [w.replace("/launch", str(launch)) for w in init["command"]]


def _run(
    command: list[str], tmp_path: Path, path: str, cwd: Path | None = None, **env: str
) -> subprocess.CompletedProcess[str]:
    """The command in the pod's volumes (MODEL_DIR and VLLM_CACHE_ROOT are where the emptyDirs are mounted)."""
    pod_env = {"PATH": path, "HOME": str(tmp_path), "MODEL_DIR": str(tmp_path / "pod" / "model"),
               "VLLM_CACHE_ROOT": str(tmp_path / "pod" / "cache"), **env}  # fmt: skip
    return subprocess.run(command, env=pod_env, cwd=cwd, capture_output=True, text=True, timeout=120, check=False)


def test_the_init_container_syncs_a_file_store_without_any_transfer_tool(tmp_path: Path) -> None:
    _store, files = _artifact(tmp_path)
    launch, command = _pod_launch(tmp_path, files["k8s-init-container.yaml"])
    path = _host_path(tmp_path)
    done = _run(command, tmp_path, path)
    assert done.returncode == 0, done.stderr
    cache = tmp_path / "pod" / "cache" / "neuron" / "compile_cache"
    keys = sorted(p.name for p in cache.iterdir() if not p.name.startswith(".") and p.name != "nki")
    assert keys == [f"{1:032x}", f"{2:032x}"]
    assert all((cache / k / ".synced").is_file() and (cache / k / MARKER).is_file() for k in keys)
    assert (cache / "nki" / "k1.json").is_file() and (tmp_path / "pod" / "model" / "config.json").is_file()
    # the serving container's serve.sh syncs again: everything is there, nothing is fetched
    again = _run(["bash", str(launch / "sync.sh")], tmp_path, path)
    assert again.returncode == 0 and again.stdout.startswith("sync.sh: 0 fetched; 2 graphs"), again.stdout


# A folder's name holding every shell metacharacter (a line of vllm.env holds it: no newline, no tab).
HOSTILE = "$(touch INJECTED) `touch INJECTED`; & | < > * ? [ ] { } ' \" \\ x"


def test_sync_sh_takes_a_hostile_store_path_and_folders_as_data(tmp_path: Path) -> None:
    """vllm.env's URIs (the store's path), MODEL_DIR and VLLM_CACHE_ROOT (the pod's) are read as data:
    vllm.env is read as `docker run --env-file` reads it, never sourced, and nothing runs."""
    _store, files = _artifact(tmp_path, store_name=f"store {HOSTILE}")
    assert f"store {HOSTILE}/artifacts" in files["vllm.env"]
    _launch, command = _pod_launch(tmp_path, files["k8s-init-container.yaml"])
    pod = tmp_path / f"pod {HOSTILE}"
    env = {"MODEL_DIR": str(pod / "model"), "VLLM_CACHE_ROOT": str(pod / "cache")}
    done = _run(command, tmp_path, _host_path(tmp_path), cwd=tmp_path, **env)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("sync.sh: 8 fetched; 2 graphs"), done.stdout
    assert (pod / "model" / "config.json").is_file() and (pod / "cache/neuron/compile_cache/nki/k1.json").is_file()
    assert not list(tmp_path.rglob("INJECTED"))


@pytest.mark.parametrize(
    ("damage", "said"),
    [
        (lambda m: "{not json", "vllm-cache.json: not JSON (Expecting property name"),
        (lambda m: "[]", "vllm-cache.json: not a JSON object"),
        (lambda m: json.dumps({**m, "entries": {}}), "entries is not a list of cache entries (32-hex keys)"),
        (lambda m: json.dumps({**m, "entries": [{"key": "../../x", "files": []}]}), "(32-hex keys)"),
        (lambda m: json.dumps({**m, "nki": [{"path": 1}]}), 'vllm-cache.json: {"path": 1} is not a file'),
    ],
    ids=["not JSON", "a list", "entries an object", "a key leaving the cache", "an NKI file without fields"],
)
def test_a_damaged_cache_manifest_is_one_line_and_nothing_synced(tmp_path: Path, damage, said: str) -> None:
    _store, files = _artifact(tmp_path)
    launch, command = _pod_launch(tmp_path, files["k8s-init-container.yaml"])
    (launch / "vllm-cache.json").write_text(damage(json.loads(files["vllm-cache.json"])))
    done = _run(command, tmp_path, _host_path(tmp_path))
    assert done.returncode == 1, done.stderr
    assert done.stderr.count("\n") == 1 and done.stderr.startswith("sync.sh: ") and said in done.stderr, done.stderr
    assert "Traceback" not in done.stderr
    assert not [p for p in (tmp_path / "pod" / "cache" / "neuron" / "compile_cache").iterdir() if p.name != "nki"]


def test_vllm_env_is_data_and_a_name_that_changes_how_commands_run_is_refused(tmp_path: Path) -> None:
    _store, files = _artifact(tmp_path)
    launch, command = _pod_launch(tmp_path, files["k8s-init-container.yaml"])
    with (launch / "vllm.env").open("a") as f:
        f.write("EXTRA=$(touch INJECTED); `touch INJECTED`\n")
    done = _run(command, tmp_path, _host_path(tmp_path), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert not list(tmp_path.rglob("INJECTED"))
    for line in ("BASH_ENV=/tmp/x", "LD_PRELOAD=/tmp/x.so", "PATH=/tmp", "not a variable"):
        (launch / "vllm.env").write_text(files["vllm.env"] + line + "\n")
        done = _run(command, tmp_path, _host_path(tmp_path, fresh=False))
        assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr
        assert done.stderr.startswith(f"sync.sh: {launch}/vllm.env line "), done.stderr


NONE_HERE = (
    "needs the AWS CLI (aws), s5cmd or python3 with boto3, and none is here: use an image with awscli, "
    "or put s5cmd on PATH and set SYNC_TOOL=s5cmd"
)


@pytest.mark.parametrize(
    ("tool", "expected"),
    [
        (None, NONE_HERE),
        ("aws", "SYNC_TOOL=aws but aws (the AWS CLI) is not on PATH: use an image with awscli, or set SYNC_TOOL=s5cmd"),
        ("s5cmd", "SYNC_TOOL=s5cmd but s5cmd is not on PATH"),
        ("boto3", "SYNC_TOOL=boto3 but python3 cannot import boto3: pip install boto3"),
        ("rclone", "SYNC_TOOL=rclone: one of auto, aws, s5cmd, boto3"),
    ],
)
def test_an_s3_store_without_the_tool_stops_in_one_line_before_fetching(
    tmp_path: Path, tool: str | None, expected: str
) -> None:
    """The same launch files with the store on s3:// (no endpoint is ever contacted): the init
    container's command names what it lacks and what to do, in one line, having fetched nothing."""
    _store, files = _artifact(tmp_path)
    launch, command = _pod_launch(tmp_path, files["k8s-init-container.yaml"])
    env = read_env_file(launch / "vllm.env")
    text = (launch / "vllm.env").read_text()
    text = text.replace(env["CACHE_URI"], "s3://bucket/farm/vllm-neuron-cache/2.32.0")
    (launch / "vllm.env").write_text(text.replace(env["ARTIFACT_URI"], f"s3://bucket/farm/artifacts/m/{KEY}"))
    done = _run(command, tmp_path, _host_path(tmp_path), **({"SYNC_TOOL": tool} if tool else {}))
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and done.stderr.startswith("sync.sh: ") and expected in done.stderr, done.stderr
    assert not [p for p in (tmp_path / "pod").rglob("*") if p.is_file()]  # nothing fetched, nothing left


def test_python3_with_boto3_is_enough_where_there_is_no_aws_cli(tmp_path: Path) -> None:
    """SYNC_TOOL=auto takes python3 with boto3 when neither aws nor s5cmd is on PATH (the check only:
    test_vllm_native.py fetches with it from a real S3 endpoint)."""
    _store, files = _artifact(tmp_path)
    launch, command = _pod_launch(tmp_path, files["k8s-init-container.yaml"])
    env = read_env_file(launch / "vllm.env")
    (launch / "vllm.env").write_text((launch / "vllm.env").read_text().replace(env["ARTIFACT_URI"], "s3://b/a"))
    done = _run(command, tmp_path, _host_path(tmp_path, boto3=True), AWS_ENDPOINT_URL="http://127.0.0.1:9")
    said = "sync.sh: cannot download s3://b/a/manifest.json with boto3: "
    assert done.returncode == 1 and done.stderr.startswith(said) and done.stderr.count("\n") == 1, done.stderr
