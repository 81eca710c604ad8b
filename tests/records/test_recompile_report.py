"""The recompile report (`reports/recompile-<stamp>.json`) as a typed record: version 3 read and
written the same, version 2 lifted (no release aimed at, no decisions), version 1 (toolchains keyed by
backend) refused as too old to read."""

from __future__ import annotations

from pathlib import Path

import pytest

from neuronforge.artifacts import layout
from neuronforge.farm import recompile
from neuronforge.records.base import RecordError, RecordTooNew
from neuronforge.records.recompile_report import RecompileReport
from neuronforge.stores import open_store
from tests.records.stored_fixtures import (
    check_newer_refused,
    check_reads_back_as_written,
    check_wrong_type_refused,
    data,
    raw,
)

V1, V2 = "recompile-report-v1.json", "recompile-report-v2.json"  # written by c31d810 (e4c7f7d^), ce27dfa
V3 = "recompile-report-v3.json"  # written by issue 37's release (an upgrade to 2.33.0, with a migration row)
V4 = "recompile-report-v4.json"  # written by issue 53's release (V3 with a rebuilt row's speed against stable)


def test_a_report_this_release_writes_reads_and_writes_back_byte_for_byte() -> None:
    r = check_reads_back_as_written(RecompileReport, V4)
    assert r.release == "2.33.0" and r.targets[0].status == recompile.FRESH
    assert r.targets[1].upgrade is not None and r.targets[1].upgrade["rebuild_on"] == "vllm-neuron@2.31.1"
    assert r.targets[2].migrated_from == "vllm-neuron-trn2 vllm-neuron@2.31.1" and r.targets[2].upgrade is None
    assert r.targets[1].speed is not None and r.targets[1].speed.verdict == "regression"
    assert r.targets[0].speed is None
    assert r.to_bytes() == raw(V4)  # indented in field order, as people read it


def test_a_version_3_report_is_lifted_saying_no_speed_was_compared() -> None:
    old = data(V3)
    lifted = RecompileReport.from_bytes(raw(V3)).to_json()
    assert lifted["schema_version"] == 4
    assert {k: v for k, v in lifted.items() if k not in ("schema_version", "targets")} == {
        k: v for k, v in old.items() if k not in ("schema_version", "targets")
    }
    assert lifted["targets"] == [{**was, "speed": None} for was in old["targets"]]


def test_a_version_2_report_is_lifted_saying_it_aimed_at_no_release() -> None:
    old = data(V2)
    lifted = RecompileReport.from_bytes(raw(V2)).to_json()
    assert lifted["schema_version"] == 4 and lifted["release"] == ""
    assert {k: v for k, v in lifted.items() if k not in ("schema_version", "release", "targets")} == {
        k: v for k, v in old.items() if k not in ("schema_version", "targets")
    }
    for was, now in zip(old["targets"], lifted["targets"], strict=True):
        assert now == {**was, "upgrade": None, "migrated_from": "", "speed": None}


def test_write_report_stores_what_the_previous_release_stored(tmp_path: Path) -> None:
    old = RecompileReport.from_bytes(raw(V2))
    store = open_store(f"file://{tmp_path / 'store'}")
    state = recompile.TargetState(**old.targets[0].model_dump())
    rep = recompile.Report(old.stamp, old.catalog, old.store, dict(old.toolchains), [state])
    recompile.write_report(store, rep)
    stored = RecompileReport.read(store, layout.recompile_report(old.stamp, "json"))
    assert stored.model_dump(exclude={"generated_at"}) == old.model_dump(exclude={"generated_at"})


def test_a_version_1_report_is_refused_as_too_old_not_lifted(tmp_path: Path) -> None:
    store = open_store(f"file://{tmp_path / 'store'}")
    store.put_bytes(raw(V1), "reports/old.json")
    with pytest.raises(RecordError) as exc:
        RecompileReport.read(store, "reports/old.json")
    assert not isinstance(exc.value, RecordTooNew)
    assert str(exc.value) == (
        f"{store.uri('reports/old.json')}: recompile report has schema 1, older than 2, the oldest still read"
    )


def test_a_newer_report_is_refused_with_the_upgrade(tmp_path: Path) -> None:
    check_newer_refused(RecompileReport, V4, tmp_path)


def test_a_report_with_a_wrong_type_names_the_field_and_the_uri(tmp_path: Path) -> None:
    check_wrong_type_refused(RecompileReport, V4, tmp_path, ("targets", 0, "order"), "first")
    check_wrong_type_refused(RecompileReport, V4, tmp_path, ("counts",), ["fresh"])
    check_wrong_type_refused(RecompileReport, V4, tmp_path, ("targets", 1, "upgrade"), "rebuild")
    check_wrong_type_refused(RecompileReport, V4, tmp_path, ("targets", 1, "speed"), "regression")
