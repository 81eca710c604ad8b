"""S3 downloads as parallel ranged GETs (`stores.s3_download`), and every S3 transfer measured once,
against the real local endpoint (moto server): whole files, parts in any order, nothing half-written."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import boto3
import pytest

from neuronforge.common import transfers
from neuronforge.common.errors import StoreError
from neuronforge.stores import NotFound
from neuronforge.stores.s3 import MIB, S3Store

SIZES = {"a.bin": 5 * MIB + 3, "sub/b.bin": 2 * MIB, "c.json": 17, "empty": 0}


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    root = tmp_path / "src"
    for rel, size in SIZES.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(os.urandom(size))
    return root


def small_parts(bucket: str) -> S3Store:
    """1 MiB parts, 3 at a time: a 5 MiB object is 6 ranged GETs landing out of order."""
    return S3Store(bucket, "p", max_concurrency=3, multipart_threshold=MIB, multipart_chunksize=MIB)


def digests(root: Path) -> dict[str, str]:
    return {
        p.relative_to(root).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


def test_a_tree_comes_back_byte_for_byte_in_parts_and_each_transfer_is_recorded_once(
    s3_bucket: str, folder: Path, tmp_path: Path
) -> None:
    store = small_parts(s3_bucket)
    with transfers.collecting() as seen:
        store.put_tree(folder, "m")
        store.get_tree("m", tmp_path / "back")
        store.get_files([("m/a.bin", tmp_path / "one" / "a.bin"), ("m/sub/b.bin", tmp_path / "one" / "b.bin")])
        store.get_file("m/c.json", tmp_path / "c.json")
    assert digests(tmp_path / "back") == digests(folder)
    assert (tmp_path / "one" / "a.bin").read_bytes() == (folder / "a.bin").read_bytes()
    assert (tmp_path / "c.json").read_bytes() == (folder / "c.json").read_bytes()
    assert not [p for p in tmp_path.rglob(".nf-tmp-*")]  # every temporary name renamed
    total = sum(SIZES.values())
    assert [(t.direction, t.where, t.bytes, t.files) for t in seen] == [
        ("upload", store.uri("m"), total, 4),
        ("download", store.uri("m"), total, 4),
        ("download", store.uri("m"), SIZES["a.bin"] + SIZES["sub/b.bin"], 2),
        ("download", store.uri("m/c.json"), 17, 1),
    ]
    assert {(t.client, t.concurrency, t.part_size) for t in seen[1:]} == {("s3 ranged GET", 3, MIB)}
    assert (seen[0].client, seen[0].part_size) == ("s3transfer", MIB)


def test_a_missing_object_is_one_line_naming_it_and_leaves_nothing(
    s3_bucket: str, folder: Path, tmp_path: Path
) -> None:
    store = small_parts(s3_bucket)
    store.put_tree(folder, "m")
    pairs = [("m/a.bin", tmp_path / "d" / "a.bin"), ("m/gone.bin", tmp_path / "d" / "gone.bin")]
    with pytest.raises(NotFound, match=r"^s3://.*/p/m/gone\.bin does not exist$"):
        store.get_files(pairs)
    assert not (tmp_path / "d" / "gone.bin").exists() and not [p for p in tmp_path.rglob(".nf-tmp-*")]


def test_an_object_replaced_after_the_listing_is_refused_not_mixed(
    s3_bucket: str, s3_env: str, folder: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The listing's ETag pins every ranged GET: an object rewritten between the listing and the
    download fails in one line instead of yielding parts of two versions."""
    store = small_parts(s3_bucket)
    store.put_tree(folder, "m")
    listed = store.list("m")
    boto3.client("s3", endpoint_url=s3_env).put_object(
        Bucket=s3_bucket, Key="p/m/a.bin", Body=os.urandom(SIZES["a.bin"])
    )
    monkeypatch.setattr(store, "list", lambda prefix: listed)
    with pytest.raises(StoreError, match=r"an object under s3://.*/p/m was replaced while it was being downloaded"):
        store.get_tree("m", tmp_path / "back")
    assert not (tmp_path / "back" / "a.bin").exists()


def test_a_read_that_breaks_off_resumes_where_it_stopped(
    s3_bucket: str, folder: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The first read of every part fails mid-stream once: each part is asked again from the byte it
    reached, and the file is whole."""
    from botocore.response import StreamingBody
    from urllib3.exceptions import ProtocolError

    store = small_parts(s3_bucket)
    store.put_tree(folder, "m")
    real = StreamingBody.readinto
    broken: set[int] = set()

    def flaky(self: StreamingBody, b: memoryview) -> int:
        n = real(self, b)
        if id(self) not in broken and len(broken) < 4:
            broken.add(id(self))
            raise ProtocolError("Connection broken: reset by peer") if n else ProtocolError("empty")
        return n

    monkeypatch.setattr(StreamingBody, "readinto", flaky)
    store.get_tree("m", tmp_path / "back")
    assert digests(tmp_path / "back") == digests(folder) and len(broken) == 4
