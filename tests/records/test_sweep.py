"""The sweep's record file (`<out>.records.json`) as a typed record, and a sweep resuming from one."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from neuronforge.common.errors import InvalidInput
from neuronforge.farm.sweep.records import Record, RecordLog
from neuronforge.farm.sweep.space import Candidate
from neuronforge.records.sweep import SweepRecords
from tests.records.stored_fixtures import (
    check_newer_refused,
    check_reads_back_as_written,
    check_wrong_type_refused,
    data,
    raw,
)

V1 = "sweep-records-v1.json"  # written by ce27dfa's RecordLog
HEADER_KEYS = ("model", "instance", "profile", "method", "space")


def test_a_record_file_the_previous_release_wrote_reads_and_writes_back_the_same() -> None:
    r = check_reads_back_as_written(SweepRecords, V1)
    assert r.finished and [c.outcome for c in r.candidates] == ["valid", "failed", "skipped"]
    assert r.candidates[1].reason == "neuronx-cc: out of memory"


def test_a_sweep_resumes_from_the_previous_releases_file_and_rewrites_it_the_same(tmp_path: Path) -> None:
    path = tmp_path / "out.records.json"
    path.write_bytes(raw(V1))
    header = {k: data(V1)[k] for k in HEADER_KEYS}
    log_file, earlier = RecordLog.load(path, header)
    assert [r.candidate for r in earlier] == [Candidate(2, 1, 2048), Candidate(1, 4, 2048), Candidate(1, 1, 2048)]
    assert earlier[0].tried and not earlier[2].tried and earlier[0].seconds == 61.2
    log_file.add(Record(Candidate(2, 4, 1024), "valid", "tried", "", 3.0))
    rewritten = json.loads(path.read_text())
    assert rewritten.keys() == data(V1).keys() and rewritten["candidates"][:3] == data(V1)["candidates"]
    assert not rewritten["finished"]


def test_a_record_file_of_another_sweep_or_a_newer_neuronforge_is_refused_in_one_line(tmp_path: Path) -> None:
    path = tmp_path / "out.records.json"
    path.write_bytes(raw(V1))
    header = {k: data(V1)[k] for k in HEADER_KEYS}
    with pytest.raises(InvalidInput, match="records a sweep of another model"):
        RecordLog.load(path, {**header, "instance": "trn1.2xlarge"})
    path.write_text(json.dumps({**data(V1), "schema_version": 2}))
    with pytest.raises(InvalidInput) as exc:
        RecordLog.load(path, header)
    assert "\n" not in str(exc.value) and str(path) in str(exc.value) and "upgrade neuronforge" in str(exc.value)
    path.write_text("{")
    with pytest.raises(InvalidInput, match=r"not valid JSON.*move it away"):
        RecordLog.load(path, header)


def test_a_newer_record_file_is_refused_with_the_upgrade(tmp_path: Path) -> None:
    check_newer_refused(SweepRecords, V1, tmp_path)


def test_a_record_file_with_a_wrong_type_names_the_field_and_the_uri(tmp_path: Path) -> None:
    check_wrong_type_refused(SweepRecords, V1, tmp_path, ("candidates", 0, "batch_size"), "four")
    check_wrong_type_refused(SweepRecords, V1, tmp_path, ("candidates", 1, "outcome"), "maybe")
