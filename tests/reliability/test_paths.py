"""Nothing read from a user, a checkpoint or a store escapes its folder, and no secret given in a URI
is repeated back.

- S3 object keys under a model prefix that are not plain relative paths (a doubled `/` that would
  make the rest absolute, `..`, `.`, bytes that are not UTF-8) are refused before anything is
  downloaded; nothing is written outside the work dir.
- A link inside a model folder that leads outside it is refused; the linked file is never read
  into the store. Links inside a file store do not make it read elsewhere.
- `s3://KEY:SECRET@bucket` (store or model) is refused with the credentials masked.
"""

from __future__ import annotations

import json
import urllib.request
from pathlib import Path

import boto3
import pytest

from tests.reliability.harness import cli, expect_error, snapshot

EXIT_OK, EXIT_FAILURE, EXIT_USAGE, EXIT_REJECTED = 0, 1, 2, 3
PLAN = ["--instance", "inf2.xlarge", "--tp", "1", "--seq-len", "64"]


def _upload_folder(s3, bucket: str, folder: Path, prefix: str) -> None:
    for path in sorted(folder.rglob("*")):
        if path.is_file():
            s3.upload_file(str(path), bucket, f"{prefix}/{path.relative_to(folder).as_posix()}")


# -- S3 object keys -----------------------------------------------------------------------------
@pytest.mark.parametrize("shape", ["doubled slash (absolute)", "dot-dot", "dot"])
def test_an_s3_model_with_keys_that_leave_the_folder_is_refused_before_download(
    shape: str, tiny_llama: Path, s3_env: str, s3_bucket: str, tmp_path: Path
) -> None:
    s3 = boto3.client("s3", endpoint_url=s3_env)
    _upload_folder(s3, s3_bucket, tiny_llama, "model")
    target = tmp_path / "outside" / "escape.json"  # where a naive `staging / key` would write
    key = {
        "doubled slash (absolute)": f"model/{target.as_posix()}",  # "model/" + "/tmp/..." = "model//tmp/..."
        "dot-dot": "model/../../escape.json",
        "dot": "model/./config.json",
    }[shape]
    s3.put_object(Bucket=s3_bucket, Key=key, Body=b'{"model_type": "llama"}')
    store, work = tmp_path / "store", tmp_path / "work"
    outcome = cli(["fetch", f"s3://{s3_bucket}/model", "--store", f"file://{store}", "--work-dir", work])
    expect_error(outcome, EXIT_REJECTED, "cannot be file names inside a folder", "rename or remove them")
    assert not target.exists()
    assert snapshot(store) == {}
    assert not (work / "staging").exists() or not any((work / "staging").iterdir())


def test_an_s3_key_that_is_not_utf8_is_refused_and_listing_survives_it(
    tiny_llama: Path, s3_env: str, s3_bucket: str, tmp_path: Path
) -> None:
    s3 = boto3.client("s3", endpoint_url=s3_env)
    _upload_folder(s3, s3_bucket, tiny_llama, "model")
    # boto3 sends only valid UTF-8; a raw request puts the bytes FF FE into the key.
    request = urllib.request.Request(f"{s3_env}/{s3_bucket}/model/%FF%FE.json", data=b"{}", method="PUT")
    assert urllib.request.urlopen(request).status == 200
    store = tmp_path / "store"
    outcome = cli(["fetch", f"s3://{s3_bucket}/model", "--store", f"file://{store}", "--work-dir", tmp_path / "w"])
    expect_error(outcome, EXIT_REJECTED, "not UTF-8")
    assert snapshot(store) == {}
    listing = cli(["store", "ls", f"s3://{s3_bucket}"])
    assert listing.traceback is None and listing.code == EXIT_OK, listing.text
    assert "model/config.json" in listing.out


def test_an_s3_folder_marker_is_not_a_bad_key(tiny_llama: Path, s3_env: str, s3_bucket: str, tmp_path: Path) -> None:
    """`sub/` objects (what the S3 console's "Create folder" writes) hold nothing and are ignored."""
    s3 = boto3.client("s3", endpoint_url=s3_env)
    _upload_folder(s3, s3_bucket, tiny_llama, "model")
    s3.put_object(Bucket=s3_bucket, Key="model/extras/", Body=b"")
    store = tmp_path / "store"
    outcome = cli(["fetch", f"s3://{s3_bucket}/model", "--store", f"file://{store}", "--work-dir", tmp_path / "w"])
    assert outcome.traceback is None and outcome.code == EXIT_OK, outcome.text
    assert not any("extras" in key for key in snapshot(store))


# -- links in model folders and stores ----------------------------------------------------------
@pytest.mark.parametrize("name", ["config.json", "tokenizer_config.json", "model.safetensors"])
def test_a_link_out_of_the_model_folder_is_refused_and_never_published(
    name: str, tiny_llama: Path, tmp_path: Path
) -> None:
    secret = tmp_path / "elsewhere" / name
    secret.parent.mkdir()
    original = tiny_llama / name
    if original.exists():
        secret.write_bytes(original.read_bytes())
        original.unlink()
    else:
        secret.write_text('{"api_key": "not-for-the-store"}')
    original.symlink_to(secret)
    store = tmp_path / "store"
    outcome = cli(["fetch", tiny_llama, "--store", f"file://{store}", "--work-dir", tmp_path / "work"])
    expect_error(outcome, EXIT_REJECTED, f"{tiny_llama / name} is a link to {secret}", "outside the model folder")
    assert snapshot(store) == {}


def test_a_link_that_stays_inside_the_model_folder_is_followed(tiny_llama: Path, tmp_path: Path) -> None:
    (tiny_llama / "shared").mkdir()
    (tiny_llama / "config.json").rename(tiny_llama / "shared" / "config.json")
    (tiny_llama / "config.json").symlink_to(Path("shared") / "config.json")
    outcome = cli(["plan", "--model", tiny_llama, *PLAN])
    assert outcome.traceback is None and outcome.code == EXIT_OK, outcome.text


def test_a_link_inside_a_file_store_does_not_read_elsewhere(tmp_path: Path) -> None:
    outside = tmp_path / "outside.json"
    outside.write_text(json.dumps({"cache_key": "k" * 64, "secret": "host file"}))
    store = tmp_path / "store"
    (store / "artifacts" / "evil").mkdir(parents=True)
    (store / "artifacts" / "evil" / "manifest.json").symlink_to(outside)
    shown = cli(["show", f"file://{store}/artifacts/evil"])
    expect_error(shown, EXIT_FAILURE, "outside")
    assert "host file" not in shown.text
    listed = cli(["store", "ls", f"file://{store}"])
    assert listed.code == EXIT_OK and "manifest.json" not in listed.out, listed.text


# -- credentials in URIs ------------------------------------------------------------------------
SECRET = "wJalrXUtnFEMI-K7MDENG-bPxRfiCYEXAMPLEKEY"
CREDENTIAL_CASES = {
    "run store": ["run", *PLAN, "--store", f"s3://AKIAEXAMPLE:{SECRET}@bucket/prefix"],
    "ls store": ["ls", f"s3://AKIAEXAMPLE:{SECRET}@bucket"],
    "store ls": ["store", "ls", f"s3://AKIAEXAMPLE:{SECRET}@bucket/x"],
    "verify": ["verify", f"s3://AKIAEXAMPLE:{SECRET}@bucket/artifacts/a/manifest.json"],
    "plan model": ["plan", "--model", f"s3://AKIAEXAMPLE:{SECRET}@bucket/model", *PLAN],
    "run model": ["run", *PLAN, "--model", f"s3://AKIAEXAMPLE:{SECRET}@bucket/model"],
    "fetch model": ["fetch", f"s3://AKIAEXAMPLE:{SECRET}@bucket/model", "--store", "{tmp}/store"],
    "file URI with a password": ["ls", f"file://admin:{SECRET}@host/srv/store"],
    "key and secret without @": ["ls", f"s3://AKIAEXAMPLE:{SECRET}/bucket"],
}


@pytest.mark.parametrize("case", sorted(CREDENTIAL_CASES))
def test_credentials_in_a_uri_are_refused_without_repeating_them(
    case: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("NEURONFORGE_HOME", str(tmp_path / "home"))
    outcome = cli([a.replace("{tmp}", str(tmp_path)) for a in CREDENTIAL_CASES[case]])
    expect_error(outcome, EXIT_USAGE, "carries credentials", "AWS_PROFILE", "***", secret=SECRET)
    assert "AKIAEXAMPLE" not in outcome.text
    assert not (tmp_path / "store").exists()
    assert not (tmp_path / "home" / "work" / "staging").exists()


def test_credentials_in_the_store_environment_variable_are_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("NEURONFORGE_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("NEURONFORGE_STORE", f"s3://AKIAEXAMPLE:{SECRET}@bucket")
    outcome = cli(["run", *PLAN])
    expect_error(outcome, EXIT_USAGE, "carries credentials", secret=SECRET)
