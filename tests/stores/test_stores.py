"""The ArtifactStore contract, run against both implementations: a local folder and a real S3 HTTP
endpoint (moto server on 127.0.0.1)."""

from __future__ import annotations

import hashlib
import os
import threading
from pathlib import Path

import pytest

from neuronforge.common.errors import StoreError
from neuronforge.stores import NotFound, open_store
from neuronforge.stores.file import FileStore
from neuronforge.stores.s3 import S3Store


@pytest.fixture(params=["file", "s3"])
def store(request: pytest.FixtureRequest, tmp_path: Path):
    if request.param == "file":
        return open_store(f"file://{tmp_path / 'store'}")
    bucket = request.getfixturevalue("s3_bucket")
    return open_store(f"s3://{bucket}/some/prefix")


def test_open_store_picks_implementation_from_uri(tmp_path: Path) -> None:
    assert isinstance(open_store(str(tmp_path)), FileStore)
    assert isinstance(open_store(f"file://{tmp_path}"), FileStore)
    s3 = open_store("s3://bucket-name/a/b")
    assert isinstance(s3, S3Store) and (s3.bucket, s3.prefix) == ("bucket-name", "a/b")
    with pytest.raises(StoreError, match="unsupported store URI"):
        open_store("gs://bucket/x")


def test_bytes_and_json_round_trip(store) -> None:
    store.put_bytes(b"hello", "a/b.txt")
    assert store.get_bytes("a/b.txt") == b"hello"
    store.write_json("index/k.json", {"x": [1, 2]})
    assert store.read_json("index/k.json") == {"x": [1, 2]}
    assert store.exists("a/b.txt") and not store.exists("a/missing")


def test_missing_key_raises_not_found(store) -> None:
    with pytest.raises(NotFound, match="does not exist"):
        store.get_bytes("nope.json")
    with pytest.raises(NotFound):
        store.read_json("nope.json")


def test_keys_cannot_escape_the_root(store) -> None:
    with pytest.raises(StoreError, match="invalid store key"):
        store.put_bytes(b"x", "../outside")
    with pytest.raises(StoreError, match="invalid store key"):
        store.put_bytes(b"x", "a//b")


def test_file_round_trip_and_replace(store, tmp_path: Path) -> None:
    src = tmp_path / "src.bin"
    src.write_bytes(b"1" * 1000)
    store.put_file(src, "files/x.bin")
    src.write_bytes(b"2" * 10)
    store.put_file(src, "files/x.bin")  # replaced whole
    out = tmp_path / "out" / "x.bin"
    store.get_file("files/x.bin", out)
    assert out.read_bytes() == b"2" * 10


def test_list_is_folder_like_and_sorted(store) -> None:
    for key in ("a/b/2", "a/b/1", "a/bc/3", "z"):
        store.put_bytes(key.encode(), key)
    assert [o.key for o in store.list("a/b")] == ["a/b/1", "a/b/2"]
    assert [o.key for o in store.list()] == ["a/b/1", "a/b/2", "a/bc/3", "z"]
    assert [(o.key, o.size) for o in store.list("z")] == [("z", 1)]
    assert store.list("missing") == []


def test_tree_round_trip_with_exclude(store, tmp_path: Path) -> None:
    src = tmp_path / "tree"
    (src / "sub").mkdir(parents=True)
    (src / "a.txt").write_text("a")
    (src / "sub" / "b.txt").write_text("bb")
    (src / "MANIFEST.json").write_text("{}")
    put = store.put_tree(src, "t", exclude=("MANIFEST.json",))
    assert sorted(o.key for o in put) == ["t/a.txt", "t/sub/b.txt"]
    assert not store.exists("t/MANIFEST.json")
    dest = tmp_path / "dest"
    got = store.get_tree("t", dest)
    assert len(got) == 2
    assert (dest / "sub" / "b.txt").read_text() == "bb" and (dest / "a.txt").read_text() == "a"


def test_keys_with_plus_are_kept_verbatim(store, tmp_path: Path) -> None:
    """The compiler's cache folder carries its version's local label (`neuronxcc-2.21.33363.0+82129205`,
    SDK 2.26.1): a `+` in a key must never become a space or `%2B`, in keys, listing prefixes,
    trees, existence checks, conditional writes or deletes (S3: boto3 URL-encodes keys and
    prefixes itself, and decodes listings it asked for with EncodingType=url)."""
    cdir = "neuron-cache/neuronxcc-2.21.33363.0+82129205"
    entry = f"{cdir}/MODULE_16389337710168549518+e30acd3a"
    src = tmp_path / "entry"
    src.mkdir()
    (src / "model.neff").write_bytes(b"neff")
    (src / "compile_flags.json").write_text("[]")
    store.put_tree(src, entry)
    store.put_bytes(b"", f"{entry}/model.done")
    store.put_bytes(b"other", "neuron-cache/neuronxcc-2.21.33363.0 82129205/MODULE_x+00000000/model.done")
    store.put_bytes(b"other", "neuron-cache/neuronxcc-2.21.33363.0%2B82129205/MODULE_x+00000000/model.done")
    assert store.exists(f"{entry}/model.done") and store.get_bytes(f"{entry}/model.neff") == b"neff"
    assert [o.key for o in store.list(cdir)] == [
        f"{entry}/{n}" for n in ("compile_flags.json", "model.done", "model.neff")
    ]
    assert {o.key.split("/")[1] for o in store.list("neuron-cache")} == {
        "neuronxcc-2.21.33363.0+82129205",
        "neuronxcc-2.21.33363.0 82129205",
        "neuronxcc-2.21.33363.0%2B82129205",
    }
    assert sorted(o.key for o in store.get_tree(entry, tmp_path / "back")) == [o.key for o in store.list(entry)]
    assert (tmp_path / "back" / "model.neff").read_bytes() == b"neff"
    assert store.put_if_absent(b"1", f"{cdir}/lock+1") and not store.put_if_absent(b"2", f"{cdir}/lock+1")
    assert store.read_versioned(f"{cdir}/lock+1")[0] == b"1"
    version = store.read_versioned(f"{cdir}/lock+1")[1]
    assert store.replace_if_version(b"3", f"{cdir}/lock+1", version) and store.get_bytes(f"{cdir}/lock+1") == b"3"
    assert store.uri(entry).endswith(
        "/neuron-cache/neuronxcc-2.21.33363.0+82129205/MODULE_16389337710168549518+e30acd3a"
    )
    assert store.delete_prefix(cdir) == 4
    assert len(store.list("neuron-cache")) == 2 and not store.exists(f"{entry}/model.done")


def test_delete_prefix_removes_only_that_prefix(store) -> None:
    for key in ("p/1", "p/2/3", "pq/4"):
        store.put_bytes(b"x", key)
    assert store.delete_prefix("p") == 2
    assert [o.key for o in store.list()] == ["pq/4"]


def test_copy_keys_copies_inside_the_store_and_refuses_a_missing_source(store) -> None:
    store.put_bytes(b"weights", "checkpoints/m/model.safetensors")
    store.put_bytes(b"graph", "neuron-cache/c+1/MODULE_a+b/model.pt2")
    store.copy_keys(
        [("checkpoints/m/model.safetensors", "builds/k/d/model/model.safetensors"),
         ("neuron-cache/c+1/MODULE_a+b/model.pt2", "builds/k/d/graphs/prefill.pt2")]
    )  # fmt: skip
    assert store.get_bytes("builds/k/d/model/model.safetensors") == b"weights"
    assert store.get_bytes("builds/k/d/graphs/prefill.pt2") == b"graph"
    assert store.get_bytes("checkpoints/m/model.safetensors") == b"weights"  # a copy, not a move
    store.copy_objects("builds/k/d", "artifacts/k", ["graphs/prefill.pt2"])
    assert store.get_bytes("artifacts/k/graphs/prefill.pt2") == b"graph"
    with pytest.raises(NotFound):
        store.copy_keys([("checkpoints/m/gone.safetensors", "builds/k/d/gone")])
    assert not store.exists("builds/k/d/gone")


def test_put_if_absent_creates_once(store) -> None:
    assert store.put_if_absent(b"first", "locks/k") is True
    assert store.put_if_absent(b"second", "locks/k") is False
    assert store.get_bytes("locks/k") == b"first"


def test_put_if_absent_has_exactly_one_winner_under_contention(store) -> None:
    results: list[bool] = []
    barrier = threading.Barrier(8)

    def contend(i: int) -> None:
        barrier.wait()
        results.append(store.put_if_absent(f"holder-{i}".encode(), "locks/race"))

    threads = [threading.Thread(target=contend, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results.count(True) == 1
    assert store.get_bytes("locks/race").startswith(b"holder-")


def test_s3_multipart_upload_and_parallel_download(s3_bucket: str, tmp_path: Path) -> None:
    """Objects above the threshold go up in parts; content survives byte for byte."""
    import os

    store = S3Store(s3_bucket, "mp", multipart_threshold=5 * 1024 * 1024, multipart_chunksize=5 * 1024 * 1024)
    data = os.urandom(12 * 1024 * 1024 + 7)
    (tmp_path / "big").mkdir()
    (tmp_path / "big" / "w.bin").write_bytes(data)
    store.put_tree(tmp_path / "big", "model")
    head = store.client.head_object(Bucket=s3_bucket, Key="mp/model/w.bin")
    assert head["ETag"].strip('"').endswith("-3")  # three parts
    store.get_tree("model", tmp_path / "back")
    assert (tmp_path / "back" / "w.bin").read_bytes() == data


def test_file_store_leaves_no_temporary_files(tmp_path: Path) -> None:
    store = FileStore(tmp_path / "s")
    store.put_bytes(b"x", "a/b")
    store.put_if_absent(b"x", "a/b")
    assert sorted(p.name for p in (tmp_path / "s" / "a").iterdir()) == ["b"]


# -- the file store pages like S3 ----------------------------------------------------------------------
TRICKY = [
    "a", "a.b", "a-c", "a0", "b/x", "b/x.y", "b/x/z", "b-", "b.c/d", "b0/e", "index/0ab.json", "index/0abc.json",
    "index/0ac.json", "index/1.json", "z/y/x/w", "z/y/x.w", "z/y-/q", "é/ü", "~",
]  # fmt: skip


def _tricky_store(root: Path):
    from neuronforge.stores import open_store

    store = open_store(f"file://{root}")
    for i, key in enumerate(k for k in TRICKY if k not in ("b/x",)):  # b/x is a folder (b/x/z)
        store.put_bytes(b"x" * i, key)
    return store


@pytest.mark.parametrize("prefix", ["", "b", "index", "z/y", "missing"])
def test_a_file_stores_page_is_the_listing_sliced_in_key_order(tmp_path: Path, prefix: str) -> None:
    """`list_page` walks folders in key (byte) order and stops: the same objects as the whole sorted
    listing after `start_after`, for every cut, on names where a folder and its siblings interleave
    (`a-c` < `a.b` < `a/` < `a0`)."""
    store = _tricky_store(tmp_path / "s")
    whole = store.list(prefix)
    # the store's objects, found independently of its walk: every file under the prefix, in key order
    root = tmp_path / "s"
    found = sorted(p.relative_to(root).as_posix() for p in (root / prefix).rglob("*") if p.is_file())
    assert [o.key for o in whole] == found
    cuts = ["", *(o.key for o in whole), "b/", "b/x", "index/0ab", "index/0abc", "z/y/x", "zz"]
    for start in cuts:
        for limit in (1, 2, 3, 1000):
            want = [o for o in whole if o.key > start][:limit]
            assert store.list_page(prefix, start_after=start, limit=limit) == want, (start, limit)


def test_a_file_stores_page_reads_only_the_folders_on_its_way(tmp_path: Path, monkeypatch) -> None:
    """One page of a farm's `artifacts/` (one folder per model) and one key's lookup under `index/` open a
    few folders, not one per artifact."""
    import neuronforge.stores.file as file_store
    from neuronforge.artifacts.published import find_key
    from neuronforge.stores import open_store

    store = open_store(f"file://{tmp_path / 's'}")
    keys = [hashlib.sha256(str(i).encode()).hexdigest() for i in range(300)]
    for i, key in enumerate(keys):
        store.put_bytes(b"{}", f"artifacts/org/m{i:03d}/rev/target/{key[:12]}/manifest.json")
        store.put_bytes(b"{}", f"index/{key}.json")
    opened: list[str] = []
    real = os.scandir
    monkeypatch.setattr(file_store.os, "scandir", lambda p: opened.append(str(p)) or real(p))
    page = store.list_page("artifacts", limit=5)
    assert [o.key.split("/")[2] for o in page] == ["m000", "m001", "m002", "m003", "m004"]
    assert len(opened) <= 2 + 5 * 4  # artifacts/, org/, then each of the five models' folders
    opened.clear()
    assert find_key(store, keys[123][:12]) == keys[123]
    assert len(opened) == 1  # index/ alone
