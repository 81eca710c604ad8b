"""Every argument of every command, given each hostile value (`tests/hostile.py`: empty, negative, zero,
huge, non-numeric, NUL, newline, control characters, `../`, very long), ends in the documented exit code
with one error line, no traceback and nothing written (issue 54). Commands and arguments are read from
the parser itself: a new command or option is covered without editing this file.

In-process (`main(argv)`): thousands of child processes would take too long; the parser is built once
(what `main` builds is the same for one environment). Text that is not UTF-8 only arrives through a
real argv under `LANG=C`: a child per command, one argument each. Nothing builds: the models a command
would build from do not exist, `airflow` ends where it would start its services (the values were taken),
and a compile, should a command get that far, fails the test naming it."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest

from neuronforge.interfaces import cli
from neuronforge.interfaces.cli import main, options
from tests import hostile

# Values that no argument takes: each is refused as that argument, exit 2 (never reaching a handler).
NEVER_VALID = {"nul", "newline", "escape", "c1", "separator", "long"}
# A store's place takes what a file system allows (`options.location`): only these are refused as it; a
# newline or ESC in it must still end in one line, the documented exit code, nothing written.
NEVER_A_PLACE = {"nul", "long"}
ARGUMENTS = hostile.arguments()


class WorkStarted(Exception):
    """A command went past its checks into work this test must not start."""


@pytest.fixture(scope="module")
def place(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A home with an empty store and the embedded model generated (what a user who ran a command has),
    and a working directory two levels down, so that `../` stays inside what is watched."""
    root = tmp_path_factory.mktemp("hostile")
    (root / "home" / "store").mkdir(parents=True)
    (root / "cwd" / "here").mkdir(parents=True)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("NEURONFORGE_HOME", str(root / "home"))
        from neuronforge.pipeline.stages.resolve import local_folder
        from neuronforge.spec.source import ModelSource

        local_folder(ModelSource.parse("builtin:tiny-llama"))
    return root


@pytest.fixture
def sandbox(place: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for var in [v for v in os.environ if v.startswith("NEURONFORGE_")]:
        monkeypatch.delenv(var)
    monkeypatch.setenv("NEURONFORGE_HOME", str(place / "home"))
    monkeypatch.chdir(place / "cwd" / "here")
    monkeypatch.setattr(cli, "build_parser", hostile.parser)
    # `main` configures logging once per process (`basicConfig`): a handler an earlier test's `main` left
    # would write to that test's closed capture. Each test's first `main` installs its own.
    monkeypatch.setattr(logging.root, "handlers", [])

    def stop(what: str):
        def started(*_: object, **__: object) -> int:
            raise WorkStarted(what)

        return started

    import neuronforge.interfaces.local_airflow as local_airflow
    import neuronforge.pipeline.stages.compile as compile_stage

    monkeypatch.setattr(local_airflow, "serve", lambda **_: 0)  # taken: airflow would start with it
    monkeypatch.setattr(compile_stage, "compile_target", stop("a compile"))  # a safety net: none is meant to
    return place


def test_every_required_argument_has_a_valid_value() -> None:
    """The table of valid values covers every argument some command requires (else the test could not
    give a command its other arguments): a new required argument fails here until it has one."""
    missing = [
        str(hostile.Argument(words, a))
        for words, parser in hostile.commands()
        for a in parser._actions
        if a.required and hostile.Argument(words, a).takes_value and not hostile.has_valid(hostile.Argument(words, a))
    ]
    assert not missing, f"add a valid value to tests/hostile.py VALID for: {missing}"


def test_the_parser_is_walked_whole() -> None:
    """Every command of `--help` is reached, and the walk finds the arguments a command is known to take."""
    from neuronforge.interfaces.cli.parser import HELP_ORDER

    reached = {words[0] for words, _ in hostile.commands()}
    assert reached == set(HELP_ORDER)
    names = {str(a) for a in ARGUMENTS}
    assert {"ls --limit", "store ls prefix", "sweep --seq-lens", "approve --reason", "fetch source"} <= names


def _call(argv: list[str], place: Path, capsys) -> tuple[object, str, list[str]]:
    """`main(argv)` in-process: its exit code (argparse's too; a traceback's exception by name), its stderr,
    and what it wrote under `place` (each path new, gone or changed)."""
    before = hostile.tree(place)
    try:
        code: object = main(argv)
    except SystemExit as exc:  # argparse's usage error
        code = exc.code
    except WorkStarted as exc:
        code = f"work started: {exc}"
    except Exception as exc:  # what `main` leaves unexplained: a traceback for a user
        code = f"a traceback: {type(exc).__name__}: {str(exc)[:200]}"
    err = capsys.readouterr().err
    written = hostile.changed(before, hostile.tree(place))
    hostile.undo(place, before)
    return code, err, written


@pytest.mark.parametrize("arg", ARGUMENTS, ids=str)
def test_a_hostile_value_is_one_line_and_its_documented_exit_code(arg: hostile.Argument, sandbox: Path, capsys) -> None:
    code, err, written = _call(hostile.argv(arg, None), sandbox, capsys)
    baseline = hostile.Baseline(code, bool(written))
    failures = []
    for kind, value in hostile.HOSTILE.items():
        code, err, written = _call(hostile.argv(arg, value), sandbox, capsys)
        said = hostile.error_lines(err)
        problem = hostile.problem(code, said, err, written, baseline)
        never = NEVER_A_PLACE if arg.action.type is options.location else NEVER_VALID
        if not problem and kind in never and not (code == 2 and any(name in said[0] for name in arg.names)):
            problem = "not refused as this argument"
        if problem:
            failures.append(f"[{kind}] {problem}: exit {code}: {err[-300:]!r}")
    assert not failures, f"{arg} (valid: exit {baseline.code}):\n" + "\n".join(failures)


# One argument of each command gets a name that is not UTF-8, in a child under LANG=C (the only way such a
# value arrives): the first argument that takes text, else the command's first argument.
def _first_text_argument(words: tuple[str, ...]) -> hostile.Argument:
    mine = [a for a in ARGUMENTS if a.command == words]
    texts = [a for a in mine if getattr(a.action.type, "__name__", "") == "text"]
    return (texts or mine)[0]


LEAVES = [words for words, _ in hostile.commands() if any(a.command == words for a in ARGUMENTS)]


@pytest.mark.parametrize("words", LEAVES, ids=" ".join)
def test_a_name_that_is_not_utf8_under_lang_c(words: tuple[str, ...], place: Path) -> None:
    arg = _first_text_argument(words)
    argv = [os.fsencode(a) for a in hostile.argv(arg, "caf\udce9")]  # b"caf\xe9": Latin-1, not UTF-8
    env = {k: v for k, v in os.environ.items() if not k.startswith(("NEURONFORGE_", "LC_", "PYTHONUTF8"))}
    env.update(LANG="C", LC_ALL="C", PYTHONUTF8="0", NEURONFORGE_HOME=str(place / "home"))
    if words == ("airflow",):
        pytest.skip("airflow would start its services on a value it takes")
    before = hostile.tree(place)
    done = subprocess.run(
        [sys.executable, "-m", "neuronforge.interfaces.cli", *argv],
        cwd=place / "cwd" / "here",
        env=env,
        capture_output=True,
        timeout=120,
    )
    err = done.stderr.decode("utf-8", "backslashreplace")
    written = hostile.changed(before, hostile.tree(place))
    problem = hostile.problem(done.returncode, hostile.error_lines(err), err, written)
    hostile.undo(place, before)
    assert not problem, f"{arg}: {problem}: exit {done.returncode}: {err[-500:]}"
