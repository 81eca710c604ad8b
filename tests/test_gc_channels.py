"""gc honours release channels: nothing a channel points to or keeps in its history is deleted, a deleted
build's review goes with it, and a channel record that does not read keeps every build of its model.

The builds are hand-made published artifacts (`tests.test_gc._publish`) moved by the real
`neuronforge.artifacts.channels` API, so the channels hold what a promote writes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from neuronforge.artifacts import channels, farm_index, layout, reviews
from neuronforge.artifacts.published import lookup
from neuronforge.farm import gc
from neuronforge.farm.gc import channel_holds, collect
from neuronforge.interfaces.cli import EXIT_FAILURE, EXIT_OK, main
from neuronforge.records.channel import ChannelMove, ChannelRecord
from neuronforge.spec.source import ModelSource
from neuronforge.stores import open_store
from tests.test_gc import _publish

AT = "2025-01-01T00:00:00Z"


@pytest.fixture
def store(tmp_path: Path):
    """org/x compiled by 2.19, 2.20, 2.21 and org/y by 2.19: with --keep-compilers 1 and no channel,
    gc deletes x19, x20 and y19."""
    store = open_store(f"file://{tmp_path / 'store'}")
    store.keys = {
        "x19": _publish(store, "org/x", "2.19.0.0"),
        "x20": _publish(store, "org/x", "2.20.0.0"),
        "x21": _publish(store, "org/x", "2.21.0.0"),
        "y19": _publish(store, "org/y", "2.19.0.0"),
    }
    farm_index.rebuild(store)  # what each publish's note would have said (the helper writes no notes)
    return store


def _ref(channel: str, model: str = "org/x") -> channels.ChannelRef:
    return channels.ChannelRef.parse(model, "cpu", channel)


def _approve(store, key: str) -> None:
    reviews.decide(store, key, "approved", "reviewer", "looks good", AT)


def _alive(store) -> set[str]:
    return {name for name, key in store.keys.items() if lookup(store, key)}


def test_a_channel_keeps_its_build_and_its_history(store, capsys) -> None:
    keys = store.keys
    channels.promote(store, _ref("candidate"), build=keys["x19"], by="a")
    channels.promote(store, _ref("candidate"), build=keys["x20"], by="b")  # x19 now in its history
    _approve(store, keys["x20"])
    channels.promote(store, _ref("stable"), build=keys["x20"], by="c")

    args = ["gc", store.root_uri, "--keep-compilers", "1"]
    assert main([*args, "--dry-run"]) == EXIT_OK
    out = capsys.readouterr().out.splitlines()
    assert f"kept by channels {keys['x19'][:12]}: org/x · cpu · candidate (history)" in out
    assert f"kept by channels {keys['x20'][:12]}: org/x · cpu · candidate, org/x · cpu · stable" in out
    assert out[-1] == "1 artifact(s) would delete, 3 kept"
    assert _alive(store) == set(keys)  # a dry run deletes nothing

    report = collect(store, 1)
    assert [d["key"] for d in report.deleted] == [keys["y19"]]
    assert {c["key"] for c in report.channel_kept} == {keys["x19"], keys["x20"]}
    assert _alive(store) == {"x19", "x20", "x21"}
    # 2.19 still serves the channel's history build (y19 of the same version was deleted); 2.20 the stable one.
    assert report.cache_dirs_deleted == []
    assert {o.key.split("/")[1] for o in store.list("neuron-cache")} >= {"neuronxcc-2.19.0.0", "neuronxcc-2.20.0.0"}
    # What the history keeps still rolls back: its manifest and files are all there.
    moved = channels.rollback(store, _ref("candidate"), by="d")
    assert moved.changed and moved.record.current.build.key == keys["x19"]


def test_a_build_current_and_in_the_history_is_named_once_per_channel(store) -> None:
    keys = store.keys
    channels.promote(store, _ref("candidate"), build=keys["x19"])
    channels.promote(store, _ref("candidate"), build=keys["x20"])
    channels.promote(store, _ref("candidate"), build=keys["x19"])  # x19 current and in the history
    channels.promote(store, _ref("candidate", "org/y"), build=keys["y19"])
    holds = channel_holds(store)
    assert holds.kept == {
        keys["x19"]: ["org/x · cpu · candidate"],
        keys["x20"]: ["org/x · cpu · candidate (history)"],
        keys["y19"]: ["org/y · cpu · candidate"],
    }
    assert holds.unreadable == {}


def test_a_deleted_build_takes_its_review_with_it(store) -> None:
    keys = store.keys
    for name in ("y19", "x21"):
        _approve(store, keys[name])
    report = collect(store, 1)
    assert {d["key"] for d in report.deleted} == {keys["x19"], keys["x20"], keys["y19"]}
    assert not store.exists(layout.review_entry(keys["y19"]))
    assert reviews.state_of(store, keys["x21"]) == "approved"  # a kept build keeps its review


@pytest.mark.parametrize(
    "record_key",
    [
        layout.channel_record(ModelSource.parse("org/x"), "cpu", "stable"),
        "channels/stray/channel.json",  # outside any model's folder: no model can be told apart
    ],
)
def test_a_channel_record_that_does_not_read_keeps_its_models_builds(store, record_key: str, capsys) -> None:
    keys = store.keys
    store.put_bytes(b'{"schema": 1, "model": "org/x", "cur', record_key)  # cut short mid-write, say
    every_model = not record_key.startswith("channels/org/x/")
    args = ["gc", store.root_uri, "--keep-compilers", "1"]
    assert main([*args, "--dry-run"]) == EXIT_FAILURE
    out = capsys.readouterr().out.splitlines()
    folder = "channels" if every_model else "channels/org/x"
    blocked = 3 if every_model else 2
    (line,) = [o for o in out if o.startswith("LEFT ALONE")]
    assert line.startswith(f"LEFT ALONE {blocked} build(s) of {folder}: a channel record does not read (")
    assert store.uri(record_key) in line and line.endswith("restore or remove it, then run gc again")
    assert out[-1].endswith(f"; {blocked} NOT COLLECTED: a channel record of their model does not read")

    assert main([*args, "--json"]) == EXIT_FAILURE
    report = json.loads(capsys.readouterr().out)
    assert {b["key"] for b in report["blocked"]} == (
        {keys["x19"], keys["x20"], keys["y19"]} if every_model else {keys["x19"], keys["x20"]}
    )
    assert [u["channels"] for u in report["unreadable_channels"]] == [folder]
    alive = _alive(store)
    assert alive == set(keys) if every_model else alive == {"x19", "x20", "x21"}  # org/y is not held back
    # the blocked builds' compile caches stay with them
    assert {"neuronxcc-2.19.0.0", "neuronxcc-2.20.0.0"} <= {o.key.split("/")[1] for o in store.list("neuron-cache")}


def test_a_channel_moved_onto_a_build_while_gc_deleted_it_is_reported(store, monkeypatch, capsys) -> None:
    """gc reads the channels before deciding; a promote that passed its checks before the deletion and
    wrote after it leaves the channel pointing to a deleted build. gc reads the channels again after
    deleting and says so (exit 1) instead of reporting done."""
    keys = store.keys
    move = channels.candidate(store, keys["x20"], _ref("candidate"))  # the promote's checks, passed
    real = gc.channel_holds
    calls = []

    def racing(s):
        holds = real(s)
        if not calls:  # the promote writes just after gc read the channels
            record = ChannelRecord(
                model="org/x",
                profile_line="cpu",
                channel="candidate",
                current=ChannelMove(action="promote", build=move, by="racer", at=AT),
            )
            record.write(s, _ref("candidate").record_key)
        calls.append(1)
        return holds

    monkeypatch.setattr(gc, "channel_holds", racing)
    assert main(["gc", store.root_uri, "--keep-compilers", "1"]) == EXIT_FAILURE
    out = capsys.readouterr().out.splitlines()
    assert f"ERROR {keys['x20'][:12]} was deleted while org/x · cpu · candidate moved onto it: " \
           "promote or roll back that channel again" in out  # fmt: skip
    assert len(calls) == 2


def test_a_folder_where_a_channel_record_belongs_keeps_its_models_builds(store) -> None:
    """A file store holding `…/candidate/channel.json/` as a folder (a copy gone wrong): the channel's
    record does not read — it is not a channel that is gone, so its model's builds are kept."""
    record_key = layout.channel_record(ModelSource.parse("org/x"), "cpu", "candidate")
    channels.promote(store, _ref("candidate"), build=store.keys["x19"])
    store.delete_prefix(record_key)
    store.put_bytes(b"{}", f"{record_key}/inside")
    holds = channel_holds(store)
    assert holds.unreadable == {"channels/org/x": f"{store.uri(record_key)} is a folder, not a file"}
    report = collect(store, 1)
    assert [d["key"] for d in report.deleted] == [store.keys["y19"]]
    assert _alive(store) == {"x19", "x20", "x21"}
