"""`localcache.publish_tree` uploads only the bytes the store lacks: a file whose sha256 and size
match an object the store already holds (the checkpoint mirror's files, compile-cache entries) is
copied inside the store, every other file is uploaded, and the manifest goes last — on the folder
store and on a real S3 endpoint (moto on 127.0.0.1, requests seen through botocore's `before-send`)."""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest

from neuronforge.artifacts import layout
from neuronforge.artifacts.localcache import (
    adopt,
    file_entries,
    materialize,
    publish_tree,
    stored_objects,
    stored_objects_of,
)
from neuronforge.records.payload_manifest import PayloadManifest
from neuronforge.records.tree import StoredFile
from neuronforge.stores import open_store
from neuronforge.stores.s3 import S3Store


@pytest.fixture(params=["file", "s3"])
def store(request: pytest.FixtureRequest, tmp_path: Path):
    if request.param == "file":
        return open_store(f"file://{tmp_path / 'store'}")
    return open_store(f"s3://{request.getfixturevalue('s3_bucket')}/nf")


@dataclass
class Writes:
    """What a store was asked to write, in order: (key, source key of a copy inside the store, or
    None for bytes sent from this host)."""

    events: list[tuple[str, str | None]] = field(default_factory=list)

    def uploaded(self) -> set[str]:
        return {k for k, src in self.events if src is None}

    def copied(self) -> dict[str, str]:
        return {k: src for k, src in self.events if src is not None}


@contextmanager
def watching(store, monkeypatch: pytest.MonkeyPatch) -> Iterator[Writes]:
    """Every object write, as the store's backend sees it: S3 PUT requests (a copy carries
    `x-amz-copy-source` and no body), or the file store's file writes (`_put`, under `put_file`,
    `put_tree` and `copy_keys` alike; a copy reads from the store's own folder)."""
    writes = Writes()
    if isinstance(store, S3Store):
        base = f"/{store.bucket}/{store.prefix}/"

        def seen(request, **_) -> None:
            if request.method != "PUT":
                return
            key = unquote(urlsplit(request.url).path).removeprefix(base)
            src = request.headers.get("x-amz-copy-source")
            if isinstance(src, bytes):
                src = src.decode()
            writes.events.append((key, unquote(src).lstrip("/").removeprefix(base.lstrip("/")) if src else None))

        hook = f"watch-{uuid.uuid4().hex}"
        store.client.meta.events.register("before-send.s3", seen, unique_id=hook)
        try:
            yield writes
        finally:
            store.client.meta.events.unregister("before-send.s3", unique_id=hook)
    else:
        put_file = store._put
        put_bytes, put_if_absent = store.put_bytes, store.put_if_absent

        def spy_file(local: Path, key: str) -> None:
            inside = Path(local).resolve().is_relative_to(store.root)
            writes.events.append((key, Path(local).resolve().relative_to(store.root).as_posix() if inside else None))
            put_file(local, key)

        def spy_bytes(data: bytes, key: str) -> None:
            writes.events.append((key, None))
            put_bytes(data, key)

        def spy_if_absent(data: bytes, key: str) -> bool:
            writes.events.append((key, None))
            return put_if_absent(data, key)

        monkeypatch.setattr(store, "_put", spy_file)
        monkeypatch.setattr(store, "put_bytes", spy_bytes)
        monkeypatch.setattr(store, "put_if_absent", spy_if_absent)
        yield writes


def _write(folder: Path, files: dict[str, bytes]) -> Path:
    for rel, data in files.items():
        (folder / rel).parent.mkdir(parents=True, exist_ok=True)
        (folder / rel).write_bytes(data)
    return folder


def _entry(rel: str, data: bytes) -> StoredFile:
    return StoredFile(path=rel, size=len(data), sha256=hashlib.sha256(data).hexdigest())


TOKENIZER, CONFIG, GRAPH = b'{"vocab": [1, 2, 3]}' * 50, b'{"hidden": 64}', b"compiled graph bytes" * 400


def _stored(store) -> dict:
    """A checkpoint mirror and a compile-cache entry in the store, and what their records say it holds."""
    ckpt = "checkpoints/org/m/rev"
    store.put_bytes(TOKENIZER, f"{ckpt}/tokenizer.json")
    store.put_bytes(CONFIG, f"{ckpt}/config.json")
    store.put_bytes(b"x" * 99, f"{ckpt}/extra.bin")
    entry = "neuron-cache/torch-inductor-2.13.0/MODULE_abc+d41d8cd9"
    store.put_bytes(GRAPH, f"{entry}/model.pt2")
    stored = stored_objects([_entry("tokenizer.json", TOKENIZER), _entry("config.json", CONFIG)], ckpt)
    stored[(hashlib.sha256(GRAPH).hexdigest(), len(GRAPH))] = f"{entry}/model.pt2"
    # a record whose size is not the file's: the same sha256, another size, is not the same bytes
    stored[(hashlib.sha256(b"y" * 98).hexdigest(), 99)] = f"{ckpt}/extra.bin"
    return stored


def test_files_the_store_holds_by_content_are_copied_and_the_rest_uploaded(
    store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    stored = _stored(store)
    payload = _write(
        tmp_path / "payload",
        {
            "model/tokenizer.json": TOKENIZER,  # the checkpoint's, byte for byte
            "graphs/prefill.pt2": GRAPH,  # the compile cache's
            "model/config.json": b'{"hidden": 65}',  # the size of the checkpoint's config, other bytes
            "model/extra.bin": b"y" * 98,  # a sha256 recorded with another size
            "model/weights.bin": b"new weights" * 100,  # nothing like it in the store
        },
    )
    manifest = PayloadManifest(files=file_entries(payload))
    prefix = "builds/key/digest"
    with watching(store, monkeypatch) as writes:
        ref = publish_tree(store, payload, prefix, manifest, stored=stored)

    assert writes.copied() == {
        f"{prefix}/model/tokenizer.json": "checkpoints/org/m/rev/tokenizer.json",
        f"{prefix}/graphs/prefill.pt2": "neuron-cache/torch-inductor-2.13.0/MODULE_abc+d41d8cd9/model.pt2",
    }
    assert writes.uploaded() == {
        f"{prefix}/model/config.json",
        f"{prefix}/model/extra.bin",
        f"{prefix}/model/weights.bin",
        f"{prefix}/{layout.MANIFEST}",
    }
    assert writes.events[-1] == (f"{prefix}/{layout.MANIFEST}", None)  # data first, the manifest last
    back = materialize(store, ref, tmp_path / "elsewhere")  # every byte checked against the manifest
    assert (back / "graphs/prefill.pt2").read_bytes() == GRAPH
    assert (back / "model/tokenizer.json").read_bytes() == TOKENIZER


def test_without_records_everything_is_uploaded(store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _stored(store)
    payload = _write(tmp_path / "payload", {"model/tokenizer.json": TOKENIZER, "graphs/prefill.pt2": GRAPH})
    with watching(store, monkeypatch) as writes:
        publish_tree(store, payload, "builds/k/d", PayloadManifest(files=file_entries(payload)))
    assert writes.copied() == {} and len(writes.uploaded()) == 3


def test_a_recorded_object_that_vanished_is_uploaded_instead(
    store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A compile-cache entry pruned between the sync and the staging: the file goes up after all."""
    stored = _stored(store)
    store.delete_prefix("neuron-cache")
    payload = _write(tmp_path / "payload", {"model/tokenizer.json": TOKENIZER, "graphs/prefill.pt2": GRAPH})
    with watching(store, monkeypatch) as writes:
        ref = publish_tree(store, payload, "builds/k/d", PayloadManifest(files=file_entries(payload)), stored=stored)
    assert "builds/k/d/graphs/prefill.pt2" in writes.uploaded()
    assert (materialize(store, ref, tmp_path / "elsewhere") / "graphs/prefill.pt2").read_bytes() == GRAPH


def test_stored_objects_of_reads_this_hosts_verified_manifest_else_one_get(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = open_store(f"file://{tmp_path / 'store'}")
    folder = _write(tmp_path / "ckpt", {"config.json": CONFIG, "tokenizer.json": TOKENIZER})
    ref = publish_tree(store, folder, "checkpoints/org/m/rev", PayloadManifest(files=file_entries(folder)))
    adopt(folder, ref, tmp_path / "host-a")
    expected = {
        (hashlib.sha256(CONFIG).hexdigest(), len(CONFIG)): "checkpoints/org/m/rev/config.json",
        (hashlib.sha256(TOKENIZER).hexdigest(), len(TOKENIZER)): "checkpoints/org/m/rev/tokenizer.json",
    }
    reads: list[str] = []
    get_bytes = store.get_bytes
    monkeypatch.setattr(store, "get_bytes", lambda key: reads.append(key) or get_bytes(key))
    assert stored_objects_of(store, ref, tmp_path / "host-a") == expected and reads == []
    assert stored_objects_of(store, ref, tmp_path / "host-b") == expected and reads == [ref.manifest_key]
    other = ref.model_copy(update={"manifest_sha256": "0" * 64})  # not the manifest the store holds
    assert stored_objects_of(store, other, tmp_path / "host-b") == {}
