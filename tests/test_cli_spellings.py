"""One vocabulary for moves (issue 54): `--channel CHANNEL` and `--build KEY` in every release command.
Each old spelling still works for one release and says so in one stderr line; both spellings, or
neither, is one error line and exit 2 (`neuronforge.interfaces.cli.spellings`)."""

from __future__ import annotations

from pathlib import Path

import pytest

from neuronforge.artifacts import channels, reviews
from neuronforge.interfaces.cli import main
from neuronforge.interfaces.cli.exit_codes import EXIT_OK, EXIT_USAGE
from neuronforge.stores import open_store
from tests.releases.builds import MODEL, publish

WARNING = "warning: {old} is deprecated: use {new} (the old spelling goes in the next release)"
TO_CHANNEL = WARNING.format(old="`--to CHANNEL`", new="`--channel CHANNEL`")
POSITIONAL = WARNING.format(old="the positional CHANNEL", new="`--channel CHANNEL`")
TO_KEY = WARNING.format(old="`--to KEY`", new="`--build KEY`")


@pytest.fixture
def store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("NEURONFORGE_STORE", f"file://{tmp_path / 'store'}")
    return open_store(f"file://{tmp_path / 'store'}")


@pytest.fixture
def builds(store) -> tuple[str, str]:
    """Two builds the candidate channel held, the second the current one."""
    a, b = publish(store, 1), publish(store, 2)
    for key in (a, b):
        channels.promote(store, channels.ChannelRef.parse(MODEL, "cpu", "candidate"), build=key)
    return a, b


def run(capsys: pytest.CaptureFixture, *argv: str) -> tuple[int, str, list[str]]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err.splitlines()


def current(store, channel: str = "candidate") -> str:
    return channels.get(store, channels.ChannelRef.parse(MODEL, "cpu", channel)).current.build.key


WHERE = (MODEL, "--profile", "cpu")


def test_promote_to_channel_still_moves_and_warns_once(store, builds, capsys) -> None:
    a, _ = builds
    code, out, err = run(capsys, "promote", *WHERE, "--to", "beta", "--build", a[:12])
    assert (code, err) == (EXIT_OK, [TO_CHANNEL]) and out.startswith(f"{MODEL} · cpu · beta: promote to {a[:12]}")
    assert current(store, "beta") == a


def test_rollback_positional_channel_and_to_key_still_move_and_warn_once_each(store, builds, capsys) -> None:
    a, b = builds
    code, _, err = run(capsys, "rollback", *WHERE, "candidate")
    assert (code, err) == (EXIT_OK, [POSITIONAL]) and current(store) == a
    code, _, err = run(capsys, "rollback", *WHERE, "candidate", "--to", b[:12])
    assert (code, sorted(err)) == (EXIT_OK, sorted([POSITIONAL, TO_KEY])) and current(store) == b


@pytest.mark.parametrize("command", ["history", "require-release"])
def test_a_positional_channel_still_reads_the_channel_and_warns_once(store, builds, capsys, command: str) -> None:
    extra = ("--release", "none") if command == "require-release" else ()
    old = run(capsys, command, *WHERE, "candidate", *extra)
    new = run(capsys, command, *WHERE, "--channel", "candidate", *extra)
    assert old[0] == new[0] == EXIT_OK and old[1] == new[1] and old[2] == [POSITIONAL] and new[2] == []


def test_the_new_spellings_move_without_a_warning(store, builds, capsys) -> None:
    a, _ = builds
    assert run(capsys, "rollback", *WHERE, "--channel", "candidate", "--build", a[:12])[::2] == (EXIT_OK, [])
    assert current(store) == a
    reviews.decide(store, a, "approved", "qa", "", channels.now())  # stable takes approved builds only
    assert run(capsys, "promote", *WHERE, "--channel", "stable", "--from", "candidate")[::2] == (EXIT_OK, [])
    assert current(store, "stable") == a


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (
            ["promote", *WHERE, "--channel", "beta", "--to", "beta", "--build", "abcdef"],
            "error: `--channel CHANNEL` and its old spelling, `--to CHANNEL`, both given: give `--channel CHANNEL` "
            "only",
        ),
        (
            ["rollback", *WHERE, "candidate", "--channel", "candidate"],
            "error: `--channel CHANNEL` and its old spelling, the positional CHANNEL, both given: give "
            "`--channel CHANNEL` only",
        ),
        (["promote", *WHERE, "--build", "abcdef"], "error: promote: give `--channel CHANNEL`"),
        (["rollback", *WHERE], "error: rollback: give `--channel CHANNEL`"),
        (["history", *WHERE], "error: history: give `--channel CHANNEL`"),
        (["require-release", *WHERE, "--release", "none"], "error: require-release: give `--channel CHANNEL`"),
    ],
)
def test_both_spellings_or_neither_is_one_line_and_exit_2(store, builds, capsys, argv: list[str], said: str) -> None:
    before = current(store)
    assert run(capsys, *argv) == (EXIT_USAGE, "", [said])
    assert current(store) == before


def test_the_synopsis_shows_every_command_with_the_new_spellings_only() -> None:
    """docs/cli.md's synopsis is the parser's usage: every command is there, the moves' channel shown
    required as `--channel CHANNEL` (argparse alone would bracket it), no old spelling anywhere."""
    from neuronforge.interfaces import cli_synopsis
    from neuronforge.interfaces.cli.parser import HELP_ORDER

    lines = cli_synopsis.body()
    starts = {" ".join(line.split()[:2]) for line in lines if line.startswith("neuronforge ")}
    assert {f"neuronforge {name}" for name in HELP_ORDER} <= starts
    text = "\n".join(lines)
    for command in ("promote", "rollback", "history", "require-release"):
        usage = text[text.index(f"neuronforge {command} ") :].split("\nneuronforge ", 1)[0]
        assert " --channel CHANNEL " in usage and "[--channel" not in usage and "--to" not in usage, usage
    assert "--build KEY" in text[text.index("neuronforge rollback ") :].split("\nneuronforge ", 1)[0]


def test_help_shows_the_new_spelling_required_and_hides_the_old(capsys) -> None:
    with pytest.raises(SystemExit):
        main(["rollback", "--help"])
    usage = capsys.readouterr().out.split("\n\n", 1)[0]
    assert " --channel CHANNEL" in usage and "[--channel" not in usage and "--to" not in usage
    assert "[--steps STEPS | --build KEY]" in usage
