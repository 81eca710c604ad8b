"""Every command that touches a store or a model source × every environment failure class, from one
table: a new subcommand fails `test_the_table_covers_every_store_touching_command` until it has a
row, and a new class is one entry in `CLASSES` that every row then runs.

Each case asserts what a user sees: an exit code of 1, 2 or 3, exactly one line on stderr starting
with `error:` that names the resource (bucket, endpoint, path), no traceback, and the store as it was.
The argv are chosen to fail before any compile, so the whole matrix takes seconds.
"""

from __future__ import annotations

import argparse
import os
import shutil
import socket
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import boto3
import pytest

from tests.reliability.harness import cli, snapshot

TARGET = ["--instance", "inf2.xlarge", "--tp", "1", "--seq-len", "64"]

# -- the commands: {store}, {model}, {work}, {tmp} are filled in by each class --------------------------
COMMANDS: dict[str, list[str]] = {
    "fetch": ["fetch", "{model}", "--store", "{store}", "--work-dir", "{work}"],
    "quantize": ["quantize", "{model}", "--dtype", "int8", "--store", "{store}", "--work-dir", "{work}"],
    "run": ["run", *TARGET, "--model", "{model}", "--store", "{store}"],
    "plan": ["plan", "--model", "{model}", *TARGET],
    "cache-key": ["cache-key", "--model", "{model}", *TARGET, "--work-dir", "{work}"],
    "sweep": ["sweep", "--model", "{model}", "--instance", "inf2.xlarge", "--out", "{tmp}/sweep.json"],
    "store ls": ["store", "ls", "{store}"],
    "show": ["show", "abcdef123456", "--store", "{store}"],
    "verify": ["verify", "--store", "{store}"],
    "ls": ["ls", "{store}"],
    "gc": ["gc", "{store}", "--keep-compilers", "1"],
    "cache ls": ["cache", "ls", "{store}"],
    "cache stats": ["cache", "stats", "{store}"],
    "cache prune": ["cache", "prune", "{store}", "--incomplete"],
    "catalog stale": ["catalog", "stale", "--store", "{store}"],
    "index rebuild": ["index", "rebuild", "{store}"],
}

# Subcommands that open neither a store nor a model source (or only the catalog file), with why.
STORE_FREE = {
    "profiles": "prints the profile registry",
    "worker-queues": "prints queue names",
    "airflow": "starts a local Airflow",
    "catalog check": "plans the catalog's targets; its sources are the catalog's (covered by tests/test_catalog.py)",
}

# Commands that upload a local folder (the only ones a name going up can break).
UPLOADING = {"fetch", "quantize", "run"}


def _subcommands(parser: argparse.ArgumentParser, prefix: str = "") -> Iterator[str]:
    subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    if not subs:
        yield prefix
        return
    for name, child in subs[0].choices.items():
        yield from _subcommands(child, f"{prefix} {name}".strip())


def test_the_table_covers_every_store_touching_command() -> None:
    from neuronforge.cli import build_parser

    every = set(_subcommands(build_parser()))
    assert every - set(STORE_FREE) == set(COMMANDS), (
        "add the new command to COMMANDS (or, if it opens no store or source, to STORE_FREE)"
    )


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


def _everything(endpoint: str) -> dict[str, list[str]]:
    """Every bucket and key of an endpoint: what "the store unchanged" means for S3."""
    s3 = boto3.client("s3", endpoint_url=endpoint)
    return {
        b["Name"]: sorted(o["Key"] for o in s3.list_objects_v2(Bucket=b["Name"]).get("Contents", []))
        for b in s3.list_buckets()["Buckets"]
    }


@dataclass
class Env:
    store: str
    model: str
    words: tuple[str, ...]  # each must be in the error line
    state: object  # a callable's result before and after must be equal


CLASSES = (
    "endpoint down",
    "bucket absent",
    "no credentials",
    "file for folder",
    "non-UTF-8 name going up",
    "Hub offline",
)


@pytest.fixture
def make_env(
    request: pytest.FixtureRequest,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    tiny_llama_template: Path,
):
    monkeypatch.setenv("NEURONFORGE_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("NEURONFORGE_STORE", raising=False)

    def make(kind: str) -> Env:
        if kind == "endpoint down":
            endpoint = request.getfixturevalue("stopped_endpoint")
            monkeypatch.setenv("AWS_ENDPOINT_URL", endpoint)
            return Env("s3://nf-down/store", "s3://nf-down/model", ("cannot reach the S3 endpoint", endpoint), None)
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
        if kind == "file for folder":
            thing = tmp_path / "a-file"
            thing.write_text("not a folder\n")
            return Env(str(thing), str(thing), (str(thing), "is a file, not a folder"), lambda: snapshot(tmp_path))
        if kind == "Hub offline":  # the suite runs with HF_HUB_OFFLINE=1 and an empty Hugging Face cache
            store = tmp_path / "store"
            store.mkdir()
            words = ("nf-absent-org/nf-absent-model", "not in the local Hugging Face cache", "HF_HUB_OFFLINE")
            return Env(str(store), "hf://nf-absent-org/nf-absent-model", words, lambda: snapshot(tmp_path))
        assert kind == "non-UTF-8 name going up"
        model = tmp_path / "model"
        shutil.copytree(tiny_llama_template, model)
        (model / "model.safetensors").rename(model / os.fsdecode(b"model-\xff.safetensors"))
        words = (str(model), "not valid UTF-8", "rename")
        return Env(f"s3://{bucket}/store", str(model), words, state)

    return make


# Where a command's answer to a class is another clean one-line error than the class's own.
OWN_WORDS: dict[tuple[str, str], tuple[str, ...]] = {
    # plan reads only local configs: an s3:// model is a usage error naming it, a file is read as config.json
    **{("plan", k): ("{model}", "plan reads a local folder") for k in (*CLASSES[:3], "Hub offline")},
    ("plan", "file for folder"): ("{model}", "is not valid JSON"),
}


def _applies(command: str, kind: str) -> bool:
    if kind == "non-UTF-8 name going up":
        return command in UPLOADING
    if kind == "Hub offline":
        return "{model}" in COMMANDS[command]
    return True


CASES = [(c, k) for c in COMMANDS for k in CLASSES if _applies(c, k)]


@pytest.mark.parametrize(("command", "kind"), CASES, ids=[f"{c}|{k}" for c, k in CASES])
def test_matrix(command: str, kind: str, make_env, tmp_path: Path) -> None:
    env = make_env(kind)
    argv = [a.format(store=env.store, model=env.model, work=tmp_path / "work", tmp=tmp_path) for a in COMMANDS[command]]
    before = env.state() if env.state else None
    outcome = cli(argv)
    assert outcome.traceback is None, outcome.traceback
    assert "Traceback" not in outcome.text, outcome.text
    assert outcome.code in (1, 2, 3), (outcome.code, outcome.text)
    lines = outcome.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error:"), outcome.err
    for word in OWN_WORDS.get((command, kind), env.words):
        word = word.format(model=env.model)
        assert word in lines[0], (word, lines[0])
    if env.state:
        assert env.state() == before
