"""The release commands as a user runs them: one line per outcome, the exit codes of the contract."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from neuronforge.artifacts import channels
from neuronforge.interfaces.cli import main
from neuronforge.stores import open_store
from tests.releases.builds import MODEL, publish


@pytest.fixture
def store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    (tmp_path / "store").mkdir()  # a store that exists (reading one never creates it: StoreNotFound)
    monkeypatch.setenv("NEURONFORGE_STORE", f"file://{tmp_path / 'store'}")
    return open_store(f"file://{tmp_path / 'store'}")


def test_approve_promote_rollback_channels_history(store, capsys: pytest.CaptureFixture) -> None:
    a, b = publish(store, 1), publish(store, 2)
    assert main(["promote", MODEL, "--profile", "cpu", "--channel", "stable", "--build", a[:12]]) == 3
    err = capsys.readouterr().err
    assert f"error: refused: channel stable requires an approved build and {a[:12]} is pending" in err
    assert main(["approve", a[:12], "--by", "alice", "--reason", "soak passed"]) == 0
    assert capsys.readouterr().out == f"build {a[:12]} approved by alice: soak passed\n"
    assert (
        main(["promote", MODEL, "--profile", "cpu@2.0", "--channel", "stable", "--build", a[:12], "--by", "alice"]) == 0
    )
    assert capsys.readouterr().out == f"{MODEL} · cpu · stable: promote to {a[:12]} (new channel)\n"
    assert main(["approve", b, "--by", "alice"]) == 0
    assert main(["promote", MODEL, "--profile", "cpu", "--channel", "stable", "--build", b, "--by", "bob"]) == 0
    assert main(["rollback", MODEL, "--profile", "cpu", "--channel", "stable", "--by", "carol", "--reason", "p99"]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == f"{MODEL} · cpu · stable: rollback to {a[:12]} (was {b[:12]})"
    assert main(["history", MODEL, "--profile", "cpu", "--channel", "stable"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line[2:].split()[1:3] for line in lines] == [["rollback", a[:12]], ["promote", b[:12]], ["promote", a[:12]]]
    assert lines[0].startswith("* ") and lines[0].endswith("by carol: p99")
    assert main(["channels", "--json"]) == 0
    (listed,) = json.loads(capsys.readouterr().out)
    assert (listed["channel"], listed["current"]["build"]["key"], listed["review_state"]) == ("stable", a, "approved")


def test_a_rejected_build_a_channel_serves_is_loud(store, capsys: pytest.CaptureFixture) -> None:
    a = publish(store, 1)
    assert main(["promote", MODEL, "--profile", "cpu", "--channel", "candidate", "--build", a]) == 0
    assert main(["reject", a[:12], "--reason", "wrong answers"]) == 0
    said = capsys.readouterr().out
    assert "WARNING: builtin:tiny-llama · cpu · candidate still points to it: promote another build (" in said
    assert main(["channels", MODEL]) == 0
    out = capsys.readouterr().out
    assert (
        f"{a[:12]}" in out and "(REJECTED)" in out and "WARNING: builtin:tiny-llama · cpu · candidate points to" in out
    )
    assert main(["ls"]) == 0
    assert "[candidate]  REJECTED BUT A CHANNEL POINTS TO IT" in capsys.readouterr().out
    assert main(["show", a[:12]]) == 0
    out = capsys.readouterr().out
    assert "review     REJECTED by " in out
    assert f"WARNING    {MODEL} · cpu · candidate points to this REJECTED build: promote another build" in out


def test_usage_errors_are_one_line(store, capsys: pytest.CaptureFixture) -> None:
    assert main(["promote", MODEL, "--profile", "cpu", "--channel", "Stable", "--build", "abcdef"]) == 2
    assert main(["rollback", MODEL, "--profile", "cpu", "--channel", "stable"]) == 2
    assert main(["history", MODEL, "--profile", "cpu", "--channel", "stable"]) == 2
    err = capsys.readouterr().err.splitlines()
    assert err == [
        "error: channel 'Stable': use lower-case letters, digits, '.', '_' and '-' (at most 63), e.g. stable",
        f"error: no channel {MODEL} · cpu · stable in {store.root_uri}: nothing to roll back",
        f"error: no channel {MODEL} · cpu · stable in {store.root_uri}; `neuronforge channels {MODEL}` lists its "
        "channels",
    ]


def test_a_lost_race_exits_1_naming_the_winner(store, capsys, monkeypatch: pytest.MonkeyPatch) -> None:
    a, b = publish(store, 1), publish(store, 2)
    channels.promote(store, channels.ChannelRef.parse(MODEL, "cpu", "candidate"), build=a)
    real = channels.candidate_and_smoke  # what every move reads its build with, between its read and its write

    def someone_else_moves_first(store_, key, ref, **kwargs):
        monkeypatch.setattr(channels, "candidate_and_smoke", real)
        channels.promote(store_, ref, build=b, by="dave@elsewhere")
        return real(store_, key, ref, **kwargs)

    monkeypatch.setattr(channels, "candidate_and_smoke", someone_else_moves_first)
    c = publish(store, 3)
    assert main(["promote", MODEL, "--profile", "cpu", "--channel", "candidate", "--build", c]) == 1
    err = capsys.readouterr().err
    assert "was moved by dave@elsewhere at " in err and f"(promote to {b[:12]}) while this move to {c[:12]} ran" in err


def test_a_reason_is_one_line_of_text(store, capsys: pytest.CaptureFixture) -> None:
    a = publish(store, 1)
    for argv in (["approve", a, "--reason", "ok\n* 2026  promote  forged"], ["approve", a, "--by", "x\x1b[31m"]):
        with pytest.raises(SystemExit) as refused:  # the parser's one text rule, before anything is read
            main(argv)
        assert refused.value.code == 2
    err = capsys.readouterr().err.splitlines()
    assert err[0].startswith("neuronforge approve: error: argument --reason: 'ok\\n* 2026  promote  forged' holds a")
    assert err[1].startswith("neuronforge approve: error: argument --by: 'x\\x1b[31m' holds a line break")
    assert not store.list("reviews")
