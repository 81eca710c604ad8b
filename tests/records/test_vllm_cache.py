"""The vLLM cache manifest (`launch/vllm-cache.json`) as a typed record."""

from __future__ import annotations

from pathlib import Path

import pytest

from neuronforge.compilation.vllm_cache import entry_record, pull, store_problems
from neuronforge.records.base import RecordError
from neuronforge.records.local import read_local, write_local
from neuronforge.records.vllm_cache import CacheManifest
from neuronforge.stores import open_store
from tests.records.stored_fixtures import (
    check_newer_refused,
    check_reads_back_as_written,
    check_wrong_type_refused,
    raw,
)

V1 = "vllm-cache-v1.json"  # written as ce27dfa's vllm-native backend wrote it


def test_a_manifest_the_previous_release_wrote_reads_and_writes_back_byte_for_byte(tmp_path: Path) -> None:
    m = check_reads_back_as_written(CacheManifest, V1)
    assert m.entries[0].key == "c" * 32 and {f.path for f in m.entries[0].files} >= {
        "graph.hlo",
        ".compilation_complete",
    }
    assert m.nki[0].path == "nki/d.json" and m.built["uploaded"] == 1
    write_local(m, tmp_path / "vllm-cache.json")
    assert (tmp_path / "vllm-cache.json").read_bytes() == raw(V1)  # what sync.sh and the smoke test read


def test_entries_and_nki_files_are_written_sorted_whatever_the_order_given() -> None:
    m = CacheManifest.from_bytes(raw(V1))
    shuffled = m.model_copy(update={"entries": [*m.entries, m.entries[0].model_copy(update={"key": "0" * 32})]})
    assert [e["key"] for e in shuffled.to_json()["entries"]] == ["0" * 32, "c" * 32]


def test_an_entry_record_is_what_the_store_is_checked_and_pulled_against(tmp_path: Path) -> None:
    entry = tmp_path / "cache" / ("a" * 32)
    entry.mkdir(parents=True)
    for name, data in (
        ("graph.hlo", b"hlo"),
        (f"graph_{'a' * 32}.neff", b"neff"),
        (".compilation_complete", b"done\n"),
    ):
        (entry / name).write_bytes(data)
    (entry / ".cache_accessed").write_bytes(b"")  # host-local: never listed
    record = entry_record(entry)
    assert [f.path for f in record.files] == [".compilation_complete", "graph.hlo", f"graph_{'a' * 32}.neff"]
    store = open_store(f"file://{tmp_path / 'store'}")
    store.put_tree(entry, f"p/{'a' * 32}")
    store.delete_prefix(f"p/{'a' * 32}/.cache_accessed")
    m = CacheManifest.from_bytes(raw(V1)).model_copy(update={"entries": [record], "nki": []})
    assert store_problems(store, "p", m) == []
    assert pull(store, "p", m, tmp_path / "pulled") == ["a" * 32]


def test_a_newer_manifest_is_refused_with_the_upgrade(tmp_path: Path) -> None:
    check_newer_refused(CacheManifest, V1, tmp_path)


def test_a_manifest_with_a_wrong_type_names_the_field_and_the_uri(tmp_path: Path) -> None:
    check_wrong_type_refused(CacheManifest, V1, tmp_path, ("entries", 0, "files", 0, "size"), "large")
    check_wrong_type_refused(CacheManifest, V1, tmp_path, ("argv",), "--tensor-parallel-size 2")


def test_a_local_manifest_that_is_not_json_names_its_file(tmp_path: Path) -> None:
    (tmp_path / "vllm-cache.json").write_text("{")
    with pytest.raises(RecordError, match=r"vllm-cache\.json: vLLM cache manifest is not valid JSON"):
        read_local(CacheManifest, tmp_path / "vllm-cache.json")
