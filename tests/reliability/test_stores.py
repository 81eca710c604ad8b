"""Stores that fail or are not what they claim: an S3 endpoint that is down, a bucket that does not
exist, a mistyped folder given to a command that only reads, index entries and manifests that are
other JSON files, and artifacts whose files were truncated or deleted.

Each ends in one line naming the resource and the fix (or, for `ls`, a listing that says what is
wrong with which entry), nothing is downloaded or compiled first, and nothing is created.
"""

from __future__ import annotations

import json
import shutil
import socket
from pathlib import Path

import boto3
import pytest

from tests.conftest import Compiled
from tests.reliability.harness import cli, expect_error, snapshot

EXIT_OK, EXIT_FAILURE, EXIT_USAGE, EXIT_REJECTED = 0, 1, 2, 3
TARGET = ["--instance", "inf2.xlarge", "--tp", "1", "--seq-len", "64"]


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "home"
    monkeypatch.setenv("NEURONFORGE_HOME", str(home))
    monkeypatch.delenv("NEURONFORGE_STORE", raising=False)
    return home


def _nothing_downloaded(home: Path) -> None:
    work = home / "work"
    assert not (work / "objects").exists() or not any((work / "objects").iterdir())
    assert not (work / "staging").exists() or not any((work / "staging").iterdir())


# -- an S3 endpoint that was running and is stopped ---------------------------------------------
@pytest.fixture
def stopped_endpoint(monkeypatch: pytest.MonkeyPatch) -> str:
    """A real moto S3 server on 127.0.0.1 with a bucket, then stopped: the port refuses."""
    from moto.server import ThreadedMotoServer

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    endpoint = f"http://127.0.0.1:{port}"
    boto3.client("s3", endpoint_url=endpoint).create_bucket(Bucket="nf-down")
    server.stop()
    monkeypatch.setenv("AWS_ENDPOINT_URL", endpoint)
    return endpoint


DOWN_CASES = {
    "run": ["run", *TARGET, "--store", "s3://nf-down/store"],
    "fetch": ["fetch", "builtin:tiny-llama", "--store", "s3://nf-down/store"],
    "fetch from s3": ["fetch", "s3://nf-down/model", "--store", "{tmp}/store"],
    "ls": ["ls", "s3://nf-down/store"],
    "store ls": ["store", "ls", "s3://nf-down/store"],
    "show": ["show", "s3://nf-down/store/artifacts/a/manifest.json"],
    "verify": ["verify", "s3://nf-down/store/artifacts/a"],
    "cache ls": ["cache", "ls", "s3://nf-down/store"],
}


@pytest.mark.parametrize("case", sorted(DOWN_CASES))
def test_a_stopped_s3_endpoint_is_one_line_naming_it(
    case: str, stopped_endpoint: str, home: Path, tmp_path: Path
) -> None:
    argv = [a.replace("{tmp}", str(tmp_path)) for a in DOWN_CASES[case]]
    outcome = cli(argv)
    expect_error(outcome, EXIT_FAILURE, "cannot reach the S3 endpoint", stopped_endpoint, "AWS_ENDPOINT_URL")
    assert len(outcome.err.strip().splitlines()) == 1, outcome.err
    _nothing_downloaded(home)


# -- a bucket that does not exist -----------------------------------------------------------------
ABSENT_CASES = {
    "run": ["run", *TARGET, "--store", "s3://nf-absent-bucket/store"],
    "ls": ["ls", "s3://nf-absent-bucket"],
    "store ls": ["store", "ls", "s3://nf-absent-bucket/x"],
    "gc": ["gc", "s3://nf-absent-bucket", "--keep-compilers", "1"],
    "verify": ["verify", "s3://nf-absent-bucket/artifacts/a"],
}


@pytest.mark.parametrize("case", sorted(ABSENT_CASES))
def test_an_absent_bucket_is_named_before_any_work(case: str, s3_env: str, home: Path) -> None:
    outcome = cli(ABSENT_CASES[case])
    expect_error(outcome, EXIT_FAILURE, "bucket 'nf-absent-bucket' does not exist", "aws s3 mb s3://nf-absent-bucket")
    _nothing_downloaded(home)
    assert not (home / "demo").exists() or case == "run"  # run may have generated its built-in model


def test_run_checks_the_store_before_downloading_an_s3_model(
    tiny_llama: Path, s3_env: str, s3_bucket: str, home: Path
) -> None:
    s3 = boto3.client("s3", endpoint_url=s3_env)
    for path in tiny_llama.iterdir():
        s3.upload_file(str(path), s3_bucket, f"model/{path.name}")
    outcome = cli(["run", *TARGET, "--model", f"s3://{s3_bucket}/model", "--store", "s3://nf-absent-bucket/s"])
    expect_error(outcome, EXIT_FAILURE, "bucket 'nf-absent-bucket' does not exist")
    _nothing_downloaded(home)


# -- read-only commands on a mistyped folder ------------------------------------------------------
READ_CASES = {
    "ls": ["ls", "{store}"],
    "store ls": ["store", "ls", "{store}"],
    "show": ["show", "{store}/artifacts/x/manifest.json"],
    "verify": ["verify", "{store}/artifacts/x"],
    "cache ls": ["cache", "ls", "{store}"],
    "cache prune": ["cache", "prune", "{store}", "--incomplete"],
    "gc": ["gc", "{store}", "--keep-compilers", "1"],
}


@pytest.mark.parametrize("case", sorted(READ_CASES))
def test_reading_a_mistyped_store_is_an_error_and_creates_nothing(case: str, tmp_path: Path) -> None:
    typo = tmp_path / "stroe"
    outcome = cli([a.replace("{store}", f"file://{typo}") for a in READ_CASES[case]])
    expect_error(outcome, EXIT_USAGE, "does not exist", "reading a store never creates one")
    assert not typo.exists()


# -- what ls and gc find in the index -----------------------------------------------------------------
@pytest.fixture
def copied_store(compiled: Compiled, tmp_path: Path) -> Path:
    original = Path(compiled.store.root_uri.removeprefix("file://"))
    copy = tmp_path / "store"
    shutil.copytree(original, copy)
    return copy


def _artifact_files(store: Path) -> list[Path]:
    (manifest,) = store.glob("artifacts/**/manifest.json")
    files = json.loads(manifest.read_text())["files"]
    return [manifest.parent / f["path"] for f in files]


@pytest.mark.parametrize("damage", ["truncated", "deleted"])
def test_ls_says_which_artifacts_are_incomplete(damage: str, copied_store: Path) -> None:
    victim = max(_artifact_files(copied_store), key=lambda p: p.stat().st_size)
    if damage == "truncated":
        victim.write_bytes(victim.read_bytes()[:-1])
    else:
        victim.unlink()
    cheap = cli(["ls", f"file://{copied_store}"])  # the farm index alone: no listing per artifact
    assert cheap.code == EXIT_OK and "INCOMPLETE" not in cheap.out and "1 published artifact(s)" in cheap.out
    text = cli(["ls", f"file://{copied_store}", "--check"])
    assert text.traceback is None and text.code == EXIT_OK, text.text
    assert "INCOMPLETE: 1 file(s) missing or truncated" in text.out
    assert "1 incomplete: run neuronforge verify" in text.out
    # the check recorded the damage: from then on every listing says it, the cheap one included
    for argv in (["--json", "--check"], ["--json"]):
        rows = json.loads(cli(["ls", f"file://{copied_store}", *argv]).out)
        assert [r["status"] for r in rows] == ["damaged"], argv
        assert victim.name in rows[0]["message"], rows[0]


def test_ls_on_an_intact_store_says_nothing_is_incomplete(copied_store: Path) -> None:
    text = cli(["ls", f"file://{copied_store}", "--check"])
    assert text.code == EXIT_OK and "INCOMPLETE" not in text.out and "1 published artifact(s)" in text.out


IMPOSTORS = {
    "index is a JSON list": ("index/" + "a" * 64 + ".json", b"[1, 2, 3]"),
    "index is not JSON": ("index/" + "b" * 64 + ".json", b"\xff\xfe not json"),
    "index names a missing manifest": (
        "index/" + "c" * 64 + ".json",
        json.dumps({"manifest": "artifacts/gone/manifest.json", "prefix": "artifacts/gone"}).encode(),
    ),
    "index names another JSON file": (
        "index/" + "d" * 64 + ".json",
        json.dumps({"manifest": "catalog/models.json", "prefix": "catalog"}).encode(),
    ),
    "index escapes the store": (
        "index/" + "e" * 64 + ".json",
        json.dumps({"manifest": "../../etc/passwd", "prefix": ".."}).encode(),
    ),
}


@pytest.mark.parametrize("case", sorted(IMPOSTORS))
def test_listing_survives_an_index_entry_that_is_not_what_it_claims(case: str, copied_store: Path) -> None:
    key, data = IMPOSTORS[case]
    (copied_store / "catalog").mkdir(exist_ok=True)
    (copied_store / "catalog" / "models.json").write_text(json.dumps({"models": [{"source": "org/x"}]}))
    (copied_store / key).write_bytes(data)
    before = snapshot(copied_store)
    text = cli(["ls", f"file://{copied_store}"])
    assert text.traceback is None and text.code == EXIT_OK, text.text
    assert "1 published artifact(s)" in text.out
    gc = cli(["gc", f"file://{copied_store}", "--keep-compilers", "1", "--dry-run"])
    assert gc.traceback is None and gc.code == EXIT_OK, gc.text
    assert snapshot(copied_store) == before
    # Rebuilding the farm index from the pointers and manifests reads the impostor, says why it
    # publishes nothing, and leaves it out; the index still matches the manifests.
    rebuilt = cli(["index", "rebuild", f"file://{copied_store}"])
    assert rebuilt.traceback is None and rebuilt.code == EXIT_OK, rebuilt.text
    assert f"warning: skipped file://{copied_store}/{key}" in rebuilt.err and "1 row(s)" in rebuilt.out
    assert "; 1 index pointer(s) left out, not artifacts (warnings above)" in rebuilt.out
    listed = cli(["ls", f"file://{copied_store}", "--json"])
    assert len(json.loads(listed.out)) == 1
    checked = cli(["verify", "--store", f"file://{copied_store}"])
    assert checked.code == EXIT_OK and "matches the manifests" in checked.out, checked.text


# -- fetch errors name what the user gave -------------------------------------------------------------
def test_a_fetch_error_names_the_source_not_the_staging_folder(tiny_llama: Path, tmp_path: Path) -> None:
    config = json.loads((tiny_llama / "config.json").read_text())
    config["num_attention_heads"] = 0
    (tiny_llama / "config.json").write_text(json.dumps(config))
    outcome = cli(["fetch", tiny_llama, "--store", f"file://{tmp_path / 'store'}", "--work-dir", tmp_path / "w"])
    expect_error(outcome, EXIT_REJECTED, str(tiny_llama))
    assert "staging" not in outcome.text


# -- the Hugging Face Hub down or failing -------------------------------------------------------------
@pytest.fixture
def hub_at(monkeypatch: pytest.MonkeyPatch):
    """Point huggingface_hub (already imported: its constants are read at import) at `endpoint`,
    online (the suite runs with HF_HUB_OFFLINE=1)."""
    from huggingface_hub import constants
    from huggingface_hub.utils._http import reset_sessions

    def point(endpoint: str) -> None:
        monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
        monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
        monkeypatch.setattr(constants, "ENDPOINT", endpoint)
        reset_sessions()  # a session cached while offline keeps refusing every request

    yield point
    reset_sessions()  # and the next test's session is built offline again


HUB_CASES = {
    "fetch a branch": ["fetch", "org/model", "--store", "{tmp}/store", "--work-dir", "{tmp}/w"],
    "fetch a sha": ["fetch", "org/model@" + "0" * 40, "--store", "{tmp}/store", "--work-dir", "{tmp}/w"],
    "run": ["run", *TARGET, "--model", "org/model", "--store", "{tmp}/store"],
}


@pytest.mark.parametrize("case", sorted(HUB_CASES))
def test_an_unreachable_hub_is_one_line(case: str, hub_at, home: Path, tmp_path: Path) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        closed = f"http://127.0.0.1:{s.getsockname()[1]}"
    hub_at(closed)
    outcome = cli([a.replace("{tmp}", str(tmp_path)) for a in HUB_CASES[case]])
    expect_error(outcome, EXIT_FAILURE, f"cannot reach the Hugging Face Hub at {closed} for org/model", "HF_ENDPOINT")
    assert not any(snapshot(tmp_path / "store"))


def test_a_hub_answering_500_is_one_line(hub_at, home: Path, tmp_path: Path) -> None:
    import http.server
    import threading

    class Failing(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(500)
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Failing)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        endpoint = f"http://127.0.0.1:{server.server_address[1]}"
        hub_at(endpoint)
        outcome = cli(["fetch", "org/model", "--store", tmp_path / "store", "--work-dir", tmp_path / "w"])
    finally:
        server.shutdown()
    expect_error(outcome, EXIT_FAILURE, f"the Hugging Face Hub at {endpoint} answered HTTP 500 for org/model@main")
