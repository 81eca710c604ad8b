"""The failure record as a typed record: stored without a version; records from before the model,
target, profile and instance were kept read with those empty."""

from __future__ import annotations

import json
from pathlib import Path

from neuronforge.artifacts import layout
from neuronforge.artifacts.failures import read_failure, write_failure
from neuronforge.records.failure import FailureRecord
from neuronforge.stores import open_store
from tests.records.stored_fixtures import check_reads_back_as_written, check_wrong_type_refused, data, raw

OLD, OLDER = "failure-ce27dfa.json", "failure-before-1cdbe1b.json"


def test_a_failure_the_previous_release_wrote_reads_and_writes_back_byte_for_byte() -> None:
    f = check_reads_back_as_written(FailureRecord, OLD)
    assert f.stage == "compile" and f.error.startswith("RuntimeError: ")
    assert f.to_bytes() == raw(OLD)


def test_a_failure_from_before_the_build_was_named_reads_with_it_empty(tmp_path: Path) -> None:
    store = open_store(f"file://{tmp_path / 'store'}")
    key = data(OLDER)["key"]
    store.put_bytes(raw(OLDER), layout.failure_entry(key))
    f = read_failure(store, key)
    assert f is not None and (f.stage, f.run_id) == ("smoke", "manual__2026-11-20")
    assert (f.model, f.target, f.profile, f.instance) == ("", "", "", "")


def test_write_failure_stores_the_keys_it_always_had(tmp_path: Path) -> None:
    store = open_store(f"file://{tmp_path / 'store'}")
    written = write_failure(store, "e" * 64, "smoke", ValueError("x" * 5000), "run-1")
    stored = json.loads(store.get_bytes(layout.failure_entry("e" * 64)))
    assert stored.keys() == data(OLD).keys() and len(stored["error"]) == 2000
    assert read_failure(store, "e" * 64) == written


def test_an_unreadable_failure_is_no_failure_and_a_wrong_type_names_the_field(tmp_path: Path) -> None:
    store = open_store(f"file://{tmp_path / 'store'}")
    store.put_bytes(b'{"key": 1}', layout.failure_entry("f" * 64))
    assert read_failure(store, "f" * 64) is None  # advisory: the farm shows no reason rather than a traceback
    check_wrong_type_refused(FailureRecord, OLD, tmp_path, ("stage",), ["compile"])
