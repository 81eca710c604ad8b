"""What one read costs on S3, counted at a real endpoint (botocore's `before-send`: every attempt): one
artifact's detail (the catalog's JSON endpoint, `farm_row`, `show --json`) in 3 requests with its deploy
snippets from the manifest's own record, and `catalog stale` reading the same index pages whatever the
farm's size (pages picked by their model range)."""

from __future__ import annotations

import hashlib
import json
import re
import time
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest

from neuronforge.artifacts import farm_index, layout
from neuronforge.artifacts.farm_index import snapshot
from neuronforge.artifacts.farm_index.damage import SHA256, note_damaged
from neuronforge.artifacts.published import Damage
from neuronforge.farm import recompile
from neuronforge.farm.rows import farm_row
from neuronforge.interfaces.cli import ExitCode, main
from neuronforge.records.artifact_manifest import ArtifactManifest
from neuronforge.records.farm_index import PageRef
from neuronforge.records.index_entry import IndexEntry
from neuronforge.stores import open_store
from tests.farm_index.publishers import key_of

LAUNCH = b"#!/bin/sh\nexec serve --model ./model\n"


class Counted:
    """The (operation, key) of every request the store's client sends."""

    def __init__(self, store) -> None:
        self.log: list[tuple[str, str]] = []
        store.client.meta.events.register("before-send.s3", self)

    def __call__(self, request, event_name: str, **_) -> None:
        self.log.append((event_name.rsplit(".", 1)[-1], unquote(urlsplit(request.url).path)))

    def take(self) -> list[tuple[str, str]]:
        out, self.log = self.log, []
        return out


def _publish_with_launch(store, key: str, text: bool = True) -> str:
    """An artifact with one launch file, published as the publish stage writes it: files, manifest (with
    the launch file's text unless `text` is False: a manifest of before), pointer, index record."""
    prefix = f"artifacts/org/model/rev/t/{key[:12]}"
    store.put_bytes(LAUNCH, f"{prefix}/launch/serve.sh")
    manifest = {
        "schema_version": 1,
        "cache_key": key,
        "source": {"kind": "hub", "location": "org/model", "revision": "rev"},
        "toolchain": {"compiler": "torch-inductor", "compiler_version": "2.0"},
        "profile": {"ref": "cpu@local"},
        "target_slug": "t",
        "request": {"target": {"instance_type": "inf2.xlarge"}},
        "files": [{"path": "launch/serve.sh", "size": len(LAUNCH), "sha256": hashlib.sha256(LAUNCH).hexdigest()}],
        "formats": {"launch": "launch"},
        "published_at": "2026-11-25T00:00:00Z",
        **({"launch_text": {"serve.sh": LAUNCH.decode()}} if text else {}),
    }
    store.write_json(f"{prefix}/{layout.ARTIFACT_MANIFEST}", manifest)
    index = IndexEntry(cache_key=key, manifest=f"{prefix}/{layout.ARTIFACT_MANIFEST}", prefix=prefix)
    index.write_if_absent(store, layout.index_entry(key))
    farm_index.note_published(store, index, ArtifactManifest.from_json(manifest))
    return prefix


def test_one_artifact_costs_three_requests(s3_bucket: str, monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    from tests.plugins.conftest import load_plugin

    uri = f"s3://{s3_bucket}/detail"
    store = open_store(uri)
    key = key_of("detail", 0)
    prefix = _publish_with_launch(store, key)
    counted = Counted(store)

    row, manifest = farm_row(store, key)
    assert row.status == "published" and row.incomplete == [] and manifest is not None
    assert [op for op, _ in counted.take()] == ["GetObject", "GetObject", "ListObjectsV2"]  # pointer, manifest, folder
    farm_row(store, key[:12])
    assert len(counted.take()) == 4  # and the listing that finds a key from its first 12 characters

    assert main(["show", key, "--store", uri, "--json"]) == 0  # no bucket check: the first read says it
    assert json.loads(capsys.readouterr().out)["cache_key"] == key
    assert [op for op, _ in counted.take()] == ["GetObject", "GetObject", "ListObjectsV2"]

    # The catalog's JSON endpoint: the store kept open (one bucket check per api-server), the snippet
    # from the manifest's record of its launch file, not a read of the file.
    monkeypatch.setenv("NEURONFORGE_STORE", uri)
    pages = load_plugin("neuronforge_catalog").pages
    pages.base._OPEN_REMOTE.clear()

    def artifact(key: str) -> dict:  # the route called as FastAPI calls it, with the configured store
        return pages.api.artifact(pages.base.StoreAccess(pages.base.open_configured), key)

    artifact(key)
    assert next(op for op, _ in counted.take()) == "HeadBucket"
    answer = artifact(key)
    sent = counted.take()
    assert len(sent) == 3 and not any("launch/" in k for _, k in sent), sent
    assert answer["snippets"] == {"serve.sh": LAUNCH.decode()}

    # A manifest published before it recorded its launch files' text: the file is read (one request).
    old = key_of("detail", 1)
    _publish_with_launch(store, old, text=False)
    counted.take()
    assert artifact(old)["snippets"] == {"serve.sh": LAUNCH.decode()}
    assert [k for _, k in counted.take()][-1].endswith("/launch/serve.sh")

    # Rewritten since it was published (same size, other bytes: what only `verify`'s sha256 sees) and
    # recorded damaged so: the listing shows a file newer than the manifest, so the record is read.
    time.sleep(1.1)  # S3's LastModified counts seconds
    store.put_bytes(LAUNCH.replace(b"serve", b"SERVE"), f"{prefix}/launch/serve.sh")
    damage = Damage(key, "1 file(s) do not match the manifest", f"{prefix}/manifest.json")
    note_damaged(store, damage, "verify", None, SHA256)
    counted.take()
    row, _ = farm_row(store, key)
    assert row.status == "damaged" and "do not match" in row.message
    assert len(counted.take()) == 4 and artifact(key)["status"] == "damaged"
    assert main(["show", key, "--store", uri]) == ExitCode.REJECTED  # refused: damaged
    assert "do not match the manifest" in capsys.readouterr().err


def _farm(store, models: int) -> None:
    """An index of `models` models x 2 builds, written as a compaction writes it (pages, then the head)."""
    entries: dict[str, farm_index.Entry] = {}
    for m in range(models):
        for b in range(2):
            index, manifest = _records(key_of(f"m{m}", b), f"org/m{m:04d}")
            snapshot.merge(entries, [farm_index.published_record(index, manifest).numbered(0)])
    assert snapshot.write_snapshot(store, entries.values(), 0, None) is not None


def _records(key: str, model: str) -> tuple[IndexEntry, ArtifactManifest]:
    prefix = f"artifacts/{model}/rev/t/{key[:12]}"
    manifest = {
        "schema_version": 1,
        "cache_key": key,
        "source": {"kind": "hub", "location": model, "revision": "rev"},
        "toolchain": {"compiler": "torch-inductor", "compiler_version": "2.0"},
        "profile": {"ref": "cpu@local"},
        "files": [],
    }
    index = IndexEntry(cache_key=key, manifest=f"{prefix}/{layout.ARTIFACT_MANIFEST}", prefix=prefix)
    return index, ArtifactManifest.from_json(manifest)


def test_catalog_stale_reads_the_same_pages_at_two_farm_sizes(
    s3_bucket: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Pages of 10 rows naming too many models to list (so the page's model range decides): a catalog
    of two models costs the same requests in a farm of 30 models and of 150."""
    from neuronforge.farm.catalog import load_catalog
    from neuronforge.profiles.registry import detect_toolchain

    monkeypatch.setattr(snapshot, "PAGE_ROWS", 10)
    monkeypatch.setattr(snapshot, "MODELS_PER_PAGE", 2)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    revision = "0123456789abcdef0123456789abcdef01234567"
    target = json.dumps({"instance_type": "inf2.xlarge", "tp_degree": 1, "sequence_length": 64, "profile": "cpu"})
    path = tmp_path / "models.yaml"
    path.write_text(
        "models:\n" + "".join(f"  - source: org/m{m:04d}@{revision}\n    targets:\n      - {target}\n" for m in (3, 17))
    )
    catalog = load_catalog(path)
    toolchains = {"cpu@local": detect_toolchain("cpu")}
    costs = {}
    for models in (30, 150):
        store = open_store(f"s3://{s3_bucket}/farm-{models}")
        _farm(store, models)
        head, _ = snapshot.read_head(store)
        assert head is not None and len(head.pages) == models * 2 // 10 and all(p.models is None for p in head.pages)
        counted = Counted(store)
        builds = recompile.published_builds(store, {"org/m0003", "org/m0017"})
        assert len(counted.take()) == 4  # head, tail, the page of each model
        assert {b.key for b in builds} <= {key_of(f"m{m}", b) for m in (3, 17) for b in range(2)}
        states = recompile.find_stale(catalog, toolchains, store, tmp_path / "work")
        assert [s.status for s in states] == ["stale", "stale"]
        # the same objects: the page's number, not its compaction's token
        sent = [(op, k.split(f"/farm-{models}/")[-1]) for op, k in counted.take()]
        costs[models] = [(op, re.sub(r"-[0-9a-f]{8}-", "-", k)) for op, k in sent]
    assert costs[30] == costs[150] and len(costs[30]) == 2 + 2 + 2, costs  # head, tail, 2 pages, 2 lookups


def test_a_page_range_written_by_the_first_index_picks_pages() -> None:
    """Heads have named each page's first and last rows' sort keys since the farm index's first release
    (a998d2f): a page of such a head is picked by its model range, its listed models where it has them."""
    old = {
        "key": "farm-index/pages/000000000012-abcd1234-0001.jsonl.gz",
        "rows": 2000,
        "sha256": "0" * 64,
        "first": ["org/b", "cpu@local", "t", "k1"],
        "last": ["org/d", "cpu@local", "t", "k2"],
        "profiles": ["cpu@local"],
        "instances": ["inf2.xlarge"],
        "statuses": ["published"],
        "models": None,
    }
    ref = PageRef.model_validate(old)
    assert ref.may_hold({"org/c"}) and ref.may_hold({"org/b"}) and ref.may_hold({"org/d", "org/z"})
    assert not ref.may_hold({"org/a", "org/e"}) and not ref.may_hold(set())
    listed = PageRef.model_validate({**old, "models": ["org/b", "org/d"]})
    assert listed.may_hold({"org/d"}) and not listed.may_hold({"org/c"})
    assert PageRef.model_validate({**old, "first": [], "last": []}).may_hold({"org/z"})  # no range: it may
