"""The compile cache's records: a graph set in the store and a host's note of what the store holds."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from neuronforge.artifacts import layout
from neuronforge.compilation.compile_cache import DONE, CompileCache
from neuronforge.records.base import RecordError, RecordTooNew
from neuronforge.records.compile_cache import GraphSet
from neuronforge.stores import open_store

COMPILER, VERSION = "neuronxcc", "2.21.33363.0+82129205"


def _cache(tmp_path: Path) -> CompileCache:
    store = open_store(f"file://{tmp_path / 'store'}")
    return CompileCache(tmp_path / "local", COMPILER, VERSION, store=store)


def test_a_graph_set_written_before_it_had_a_version_reads(tmp_path: Path) -> None:
    cache = _cache(tmp_path)
    key = layout.neuron_graph_set(COMPILER, VERSION, "g" * 16)
    cache.store.put_bytes(b'{"entries": ["MODULE_1+a", "MODULE_2+b"]}', key)  # as earlier releases wrote it
    assert cache.graph_set("g" * 16) == ["MODULE_1+a", "MODULE_2+b"]


def test_a_recorded_graph_set_reads_back_and_keeps_the_field_old_readers_read(tmp_path: Path) -> None:
    cache = _cache(tmp_path)
    for name in ("MODULE_2+b", "MODULE_1+a"):
        cache.store.put_bytes(b"", f"{cache.store_prefix}/{name}/{DONE}")
    assert cache.record_graph_set("h" * 16, ["MODULE_2+b", "MODULE_1+a"])
    stored = json.loads(cache.store.get_bytes(layout.neuron_graph_set(COMPILER, VERSION, "h" * 16)))
    assert stored["entries"] == ["MODULE_1+a", "MODULE_2+b"] and stored["schema_version"] == 1
    assert cache.graph_set("h" * 16) == ["MODULE_1+a", "MODULE_2+b"]


def test_an_unreadable_graph_set_is_an_unknown_one_and_a_newer_one_is_refused(tmp_path: Path) -> None:
    cache = _cache(tmp_path)
    key = layout.neuron_graph_set(COMPILER, VERSION, "i" * 16)
    cache.store.put_bytes(b'{"entries": "MODULE_1+a"}', key)
    assert cache.graph_set("i" * 16) is None  # the compile pre-seeds nothing from it, as for a missing set
    with pytest.raises(RecordError, match="entries"):
        GraphSet.read(cache.store, key)
    with pytest.raises(RecordTooNew, match="upgrade neuronforge"):
        GraphSet.from_json({"schema_version": 2, "entries": []}, "x")
