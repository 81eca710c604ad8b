"""A copied store works where it is: a folder moved elsewhere, a bucket replicated to another one.
Index entries and manifests hold store-relative paths; URIs are rendered for the store being read,
so a lookup, `store ls` and `verify` on the copy name the copy, never the original."""

from __future__ import annotations

import shutil
from pathlib import Path

import boto3

from neuronforge.artifacts.published import lookup
from neuronforge.stores import open_store
from tests.conftest import Compiled
from tests.reliability.harness import cli


def test_a_moved_folder_store_names_itself(compiled: Compiled, tmp_path: Path) -> None:
    original = Path(compiled.store.root_uri.removeprefix("file://"))
    moved = tmp_path / "moved-store"
    shutil.copytree(original, moved)
    store = open_store(f"file://{moved}")
    hit = lookup(store, compiled.first.key)
    assert hit is not None
    assert all(uri.startswith(f"file://{moved}/") for uri in hit.uris.values()), hit.uris
    assert hit.manifest_uri.startswith(f"file://{moved}/")
    out = cli(["verify", store.uri(hit.prefix)])
    assert out.code == 0 and out.traceback is None, out.text
    assert str(original) not in out.text


def test_a_replicated_bucket_names_itself(compiled: Compiled, s3_env: str, s3_bucket: str) -> None:
    original = Path(compiled.store.root_uri.removeprefix("file://"))
    s3 = boto3.client("s3", endpoint_url=s3_env)
    for path in original.rglob("*"):
        if path.is_file():
            s3.upload_file(str(path), s3_bucket, f"replica/{path.relative_to(original)}")
    store = open_store(f"s3://{s3_bucket}/replica")
    hit = lookup(store, compiled.first.key)
    assert hit is not None
    assert all(uri.startswith(f"s3://{s3_bucket}/replica/") for uri in hit.uris.values()), hit.uris
    out = cli(["verify", store.uri(hit.prefix)])
    assert out.code == 0 and out.traceback is None, out.text
