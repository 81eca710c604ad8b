"""The index entry (`records.index_entry`): the pointer from a cache key to its manifest."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from neuronforge.records.base import RecordError, RecordTooNew
from neuronforge.records.index_entry import IndexEntry
from neuronforge.stores import open_store

KEY = "cd" * 32
PREFIX = f"artifacts/org/m/rev/slug/{KEY[:12]}"
WRITTEN = {"schema_version": 1, "cache_key": KEY, "manifest": f"{PREFIX}/manifest.json", "prefix": PREFIX}


def test_an_index_entry_round_trips(tmp_path: Path) -> None:
    store = open_store(f"file://{tmp_path}")
    store.put_bytes(json.dumps(WRITTEN, indent=2).encode(), f"index/{KEY}.json")  # as publish wrote it
    entry = IndexEntry.read(store, f"index/{KEY}.json")
    assert (entry.cache_key, entry.manifest, entry.artifact_prefix) == (KEY, f"{PREFIX}/manifest.json", PREFIX)
    assert entry.to_json() == WRITTEN
    assert entry.write_if_absent(store, "index/other.json") and IndexEntry.read(store, "index/other.json") == entry


def test_an_entry_without_prefix_points_at_the_manifests_folder() -> None:
    entry = IndexEntry.from_json({"manifest": f"{PREFIX}/manifest.json"})  # hand-made: no version, no prefix
    assert entry.artifact_prefix == PREFIX and entry.cache_key == ""


def test_a_newer_entry_is_refused_with_one_line(tmp_path: Path) -> None:
    store = open_store(f"file://{tmp_path}")
    store.write_json("index/k.json", {**WRITTEN, "schema_version": 2})
    with pytest.raises(RecordTooNew) as caught:
        IndexEntry.read(store, "index/k.json")
    assert str(caught.value) == (
        f"{store.uri('index/k.json')}: index entry has schema 2, this neuronforge reads up to 1; "
        "upgrade neuronforge on this host to read it"
    )


@pytest.mark.parametrize("changes", [{"manifest": 3}, {"manifest": None}, {"manifest": ["a"]}])
def test_an_entry_without_a_manifest_key_is_a_record_error(tmp_path: Path, changes: dict) -> None:
    store = open_store(f"file://{tmp_path}")
    store.write_json("index/k.json", {**WRITTEN, **changes})
    with pytest.raises(RecordError, match=r"^file://.*index/k\.json: not a valid index entry: manifest: "):
        IndexEntry.read(store, "index/k.json")
