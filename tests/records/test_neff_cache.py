"""`launch/neff-cache.json` of an lmi-neuronx artifact as a typed record: written as it always was
(no version, sorted keys), read by the smoke test, the preflight, `verify` and `cache prune`."""

from __future__ import annotations

import json

import pytest

from neuronforge.records.base import RecordError
from neuronforge.records.neff_cache import NeffCacheRecord

# As the profile wrote it before the record was typed (lmi_neuronx.launch_spec at ce27dfa).
BEFORE = {
    "cache_root": "s3://b/neuron-cache",
    "compiled_graph_path": "s3://b/neuron-cache",
    "compiler_dir": "neuronxcc-2.21.33363.0+82129205",
    "entries": ["MODULE_1+a", "MODULE_2+b"],
    "kind": "neuron-compile-cache",
    "load": {"kwargs": {"batch_size": 1}, "model_type": "llama", "neuron_config": None},
    "neuron_cc_flags": "--model-type=transformer",
    "neuron_compile_cache_url": None,
}


def test_a_record_of_the_previous_release_reads_and_writes_back_byte_for_byte() -> None:
    raw = json.dumps(BEFORE, indent=2, sort_keys=True).encode() + b"\n"
    record = NeffCacheRecord.from_bytes(raw, "launch/neff-cache.json")
    assert record.entries == ["MODULE_1+a", "MODULE_2+b"] and not record.model_save
    assert record.to_bytes() == raw  # part of the hashed payload: the bytes must not move


def test_a_record_without_its_load_or_with_entries_of_the_wrong_type_is_refused_naming_the_field() -> None:
    with pytest.raises(RecordError, match="load"):
        NeffCacheRecord.from_json({k: v for k, v in BEFORE.items() if k != "load"}, "launch/neff-cache.json")
    with pytest.raises(RecordError, match=r"launch/neff-cache.json: .*entries"):
        NeffCacheRecord.from_json({**BEFORE, "entries": "MODULE_1+a"}, "launch/neff-cache.json")
