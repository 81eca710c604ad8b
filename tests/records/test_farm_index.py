"""The farm index's records (`records.farm_index`): the tail and head store their version under
`schema`; rows and records refuse wrong types, which the index turns into a rebuild."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from neuronforge.artifacts.farm_index import log as index_log
from neuronforge.artifacts.farm_index import snapshot
from neuronforge.artifacts.farm_index.log import IndexCorrupt, parse_tail
from neuronforge.records.base import RecordError, RecordTooNew
from neuronforge.records.farm_index import Entry, FarmIndexHead, FarmIndexTail, LogRecord, PageRef
from neuronforge.stores import open_store

KEY = "12" * 32
DATA = Path(__file__).parent.parent / "data" / "records"


def test_a_log_record_stores_what_its_builder_set() -> None:
    assert LogRecord(kind="deleted", key=KEY).to_json() == {"kind": "deleted", "key": KEY}
    building = LogRecord(kind="building", key=KEY, building={"holder": "w:1", "at": "t"}).numbered(4)
    assert building.to_json() == {"kind": "building", "key": KEY, "building": {"holder": "w:1", "at": "t"}, "seq": 4}


def test_the_tail_round_trips_byte_for_byte() -> None:
    raw = (DATA / "ce27dfa" / "farm-index" / "tail.json").read_bytes()
    tail = parse_tail(raw)
    assert tail.next_seq == 2 and [r.kind for r in tail.records] == ["published"]
    assert tail.to_bytes() == raw
    assert tail.to_json()["schema"] == 1 and "schema_version" not in tail.to_json()


def test_a_newer_tail_is_refused_and_the_index_rebuilds_it() -> None:
    newer = json.dumps({"schema": 2, "next_seq": 1, "records": []}).encode()
    with pytest.raises(RecordTooNew, match=r"^farm-index/tail\.json: farm-index tail has schema 2, .* upgrade"):
        FarmIndexTail.from_bytes(newer, index_log.TAIL)
    with pytest.raises(IndexCorrupt, match="schema 2"):
        parse_tail(newer)


@pytest.mark.parametrize(
    ("tail", "field"),
    [
        ({"next_seq": "1", "records": []}, "next_seq"),
        ({"next_seq": 1, "records": {}}, "records"),
        ({"next_seq": 1, "records": [{"kind": "deleted", "key": 3, "seq": 1}]}, "records.0.key"),
        ({"next_seq": 1, "records": [{"kind": "deleted", "key": KEY}]}, "records"),  # no sequence number
        ({"next_seq": 1, "records": [{"kind": "failed", "key": KEY, "seq": 1, "failure": []}]}, "records.0.failure"),
        ({"next_seq": 1, "records": [{"kind": "failed", "key": KEY, "seq": 1, "failure": {"at": 5}}]}, "records.0"),
    ],
)
def test_a_tail_of_wrong_types_names_the_field(tail: dict, field: str) -> None:
    with pytest.raises(RecordError, match=rf"^farm-index/tail\.json: not a valid farm-index tail: {field}"):
        FarmIndexTail.from_json({"schema": 1, **tail}, index_log.TAIL)


def test_a_head_round_trips_and_refuses_wrong_types() -> None:
    page = "farm-index/pages/p.jsonl.gz"
    ref = PageRef(key=page, rows=1, sha256="0", first=["a"], last=["a"], profiles=[], instances=[], statuses=[])
    head = FarmIndexHead(seq=3, pages=[ref], aggregates={"rows": 1}, built_at="t")
    assert FarmIndexHead.from_json(head.to_json()) == head and head.rows == 1
    assert head.to_json()["schema"] == 1
    outside = [{**ref.model_dump(), "key": k} for k in ("p", "farm-index/pages/../../x", "farm-index/pages/a/b")]
    for bad in (
        {"seq": "3"},
        {"pages": [{"key": page}]},
        {"pages": [{**ref.model_dump(), "rows": "1"}]},
        *({"pages": [forged]} for forged in outside),  # a page a forged head names outside its folder
    ):
        with pytest.raises(IndexCorrupt, match="cannot be read as a farm-index head"):
            snapshot.parse_head(json.dumps({**head.to_json(), **bad}).encode())


def test_an_entry_takes_its_fields_by_position_or_name() -> None:
    assert Entry(KEY, "m", "cpu@local") == Entry(key=KEY, model="m", profile="cpu@local")
    e = Entry(KEY)
    e.apply(LogRecord(kind="failed", key=KEY, model="m", failure={"stage": "smoke", "at": "t"}))
    assert (e.model, e.status_class) == ("m", "smoke-failed")
    assert e.to_json() == {"key": KEY, "model": "m", "failure": {"stage": "smoke", "at": "t"}}


@pytest.mark.parametrize(
    "row",
    [
        {"model": "m"},
        {"key": KEY, "model": 3},
        {"key": KEY, "target": ["x"]},
        {"key": KEY, "published": "yes"},
        {"key": KEY, "building": {"at": 1}},
    ],
)
def test_a_page_row_of_wrong_types_is_one_damaged_row(tmp_path: Path, row: dict) -> None:
    """A forged page whose checksum was recomputed cannot carry a number where readers sort, filter
    and render text, or a list where they read a record: that row reads as unreadable (damaged, with
    the field and why), the page's other rows as they are."""
    import hashlib

    store = open_store(f"file://{tmp_path}")
    good = {"key": "b" * 64, "model": "fine"}
    data = gzip.compress((json.dumps(row) + "\n" + json.dumps(good) + "\n").encode(), mtime=0)
    store.put_bytes(data, "farm-index/pages/x.jsonl.gz")
    ref = PageRef(
        key="farm-index/pages/x.jsonl.gz",
        rows=2,
        sha256=hashlib.sha256(data).hexdigest(),
        first=[],
        last=[],
        profiles=[],
        instances=[],
        statuses=[],
    )
    bad, fine = snapshot.read_page(store, ref)
    assert bad.status_class == "damaged" and bad.unreadable.startswith("farm-index/pages/x.jsonl.gz line 1: ")
    assert bad.key == row.get("key", "(farm-index/pages/x.jsonl.gz line 1)")
    assert all(isinstance(getattr(bad, n), str) for n in ("model", "profile", "target", "instance"))
    assert (fine.key, fine.model, fine.unreadable) == ("b" * 64, "fine", "")
