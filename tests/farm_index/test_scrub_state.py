"""The scrub cannot be fooled by its own state (issue 51): a stored cursor it would refuse as `--cursor`
(`zzzz`, which sorts after every key: "checked 0 … pass complete" over a store of 3), a state nested
100 000 deep, one that is not UTF-8, a folder where it belongs — each starts a new pass that checks
every artifact, says in its one line that the stored state was damaged and why, and leaves a state
that reads. The daily DAG's task reads it the same way. On a local folder store and on S3."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from neuronforge.artifacts import layout
from neuronforge.farm.scrub import read_state, scrub
from neuronforge.interfaces.cli import ExitCode, main
from neuronforge.records.scrub import ScrubState
from neuronforge.stores import ArtifactStore, open_store
from tests.releases.builds import publish

DAMAGED = {
    "a cursor --cursor refuses": (json.dumps({"schema_version": 1, "cursor": "zzzz"}).encode(), "its cursor 'zzzz'"),
    "nested 100 000 deep": (b"[" * 100_000 + b"]" * 100_000, "nests lists or objects more than 32 deep"),
    "not UTF-8": (json.dumps({"schema_version": 1, "cursor": ""}).encode("utf-16"), "not UTF-8"),
    "a cursor that is no text": (b'{"schema_version": 1, "cursor": ["ab"]}', "its cursor \"['ab']\" is not a cache"),
}


@pytest.fixture(params=["file", "s3"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> ArtifactStore:
    if request.param == "file":
        uri = f"file://{tmp_path / 'store'}"
    else:
        uri = f"s3://{request.getfixturevalue('s3_bucket')}/scrubbed"
    store = open_store(uri)
    for n in range(1, 4):
        publish(store, n)
    return store


def _repair(store: ArtifactStore, capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(["verify", "--store", store.root_uri, "--repair"])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize("damage", sorted(DAMAGED))
def test_a_damaged_state_starts_a_new_pass_that_says_so(store, damage: str, capsys) -> None:
    raw, words = DAMAGED[damage]
    store.put_bytes(raw, layout.SCRUB_STATE)
    assert read_state(store)[0] is None and words in read_state(store)[1]
    code, out, err = _repair(store, capsys)
    assert code == ExitCode.OK and err == "", err
    line = out.splitlines()[-1]
    assert line.startswith(f"scrub of {store.root_uri}: checked 3, ok 3, damaged 0"), line
    assert f"; pass complete; the stored state was damaged ({store.uri(layout.SCRUB_STATE)}: " in line
    assert words in line and line.endswith("): started a new pass")
    state, damaged = read_state(store)
    assert state is not None and state.cursor == "" and not damaged  # rewritten: the next call reads it
    code, out, _ = _repair(store, capsys)
    assert "stored state was damaged" not in out


def test_a_folder_where_the_state_belongs_is_replaced(tmp_path: Path, capsys) -> None:
    store = open_store(f"file://{tmp_path / 'store'}")
    publish(store, 1)
    store.put_bytes(b"{}", f"{layout.SCRUB_STATE}/inside")
    code, out, err = _repair(store, capsys)
    assert code == ExitCode.OK and err == "", err
    assert "checked 1, ok 1" in out and "scrub state is damaged: it is a folder, not a file): started a new pass" in out
    assert (tmp_path / "store" / layout.SCRUB_STATE).is_file() and read_state(store)[0] is not None


def test_a_valid_cursor_resumes_and_a_refused_one_is_refused_from_either_place(store, capsys) -> None:
    keys = sorted(o.key.removeprefix("index/").removesuffix(".json") for o in store.list("index"))
    ScrubState(cursor=keys[0]).write(store, layout.SCRUB_STATE)
    report = scrub(store)
    assert (report.checked, report.state_damaged) == (2, "")
    with pytest.raises(SystemExit) as refused:  # checked by the parser, by the scrub's own rule
        main(["verify", "--store", store.root_uri, "--repair", "--cursor", "zzzz"])
    assert refused.value.code == ExitCode.USAGE and "--cursor: 'zzzz' is not a cache key" in capsys.readouterr().err


def test_the_stored_state_keeps_a_bounded_list_of_damaged_keys(tmp_path: Path, monkeypatch) -> None:
    """What the scrub writes is what its reader takes: its damaged keys are cut to KEPT_KEYS."""
    from neuronforge.farm import scrub as module

    store = open_store(f"file://{tmp_path / 'store'}")
    for n in range(1, 4):
        store.delete_prefix(json.loads(store.get_bytes(layout.index_entry(publish(store, n))))["manifest"])
    monkeypatch.setattr(module, "KEPT_KEYS", 2)
    report = scrub(store)
    state, _ = read_state(store)
    assert report.damaged == 3 and state is not None and len(state.last["damaged_keys"]) == 2
    assert state.last["damaged"] == 3
