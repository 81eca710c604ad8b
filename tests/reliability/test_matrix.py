"""Every command that touches a store or a model source × every environment failure class, from one
table: a new subcommand fails `test_the_table_covers_every_store_touching_command` until it has a
row, and a new class is one entry in `CLASSES` that every row then runs — or that names, in
`APPLIES`, the commands it cannot apply to and why.

Each case asserts what a user sees: an exit code of 1, 2 or 3, exactly one line on stderr starting
with `error:` that names the resource (bucket, endpoint, path) and the fix, no traceback, no
credential, the store as it was — or, where a class leaves a command's job possible (reading a
read-only store), exit 0. The argv are chosen to fail before any compile, so the whole matrix takes
seconds. The DAG's tasks have their own table in test_matrix_tasks.py.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import http.server
import json
import os
import shutil
import socket
import subprocess
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import boto3
import pytest

from tests.reliability.harness import cli, mount, snapshot

FEED = Path(__file__).parents[1] / "data" / "release-manifests" / "adds-2.33.9.json"
TARGET = ["--instance", "inf2.xlarge", "--tp", "1", "--seq-len", "64"]

# -- the commands: {store}, {model}, {work}, {out}, {artifact} are filled in by each class ------------
COMMANDS: dict[str, list[str]] = {
    "fetch": ["fetch", "{model}", "--store", "{store}", "--work-dir", "{work}"],
    "quantize": ["quantize", "{model}", "--dtype", "int8", "--store", "{store}", "--work-dir", "{work}"],
    "run": ["run", *TARGET, "--model", "{model}", "--store", "{store}"],
    "plan": ["plan", "--model", "{model}", *TARGET],
    "cache-key": ["cache-key", "--model", "{model}", *TARGET, "--work-dir", "{work}"],
    # one candidate, tried by a command that says "does not load" at once: the record is what it writes
    "sweep": [
        "sweep",
        "--model",
        "{model}",
        "--instance",
        "inf2.xlarge",
        "--tp",
        "2",
        "--batch-sizes",
        "1",
        "--seq-lens",
        "64",
        "--try-command",
        "false",
        "--out",
        "{out}",
    ],
    "store ls": ["store", "ls", "{store}"],
    "show": ["show", "{artifact}", "--store", "{store}"],
    "verify": ["verify", "--store", "{store}"],
    "ls": ["ls", "{store}"],
    "gc": ["gc", "{store}", "--keep-compilers", "1"],
    "cache ls": ["cache", "ls", "{store}"],
    "cache stats": ["cache", "stats", "{store}"],
    "cache prune": ["cache", "prune", "{store}", "--incomplete"],
    "catalog stale": ["catalog", "stale", "--store", "{store}"],
    "recompile": ["recompile", "--dry-run", "--store", "{store}"],
    "index rebuild": ["index", "rebuild", "{store}"],
    # the release commands (the store holds no channel: promote creates one, rollback finds none)
    "approve": ["approve", "{artifact}", "--store", "{store}"],
    "reject": ["reject", "{artifact}", "--reason", "wrong answers", "--store", "{store}"],
    "promote": [
        "promote",
        "org/m1",
        "--profile",
        "cpu",
        "--channel",
        "candidate",
        "--build",
        "{artifact}",
        "--store",
        "{store}",
    ],
    "rollback": ["rollback", "org/m1", "--profile", "cpu", "--channel", "candidate", "--store", "{store}"],
    "compare": ["compare", "{artifact}", "{artifact}", "--store", "{store}"],
    "channels": ["channels", "--store", "{store}"],
    "history": ["history", "org/m1", "--profile", "cpu", "--channel", "candidate", "--store", "{store}"],
    # the published artifact's lease (released when it published): break rewrites it
    "lease ls": ["lease", "ls", "{store}"],
    "lease break": ["lease", "break", "{artifact}", "--yes", "--store", "{store}"],
    # the release feed: sync reads a manifest file of the repo (never the network) and proposes 2.33.9;
    # accept and reject decide a proposal the store does not hold (where it is readable they say so)
    "releases ls": ["releases", "ls", "--store", "{store}"],
    "releases sync": ["releases", "sync", "--manifest", str(FEED), "--store", "{store}"],
    "releases accept": ["releases", "accept", "2.33.9", "--store", "{store}"],
    "releases reject": ["releases", "reject", "2.33.9", "--reason", "regresses", "--store", "{store}"],
    # re-smokes the published build at a release; require-release writes the channel's requirement
    "attest": ["attest", "{artifact}", "--sdk", "2.33.1", "--store", "{store}", "--work-dir", "{work}"],
    "require-release": [
        "require-release",
        "org/m1",
        "--channel",
        "candidate",
        "--profile",
        "cpu",
        "--release",
        "2.33.1",
        "--store",
        "{store}",
    ],
}

# Subcommands that open neither a store nor a model source (or only the catalog file), with why.
STORE_FREE = {
    "profiles": "prints the profile registry",
    "worker-queues": "prints queue names",
    "airflow": "starts a local Airflow",
    "config": "prints the settings: names the store, never opens it",
    "catalog check": "plans the catalog's targets; its sources are the catalog's (covered by tests/test_catalog.py)",
}

# What each command does with what it touches (the classes below pick from these).
MODEL_READERS = {c for c, argv in COMMANDS.items() if "{model}" in argv}
STORE_READERS = {"store ls", "show", "verify", "ls", "cache ls", "cache stats", "catalog stale", "gc", "index rebuild"}
STORE_READERS |= {"cache prune", "channels", "recompile", "lease ls", "releases ls", "releases sync", "compare"}
# rollback and history read a channel the store does not hold: where the store is readable they say so
# (exit 2, `OWN_WORDS`); where it is not, they fail as every command does. rollback's write is promote's.
STORE_WRITERS = {"fetch", "quantize", "run", "gc", "cache prune", "index rebuild", "approve", "reject", "promote"}
STORE_WRITERS |= {"lease break", "releases sync", "releases accept", "releases reject", "attest", "require-release"}
UPLOADING = {"fetch", "quantize", "run"}  # the ones that upload a local folder
# the ones that list and download an s3:// model (plan reads only a local folder; sweep only config.json)
S3_MODEL_READERS = {"fetch", "quantize", "run", "cache-key"}
WORK_WRITERS = {"fetch", "quantize", "run", "sweep"}  # write below --work-dir / NEURONFORGE_HOME or --out


def _subcommands(parser: argparse.ArgumentParser, prefix: str = "") -> Iterator[str]:
    subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    if not subs:
        yield prefix
        return
    for name, child in subs[0].choices.items():
        yield from _subcommands(child, f"{prefix} {name}".strip())


def test_the_table_covers_every_store_touching_command() -> None:
    from neuronforge.interfaces.cli import build_parser

    every = set(_subcommands(build_parser()))
    assert every - set(STORE_FREE) == set(COMMANDS), (
        "add the new command to COMMANDS (or, if it opens no store or source, to STORE_FREE)"
    )


# -- the classes: which commands each applies to, and why not the others ---------------------------
ALL = set(COMMANDS)
CLASSES: dict[str, tuple[set[str], str]] = {
    "endpoint down": (ALL, ""),
    "bucket absent": (ALL, ""),
    "no credentials": (ALL, ""),
    "unknown access key": (ALL, ""),
    "wrong secret": (ALL, ""),
    "access denied": (ALL, ""),
    "read-only store": (STORE_READERS | STORE_WRITERS | {"sweep"}, "writes no store and no --out"),
    "store disk full": (STORE_READERS | STORE_WRITERS | {"sweep"}, "writes no store and no --out"),
    "work disk full": (WORK_WRITERS, "writes nothing below --work-dir / NEURONFORGE_HOME"),
    "file for folder": (ALL, ""),
    "non-UTF-8 name going up": (UPLOADING, "uploads no local folder"),
    "hostile keys coming down": (
        S3_MODEL_READERS,
        "lists no S3 model prefix (plan reads only a local folder, sweep only the model's config.json)",
    ),
    "hostile keys in the store": (
        STORE_READERS,
        "lists no store (writers write their own keys; model readers list the model's prefix: the class above)",
    ),
    "Hub offline": (MODEL_READERS, "takes no Hub model id"),
    "Hub refuses connections": (MODEL_READERS, "takes no Hub model id"),
    "Hub answers 503": (MODEL_READERS, "takes no Hub model id"),
}


def test_every_class_says_why_it_skips_a_command() -> None:
    for kind, (applies, why) in CLASSES.items():
        assert applies <= ALL, (kind, applies - ALL)
        assert applies == ALL or why, f"{kind}: say why it cannot apply to {sorted(ALL - applies)}"


# -- the environments ------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def stopped_endpoint() -> str:
    """A real S3 endpoint that was running and is stopped: its port refuses connections."""
    from moto.server import ThreadedMotoServer

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    server.stop()
    return f"http://127.0.0.1:{port}"


@pytest.fixture(scope="module")
def live_bucket(s3_endpoint: str) -> str:
    boto3.client("s3", endpoint_url=s3_endpoint).create_bucket(Bucket="nf-matrix")
    return "nf-matrix"


SECRET = "nf-matrix-SECRET-never-printed-0123456789"


@pytest.fixture(scope="module")
def iam_keys(s3_endpoint: str) -> dict[str, tuple[str, str]]:
    """Two IAM users of the moto endpoint: `reader` may do nothing (AccessDenied), `admin` anything."""
    iam = boto3.client("iam", endpoint_url=s3_endpoint, region_name="us-east-1")
    keys = {}
    tag = uuid4()  # the moto backend is the process's: each module that uses these gets its own users
    for user in ("reader", "admin"):
        iam.create_user(UserName=f"nf-matrix-{user}-{tag}")
        key = iam.create_access_key(UserName=f"nf-matrix-{user}-{tag}")["AccessKey"]
        keys[user] = (key["AccessKeyId"], key["SecretAccessKey"])
    policy = '{"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "*", "Resource": "*"}]}'
    iam.put_user_policy(UserName=f"nf-matrix-admin-{tag}", PolicyName="all", PolicyDocument=policy)
    return keys


@contextlib.contextmanager
def _auth(on: bool) -> Iterator[None]:
    """moto checks signatures and IAM policies only when asked to (INITIAL_NO_AUTH_ACTION_COUNT=0,
    set here for its in-process server): on for the command, off again for the test's own checks."""
    from moto import settings
    from moto.core.authorization import ActionAuthenticatorMixin

    before = settings.INITIAL_NO_AUTH_ACTION_COUNT
    settings.INITIAL_NO_AUTH_ACTION_COUNT = 0 if on else float("inf")
    ActionAuthenticatorMixin.request_count = 0
    try:
        yield
    finally:
        settings.INITIAL_NO_AUTH_ACTION_COUNT = before


def _everything(endpoint: str) -> dict[str, list[str]]:
    """Every bucket and key of an endpoint: what "the store unchanged" means for S3."""
    s3 = boto3.client("s3", endpoint_url=endpoint)
    with _auth(False):
        return {
            b["Name"]: sorted(o["Key"] for o in s3.list_objects_v2(Bucket=b["Name"]).get("Contents", []))
            for b in s3.list_buckets()["Buckets"]
        }


def _publish_some(root: Path) -> str:
    """A small store of the shape readers rely on: two artifacts of two compiler versions (so gc has
    one to delete), with their files, index pointers and farm index, and an incomplete compile-cache
    entry (so cache prune --incomplete has one to delete). Returns the key of the newer artifact."""
    from neuronforge.artifacts import layout
    from neuronforge.artifacts.farm_index import note_published
    from neuronforge.records.artifact_manifest import ArtifactManifest
    from neuronforge.records.index_entry import IndexEntry
    from neuronforge.stores import open_store
    from tests.farm_index.publishers import key_of

    store = open_store(f"file://{root}")
    for i, version in enumerate(("1.0", "2.0")):
        key = key_of("matrix", i)
        prefix = f"artifacts/org/m{i}/rev/t-{key[:6]}/{key[:12]}"
        store.put_bytes(b"weights", f"{prefix}/cpu-aoti/model.bin")
        manifest = {
            "cache_key": key,
            "source": {"kind": "hub", "location": f"org/m{i}", "revision": "rev"},
            "toolchain": {
                "backend": "torch-inductor",
                "backend_version": "2.0",
                "compiler": "torch-inductor",
                "compiler_version": version,
            },
            "profile": {"ref": "cpu@local", "name": "cpu", "sdk_release": "-", "title": "CPU"},
            "compiler_flags": [],
            "smoke": {"passed": True, "reason": "matches the reference"},
            "target_slug": f"t-{key[:6]}",
            "request": {"target": {"instance_type": "inf2.xlarge", "batch_size": 1, "sequence_length": 64}},
            "files": [{"path": "cpu-aoti/model.bin", "size": 7, "sha256": hashlib.sha256(b"weights").hexdigest()}],
            "formats": {"cpu-aoti": "cpu-aoti"},
            "published_at": "2026-11-25T00:00:00Z",
        }
        store.write_json(f"{prefix}/{layout.ARTIFACT_MANIFEST}", manifest)
        index = {"schema_version": 1, "cache_key": key, "manifest": f"{prefix}/{layout.ARTIFACT_MANIFEST}"}
        index["prefix"] = prefix
        store.put_if_absent(json.dumps(index).encode(), layout.index_entry(key))
        note_published(store, IndexEntry.from_json(index), ArtifactManifest.from_json(manifest))
    store.put_bytes(b"half", "neuron-cache/neuronxcc-2.0/MODULE_0123456789abcdef0123+d41d8cd9/model.neff")
    from neuronforge.artifacts import leases  # the newer one's lease, lapsed: `lease break` rewrites it

    leases.renew(store, leases.try_acquire(store, key_of("matrix", 1), "matrix:1:00000000"), ttl_s=0.001)
    return key_of("matrix", 1)


HOSTILE_MODEL_KEYS = ("model/../escape.json", "model/a//b.json", "model//abs/escape.json", "model/./config.json")
HOSTILE_STORE_KEYS = (
    "store/../escape.json",
    "store/index//abs.json",
    "store/index/../../escape.json",
    "store/artifacts/a//b/manifest.json",
    "store/neuron-cache/../x.done",
)


def _hub_503() -> Iterator[str]:
    class Failing(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(503)
            self.end_headers()

        do_HEAD = do_GET

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Failing)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()


hub_503 = pytest.fixture(scope="module")(_hub_503)


@dataclass
class Env:
    store: str
    model: str
    words: tuple[str, ...]  # each must be in the error line
    state: Callable[[], object] | None  # its result before and after must be equal
    succeeds: set[str] = field(default_factory=set)  # commands whose job this environment leaves possible
    artifact: str = "abcdef123456"
    work: str | None = None
    out: str | None = None
    secrets: tuple[str, ...] = ()  # never in the output
    auth: bool = False  # moto checks credentials during the command
    seconds: float = 30.0  # at most this long


def use_home_and_catalog(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, model: Path) -> None:
    """A NEURONFORGE_HOME of the test's own, no NEURONFORGE_STORE, and `catalog stale`'s catalog: the tiny
    model from a local folder (the default one needs the Hub)."""
    monkeypatch.setenv("NEURONFORGE_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("NEURONFORGE_STORE", raising=False)
    catalog = tmp_path / "models.yaml"
    target = "{instance_type: inf2.xlarge, tp_degree: 2, sequence_length: 64, dtype: fp32, profile: cpu}"
    catalog.write_text(f"models:\n  - source: {model}\n    targets:\n      - {target}\n")
    monkeypatch.setenv("NEURONFORGE_CATALOG", str(catalog))


@pytest.fixture
def make_env(
    request: pytest.FixtureRequest,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    tiny_llama_template: Path,
):
    use_home_and_catalog(monkeypatch, tmp_path, tiny_llama_template)
    mounts: list[Path] = []
    request.addfinalizer(lambda: [subprocess.run(["umount", "-l", str(m)], check=False) for m in mounts])

    def mount_at(point: Path, *args: str) -> None:
        point.mkdir(parents=True, exist_ok=True)
        why = mount(*args, str(point))
        if why:
            pytest.skip(f"cannot mount here ({why})")
        mounts.append(point)

    def model_copy() -> Path:
        model = tmp_path / "model"
        if not model.exists():
            shutil.copytree(tiny_llama_template, model)
        return model

    def make(kind: str) -> Env:
        if kind == "endpoint down":
            endpoint = request.getfixturevalue("stopped_endpoint")
            monkeypatch.setenv("AWS_ENDPOINT_URL", endpoint)
            return Env("s3://nf-down/store", "s3://nf-down/model", ("cannot reach the S3 endpoint", endpoint), None)
        if kind in ("Hub offline", "Hub refuses connections", "Hub answers 503"):
            store = tmp_path / "store"
            store.mkdir()
            model = "hf://nf-absent-org/nf-absent-model"
            state = lambda: snapshot(tmp_path)  # noqa: E731
            if kind == "Hub offline":  # the suite runs with HF_HUB_OFFLINE=1 and an empty Hugging Face cache
                words = ("nf-absent-org/nf-absent-model", "not in the local Hugging Face cache", "HF_HUB_OFFLINE")
                return Env(str(store), model, words, state)
            from tests.hubdown import closed_endpoint, hub_at

            if kind == "Hub refuses connections":
                endpoint = hub_at(closed_endpoint(), monkeypatch, request)
                words = (f"cannot reach the Hugging Face Hub at {endpoint}", "HF_ENDPOINT", "HF_HUB_OFFLINE")
            else:
                endpoint = hub_at(request.getfixturevalue("hub_503"), monkeypatch, request)
                words = (f"the Hugging Face Hub at {endpoint} answered HTTP 503", "retry", "HF_HUB_OFFLINE")
            return Env(str(store), model, ("nf-absent-org/nf-absent-model", *words), state, seconds=5.0)
        if kind in ("read-only store", "store disk full", "work disk full"):
            model = model_copy()
            if kind == "read-only store":
                src, point = tmp_path / "ro-src", tmp_path / "ro"
                artifact = _publish_some(src)
                mount_at(point, "--bind", str(src))
                mount_at(point, "-o", "remount,bind,ro")
                words = ("Read-only file system", str(point), "writable store")
                return Env(
                    str(point),
                    str(model),
                    words,
                    lambda: snapshot(src),
                    succeeds=STORE_READERS - STORE_WRITERS,
                    artifact=artifact[:12],
                    out=str(point / "sweep.json"),
                )
            point = tmp_path / "small"
            mount_at(point, "-t", "tmpfs", "-o", "size=256k", "tmpfs")
            words = ("No space left on device", str(point), "free space there")
            if kind == "store disk full":
                artifact = _publish_some(point / "store")
                _fill(point)
                return Env(
                    str(point / "store"),
                    str(model),
                    words,
                    lambda: snapshot(point / "store"),
                    # deleting frees space; listing and reading need none
                    succeeds=(STORE_READERS - STORE_WRITERS) | {"gc", "cache prune"},
                    artifact=artifact[:12],
                    out=str(point / "sweep.json"),
                )
            _fill(point)
            monkeypatch.setenv("NEURONFORGE_HOME", str(point / "home"))
            store = tmp_path / "store"
            return Env(
                str(store),
                str(model),
                words,
                lambda: _published(store),
                work=str(point / "work"),
                out=str(point / "sweep.json"),
            )
        endpoint = request.getfixturevalue("s3_endpoint")
        bucket = request.getfixturevalue("live_bucket")
        monkeypatch.setenv("AWS_ENDPOINT_URL", endpoint)
        state = lambda: _everything(endpoint)  # noqa: E731
        if kind == "bucket absent":
            words = ("bucket 'nf-absent' does not exist", "aws s3 mb s3://nf-absent")
            return Env("s3://nf-absent/store", "s3://nf-absent/model", words, state)
        if kind == "no credentials":
            for var in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_PROFILE", "AWS_SESSION_TOKEN"):
                monkeypatch.delenv(var, raising=False)
            monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
            monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
            monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
            words = ("no AWS credentials", f"s3://{bucket}", "AWS_ACCESS_KEY_ID")
            return Env(f"s3://{bucket}/store", f"s3://{bucket}/model", words, state)
        if kind in ("unknown access key", "wrong secret", "access denied"):
            keys = request.getfixturevalue("iam_keys")
            key_id, secret = {
                "unknown access key": ("AKIANFMATRIXUNKNOWN1", SECRET),
                "wrong secret": (keys["reader"][0], SECRET),
                "access denied": keys["reader"],
            }[kind]
            monkeypatch.setenv("AWS_ACCESS_KEY_ID", key_id)
            monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", secret)
            monkeypatch.delenv("AWS_PROFILE", raising=False)
            fix = "denied" if kind == "access denied" else "rejected"
            words = (endpoint, f"s3://{bucket}", fix, "AWS_PROFILE")
            return Env(
                f"s3://{bucket}/store", f"s3://{bucket}/model", words, state, secrets=(key_id, secret), auth=True
            )
        if kind == "hostile keys coming down":
            s3 = boto3.client("s3", endpoint_url=endpoint)
            prefix = f"hostile-{uuid4()}"
            for path in sorted(tiny_llama_template.iterdir()):
                s3.upload_file(str(path), bucket, f"{prefix}/model/{path.name}")
            for key in HOSTILE_MODEL_KEYS:
                s3.put_object(Bucket=bucket, Key=f"{prefix}/{key}", Body=b'{"model_type": "llama"}')
            store = tmp_path / "store"
            words = (f"s3://{bucket}/{prefix}/model", "cannot be file names inside a folder", "rename or remove them")
            everything = lambda: (_everything(endpoint), snapshot(tmp_path))  # noqa: E731
            return Env(str(store), f"s3://{bucket}/{prefix}/model", words, everything, out=str(tmp_path / "sweep.json"))
        if kind == "hostile keys in the store":
            s3 = boto3.client("s3", endpoint_url=endpoint)
            prefix = f"hostile-{uuid4()}"
            local = tmp_path / "published"
            artifact = _publish_some(local)
            for path in sorted(p for p in local.rglob("*") if p.is_file()):
                s3.upload_file(str(path), bucket, f"{prefix}/store/{path.relative_to(local).as_posix()}")
            for key in HOSTILE_STORE_KEYS:
                s3.put_object(Bucket=bucket, Key=f"{prefix}/{key}", Body=b'{"manifest": "../../escape.json"}')
            # the bytes FF FE in a key (boto3 sends only UTF-8; a raw request does not)
            raw = urllib.request.Request(
                f"{endpoint}/{bucket}/{prefix}/store/index/%FF%FE.json", data=b"{}", method="PUT"
            )
            assert urllib.request.urlopen(raw).status == 200
            return Env(
                f"s3://{bucket}/{prefix}/store",
                "unused",
                (),
                state,
                succeeds=set(STORE_READERS),
                artifact=artifact[:12],
            )
        if kind == "file for folder":
            thing = tmp_path / "a-file"
            thing.write_text("not a folder\n")
            return Env(str(thing), str(thing), (str(thing), "is a file, not a folder"), lambda: snapshot(tmp_path))
        assert kind == "non-UTF-8 name going up"
        model = tmp_path / "model"
        shutil.copytree(tiny_llama_template, model)
        (model / "model.safetensors").rename(model / os.fsdecode(b"model-\xff.safetensors"))
        words = (str(model), "not valid UTF-8", "rename")
        return Env(f"s3://{bucket}/store", str(model), words, state)

    return make


def _published(store: Path) -> tuple[dict[str, str], list[str]]:
    """A store's artifacts, checkpoints and index, and the leases still held: a failed run may record
    its failure (failures/, the farm index) but publish nothing and hold no lease."""
    records = ("failures/", "farm-index/", "locks/")
    held = [
        p.name for p in store.glob("locks/*") if not p.name.startswith(".") and json.loads(p.read_text())["expires"]
    ]
    return {k: v for k, v in snapshot(store).items() if not k.startswith(records)}, held


def uuid4() -> str:
    import uuid

    return uuid.uuid4().hex[:8]


def _fill(point: Path) -> None:
    """Fill a tmpfs to the last byte (tmpfs counts pages: write until ENOSPC)."""
    with open(point / "filler", "wb", buffering=0) as f, contextlib.suppress(OSError):
        while True:
            f.write(b"\0" * 4096)


# Where a command's answer to a class is another clean one-line error than the class's own.
OWN_WORDS: dict[tuple[str, str], tuple[str, ...]] = {
    # plan reads only local configs: an s3:// model is a usage error naming it, a file is read as config.json
    **{
        ("plan", k): ("{model}", "plan reads a local folder")
        for k in (
            *(k for k in CLASSES if CLASSES[k][0] is ALL),
            "Hub offline",
            "Hub refuses connections",
            "Hub answers 503",
        )
    },
    ("plan", "file for folder"): ("{model}", "is not valid JSON"),
    # a readable store that cannot be written: these find what they would decide or attest absent first
    **{
        (command, k): words
        for k in ("read-only store", "store disk full")
        for command, words in {
            "releases accept": ("2.33.9", "proposes what a manifest adds"),
            "releases reject": ("2.33.9", "proposes what a manifest adds"),
            "attest": ("the release table does not say what 2.33.1 changes",),
            "require-release": ("no channel org/m1", "promote a build to it first"),
        }.items()
    },
}


# Exit codes that mean a command did its job ("stale found" is catalog stale's finding, and a dry
# run's "would rebuild" is recompile's, not a failure).
DONE = {"catalog stale": {0, 4}, "recompile": {0, 4}}

CASES = [(c, k) for k, (applies, _) in CLASSES.items() for c in COMMANDS if c in applies]


@pytest.mark.parametrize(("command", "kind"), CASES, ids=[f"{c}|{k}" for c, k in CASES])
def test_matrix(command: str, kind: str, make_env, tmp_path: Path) -> None:
    env = make_env(kind)
    fill = {
        "store": env.store,
        "model": env.model,
        "work": env.work or tmp_path / "work",
        "out": env.out or tmp_path / "sweep.json",
        "artifact": env.artifact,
    }
    argv = [a.format(**fill) for a in COMMANDS[command]]
    before = env.state() if env.state else None
    started = time.monotonic()
    with _auth(env.auth):
        outcome = cli(argv)
    took = time.monotonic() - started
    assert outcome.traceback is None, outcome.traceback
    assert "Traceback" not in outcome.text, outcome.text
    for secret in env.secrets:
        assert secret not in outcome.text, outcome.text
    assert took < env.seconds, f"took {took:.1f} s"
    if command in env.succeeds:
        assert outcome.code in DONE.get(command, {0}), outcome.text
    else:
        assert outcome.code in (1, 2, 3), (outcome.code, outcome.text)
        lines = outcome.err.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("error:"), outcome.err
        for word in OWN_WORDS.get((command, kind), env.words):
            word = word.format(model=env.model)
            assert word in lines[0], (word, lines[0])
    if env.state and command in env.succeeds & STORE_WRITERS:  # it did its job: the store stays consistent
        checked = cli(["verify", "--store", env.store])
        assert checked.code == 0 and "matches the manifests" in checked.out, checked.text
    elif env.state:
        assert env.state() == before
    # nothing a hostile key names was written, wherever it would have landed
    assert not list(tmp_path.rglob("escape.json")) and not Path("/abs/escape.json").exists()
    assert not (tmp_path.parent / "escape.json").exists()
