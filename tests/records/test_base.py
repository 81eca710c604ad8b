"""The rules every stored record follows (`neuronforge.records.base`), once, on a record made for the test."""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar

import pytest
from pydantic import StrictInt, StrictStr, ValidationError

from neuronforge.records.base import RecordError, RecordTooNew, StoredRecord
from neuronforge.stores import NotFound, open_store


def _v1_to_v2(data: dict[str, Any]) -> dict[str, Any]:
    return {**data, "count": len(data.pop("items"))}


class Tally(StoredRecord):
    KIND: ClassVar[str] = "tally"
    SCHEMA: ClassVar[int] = 2
    UPGRADES: ClassVar = {1: _v1_to_v2}

    name: StrictStr
    count: StrictInt = 0


class Ancient(Tally):
    OLDEST: ClassVar[int] = 2


class Gap(Tally):
    SCHEMA: ClassVar[int] = 3  # and no upgrade from 2


class Loose(Tally):
    UNVERSIONED: ClassVar[int | None] = 2


def test_a_record_round_trips_with_its_version(tmp_path: Path) -> None:
    store = open_store(f"file://{tmp_path}")
    Tally(name="a", count=3).write(store, "t/a.json")
    assert store.read_json("t/a.json") == {"schema_version": 2, "name": "a", "count": 3}
    assert Tally.read(store, "t/a.json") == Tally(name="a", count=3)
    assert Tally.from_bytes(Tally(name="b").to_bytes()) == Tally(name="b")
    assert Tally(name="a").write_if_absent(store, "t/b.json") and not Tally(name="z").write_if_absent(store, "t/b.json")
    assert Tally.read(store, "t/b.json").name == "a"
    with pytest.raises(NotFound):
        Tally.read(store, "t/none.json")


def test_a_record_is_immutable() -> None:
    with pytest.raises(ValidationError):
        Tally(name="a").count = 2  # type: ignore[misc]


def test_a_newer_version_is_refused_with_the_upgrade_to_make(tmp_path: Path) -> None:
    store = open_store(f"file://{tmp_path}")
    store.write_json("t/new.json", {"schema_version": 3, "name": "a", "count": 1})
    with pytest.raises(RecordTooNew) as caught:
        Tally.read(store, "t/new.json")
    message = str(caught.value)
    assert message.count("\n") == 0 and message.startswith(store.uri("t/new.json"))
    assert "tally has schema 3, this neuronforge reads up to 2; upgrade neuronforge" in message
    assert isinstance(caught.value, RecordError)  # a store problem to every caller that catches those


def test_an_older_version_is_lifted_one_step_at_a_time() -> None:
    assert Tally.from_json({"schema_version": 1, "name": "a", "items": ["x", "y"]}) == Tally(name="a", count=2)


@pytest.mark.parametrize(
    ("cls", "data", "said"),
    [
        (Ancient, {"schema_version": 1, "name": "a", "items": []}, "older than 2, the oldest still read"),
        (Tally, {"schema_version": 0, "name": "a"}, "tally has schema 0, older than 1, the oldest still read"),
        (Gap, {"schema_version": 2, "name": "a"}, "tally has schema 2, which this neuronforge cannot read"),
        (Tally, {"name": "a"}, "tally has no readable schema_version (None)"),
        (Tally, {"schema_version": True, "name": "a"}, "no readable schema_version (True)"),
        (Tally, {"schema_version": "2", "name": "a"}, "no readable schema_version ('2')"),
        (Tally, ["a"], "not a tally (a JSON object was expected, found list)"),
    ],
)
def test_what_has_no_version_this_release_reads_is_refused(cls: type[Tally], data: Any, said: str) -> None:
    with pytest.raises(RecordError) as caught:
        cls.from_json(data, "file:///s/t.json")
    assert type(caught.value) is RecordError and said in str(caught.value)
    assert str(caught.value).startswith("file:///s/t.json: ")


def test_a_kind_whose_readers_never_required_the_version_reads_one_without_it() -> None:
    assert Loose.from_json({"name": "a", "count": 1}) == Loose(name="a", count=1)


@pytest.mark.parametrize(
    ("data", "field"),
    [
        ({"name": 7}, "name"),
        ({"name": "a", "count": "3"}, "count"),
        ({"name": "a", "count": True}, "count"),
        ({}, "name"),
    ],
)
def test_wrong_types_are_a_record_error_naming_the_field_and_the_uri(
    tmp_path: Path, data: dict[str, Any], field: str
) -> None:
    store = open_store(f"file://{tmp_path}")
    store.write_json("t/bad.json", {"schema_version": 2, **data})
    with pytest.raises(RecordError) as caught:
        Tally.read(store, "t/bad.json")
    assert str(caught.value).startswith(f"{store.uri('t/bad.json')}: not a valid tally: {field}: ")
    assert caught.value.loc == (field,) and "\n" not in str(caught.value)


def test_bytes_that_are_not_json_are_a_record_error(tmp_path: Path) -> None:
    store = open_store(f"file://{tmp_path}")
    for raw in (b"{", b"\xff\xfe"):
        store.put_bytes(raw, "t/x.json")
        with pytest.raises(RecordError, match=r"tally is not valid JSON"):
            Tally.read(store, "t/x.json")


def test_fields_a_later_release_added_are_ignored_not_refused() -> None:
    assert Tally.from_json({"schema_version": 2, "name": "a", "colour": "red"}).to_json() == {
        "schema_version": 2,
        "name": "a",
        "count": 0,
    }
