"""The farm index (`neuronforge.artifacts.farm_index`): every record kept under racing publishers on a real
S3 endpoint, recovery of a publisher killed between its manifest and its record, corrupt objects
never trusted, windows that read only the pages they show."""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from neuronforge.artifacts import farm_index
from neuronforge.artifacts.farm_index import log as index_log
from neuronforge.artifacts.farm_index import snapshot
from neuronforge.artifacts.farm_index.reader import FarmIndex
from neuronforge.stores import open_store
from tests.farm_index.publishers import key_of, manifest_only, publish

REPO = Path(__file__).resolve().parents[2]


def _keys(store) -> list[str]:
    return [e.key for e in farm_index.read_window(store).entries]


def test_two_hosts_racing_200_publishes_lose_no_entry(s3_bucket: str) -> None:
    uri = f"s3://{s3_bucket}/farm"
    racers = [
        subprocess.Popen(
            [sys.executable, "-m", "tests.farm_index.publishers", uri, tag, "100"], cwd=REPO, env=os.environ.copy()
        )
        for tag in ("host-a", "host-b")
    ]
    assert [p.wait(timeout=600) for p in racers] == [0, 0]
    store = open_store(uri)
    want = {key_of(tag, i) for tag in ("host-a", "host-b") for i in range(100)}
    assert set(_keys(store)) == want
    head, _ = snapshot.read_head(store)
    assert head is not None and head.rows >= index_log.COMPACT_AT  # publishers compacted as they went
    tail, _ = index_log.read_tail(store)
    assert tail is not None and tail.next_seq == 201 and len(tail.records) < index_log.COMPACT_AT
    assert farm_index.check(store) == []


@pytest.fixture(params=["file", "s3"])
def any_store(request: pytest.FixtureRequest, tmp_path: Path):
    """A file store, and a store on the local S3 endpoint."""
    if request.param == "file":
        return open_store(str(tmp_path / "store"))
    return open_store(f"s3://{request.getfixturevalue('s3_bucket')}/farm")


def test_a_publisher_killed_before_its_record_is_recovered(any_store) -> None:
    store = any_store
    publish(store, key_of("x", 0))
    orphan = key_of("killed", 0)
    manifest_only(store, orphan)  # manifest and pointer written, then the publisher died
    assert orphan not in _keys(store)
    problems = farm_index.check(store)
    assert len(problems) == 1 and orphan[:12] in problems[0] and "index rebuild" in problems[0]
    farm_index.compact(store)  # what the next publisher does every COMPACT_AT records
    assert orphan in _keys(store) and farm_index.check(store) == []


def test_rebuild_recovers_it_too_and_keeps_records_appended_since(tmp_path: Path) -> None:
    store = open_store(str(tmp_path / "store"))
    for i in range(3):
        publish(store, key_of("a", i))
    manifest_only(store, key_of("killed", 1))
    farm_index.rebuild(store)
    publish(store, key_of("a", 3))
    assert set(_keys(store)) == {*(key_of("a", i) for i in range(4)), key_of("killed", 1)}


@pytest.mark.parametrize(
    "damage", ["page bytes", "head not JSON", "tail not JSON", "page gone", "forged page", "forged record"]
)
def test_a_corrupt_index_is_detected_and_rebuilt(damage: str, any_store, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(snapshot, "PAGE_ROWS", 4)
    store = any_store
    for i in range(10):
        publish(store, key_of("c", i))
    farm_index.compact(store)
    head, _ = snapshot.read_head(store)
    assert head is not None and len(head.pages) == 3
    page = head.pages[1].key
    if damage == "page bytes":  # other content in a valid page: only the checksum can tell
        rows = gzip.decompress(store.get_bytes(page)).replace(b"org/model", b"org/EVIL!")
        store.put_bytes(gzip.compress(rows, mtime=0), page)
    elif damage in ("forged page", "forged record"):  # a writer that also recomputes the checksum
        rows = [json.loads(line) for line in gzip.decompress(store.get_bytes(page)).splitlines()]
        if damage == "forged page":
            rows[0]["model"] = 7  # a number where readers sort, filter and render text
        else:
            rows[0]["published"] = ["not", "a", "record"]
        data = gzip.compress(b"".join(json.dumps(r).encode() + b"\n" for r in rows), mtime=0)
        store.put_bytes(data, page)
        raw = json.loads(store.get_bytes(snapshot.HEAD))
        for ref in raw["pages"]:
            if ref["key"] == page:
                ref["sha256"] = hashlib.sha256(data).hexdigest()
        store.put_bytes(json.dumps(raw).encode(), snapshot.HEAD)
    elif damage == "page gone":
        store.delete_prefix(page)
    elif damage == "head not JSON":
        store.put_bytes(b"\x00garbage", snapshot.HEAD)
    else:
        store.put_bytes(b"{", index_log.TAIL)
    window = farm_index.read_window(store)
    assert sorted(e.key for e in window.entries) == sorted(key_of("c", i) for i in range(10))
    if damage.startswith("forged"):
        # one row of a page that is no row costs that row: damaged, with why; no rebuild (O(page))
        damaged = [e for e in window.entries if e.status_class == "damaged"]
        assert len(damaged) == 1 and ("model" if damage == "forged page" else "published") in damaged[0].unreadable
        assert all(e.model == "org/model" for e in window.entries if e not in damaged)
        (problem,) = farm_index.check(store)  # `verify --store` names it
        assert problem.startswith(damaged[0].key[:12]) and "missing from the farm index" in problem
        farm_index.compact(store)  # drops it and recovers the row from its index pointer
        window = farm_index.read_window(store)
    assert all(e.model == "org/model" for e in window.entries)
    assert farm_index.check(store) == []
    publish(store, key_of("c", 10))  # and the index takes records again
    assert key_of("c", 10) in _keys(store)


def test_windows_read_only_the_pages_they_show(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(snapshot, "PAGE_ROWS", 5)
    store = open_store(str(tmp_path / "store"))
    for i in range(23):
        publish(store, key_of("w", i), model=f"org/m{i:02d}", profile="cpu@local" if i < 20 else "optimum-neuron@0.4.5")
    farm_index.compact(store)
    publish(store, key_of("w", 99), model="org/m00")  # a tail record, not yet compacted
    index = FarmIndex.open(store)
    every = index.window()
    assert every.total == 24 and len(every.entries) == 24 and every.pages_read == 5
    pages, seen = [], []
    for offset in range(0, 24, 5):
        w = FarmIndex.open(store).window(offset=offset, limit=5)
        assert w.total == 24 and w.pages_read <= 3  # its page(s), and the one the tail row pushes rows from
        pages.append(w.pages_read)
        seen += [e.key for e in w.entries]
    assert seen == [e.key for e in every.entries]  # each row once, in order, the tail row included
    assert pages == [1, 2, 2, 2, 2]  # from offset 5 on, the tail row (org/m00) sorts before the window
    filtered = index.window(
        match=lambda e: e.profile.startswith("optimum-neuron"),
        page_may_match=lambda ref: any(p.startswith("optimum-neuron") for p in ref.profiles),
    )
    assert [e.model for e in filtered.entries] == ["org/m20", "org/m21", "org/m22"] and filtered.pages_read == 1


def test_a_read_costs_what_it_shows_on_s3(s3_bucket: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(snapshot, "PAGE_ROWS", 50)
    store = open_store(f"s3://{s3_bucket}/counted")
    for i in range(300):
        publish(store, key_of("s", i))
    requests: list[str] = []
    store.client.meta.events.register("before-send.s3", lambda request, **_: requests.append(request.url))
    from neuronforge.farm.rows import FarmQuery, farm_page, farm_row

    page = farm_page(store, FarmQuery(), offset=0, limit=20)
    assert len(page.rows) == 20 and page.total == 300
    assert len(requests) <= 4, requests  # head, tail, one page (no lease rows to confirm)
    requests.clear()
    row, manifest = farm_row(store, page.rows[0].key[:12])
    assert row.key == page.rows[0].key and manifest is not None
    assert len(requests) <= 5, requests  # prefix lookup, pointer, manifest, folder listing
    requests.clear()
    publish(store, key_of("s", 300))
    index_requests = [u for u in requests if "farm-index" in u]
    assert len(index_requests) <= 2 or any("pages" in u for u in index_requests), requests


def test_a_store_published_before_the_index_existed_gets_one(tmp_path: Path) -> None:
    store = open_store(str(tmp_path / "store"))
    for i in range(3):
        manifest_only(store, key_of("old", i))
    assert not (tmp_path / "store" / "farm-index").exists()
    assert set(_keys(store)) == {key_of("old", i) for i in range(3)}
    assert (tmp_path / "store" / snapshot.HEAD).is_file()  # written once, by the first reader
    assert json.loads((tmp_path / "store" / snapshot.HEAD).read_text())["aggregates"]["rows"] == 3


def test_one_model_has_one_name_in_every_record(tmp_path: Path) -> None:
    """A manifest (`source: {kind: builtin, location: tiny-llama}`), a failure and a build in progress
    of the model the user calls `builtin:tiny-llama` are one model in the index, under that name."""
    from types import SimpleNamespace

    from neuronforge.artifacts import leases
    from neuronforge.spec.target import TargetSpec

    store = open_store(f"file://{tmp_path}/store")
    index, manifest = manifest_only(store, key_of("n", 0), model="tiny-llama")
    builtin = manifest.model_copy(update={"source": manifest.source.model_copy(update={"kind": "builtin"})})
    farm_index.note_published(store, index, builtin)
    target = TargetSpec.parse({"instance_type": "inf2.xlarge", "tp_degree": 1, "sequence_length": 64})
    state = SimpleNamespace(model="builtin:tiny-llama", target=target)
    farm_index.record_failure(store, key_of("n", 1), "smoke", RuntimeError("differs"), "manual__1", state)
    lease = leases.try_acquire(store, key_of("n", 2), "worker-1:1", ttl_s=3600)
    farm_index.announce(store, lease, SimpleNamespace(model="builtin:tiny-llama", target=target))
    entries = farm_index.read_window(store).entries
    assert len(entries) == 3
    assert {e.model for e in entries} == {"builtin:tiny-llama"}
