"""What the hostile-input tests share: every command and every argument, read from the parser itself
(a new command or option is covered without editing a test), the hostile values of each class, a valid
value for each argument a command requires, and what an answer to a hostile value may look like."""

from __future__ import annotations

import argparse
import functools
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from neuronforge.interfaces.cli.parser import build_parser

# One value of each hostile class (issue 54). Each is given alone, as the value of one argument.
HOSTILE: dict[str, str] = {
    "empty": "",
    "blank": " ",
    "negative": "-1",
    "zero": "0",
    "huge": "9" * 40,
    "non-numeric": "abc",
    "nan": "nan",
    "other-digits": "2.\u00b3\u00b3",  # 2.³³: `isdigit` takes it, `int` does not
    "nul": "a\x00b",
    "newline": "a\nb",
    "escape": "a\x1b[31mb",
    "c1": "a\x9bb",
    "separator": "a\u2028b",
    "dotdot": "../",
    "long": "x" * 5000,
    "long-word": "y" * 300,
}

# A harmless valid value for each argument some command requires, by its dest: what the other required
# arguments get while one is given a hostile value. A command's own entry (`run:model`) comes first and is
# always given: `run` without `--model` builds the embedded model. The models of the commands that would
# build do not exist, so that a command that takes every value stops at its source, before any work.
VALID: dict[str, str] = {
    "model": "builtin:tiny-llama",
    "run:model": "/nonexistent/model",
    "sweep:model": "/nonexistent/model",
    "instance": "inf2.xlarge",
    "tp": "1",
    "seq_len": "64",
    "source": "/nonexistent/model",
    "dtype": "int8",
    "out": "sweep-out",
    "keep_compilers": "1",
    "ref": "0" * 16,
    "refs": "0" * 16,
    "profile": "cpu",
    "channel": "stable",
    "release": "2.21.1",
    "key": "0" * 16,
    "reason": "a reason",
    "sdk": "2.21.1",
    "role": "compile",
    "version": "2.99.0",
    "store_pos": "../../home/store",  # the sandbox's store, from its working directory
    "cursor": "0",  # `verify --cursor` is a repair, which writes: its baseline is one too
    # a manifest in AWS's format: `releases sync` without one reads it from GitHub
    "releases:manifest": str(Path(__file__).parent / "data" / "release-manifests" / "adds-2.33.9.json"),
}


@dataclass(frozen=True)
class Argument:
    """One argument of one command: its command words, its action, and the argv before its value."""

    command: tuple[str, ...]
    action: argparse.Action

    @property
    def name(self) -> str:
        return self.action.option_strings[-1] if self.action.option_strings else self.action.dest

    @property
    def names(self) -> list[str]:
        """What an error about it calls it: its flags, or a positional's metavar or dest."""
        return [
            *self.action.option_strings,
            *(n for n in (self.action.metavar, self.action.dest) if isinstance(n, str)),
        ]

    @property
    def takes_value(self) -> bool:
        return self.action.nargs != 0 and not isinstance(self.action, argparse._HelpAction | argparse._VersionAction)

    def __str__(self) -> str:
        return f"{' '.join(self.command)} {self.name}"


@functools.cache
def parser() -> argparse.ArgumentParser:
    """The CLI's parser, built once: an argument is known by its action, the same object every time."""
    return build_parser()


Leaf = tuple[tuple[str, ...], argparse.ArgumentParser]


def commands() -> Iterator[Leaf]:
    """Every leaf command (`ls`, `cache prune`, ...) and its parser, walked from the parser itself."""

    def walk(parser: argparse.ArgumentParser, words: tuple[str, ...]) -> Iterator[Leaf]:
        subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
        if not subs:
            yield words, parser
            return
        for name, sub in subs[0].choices.items():
            yield from walk(sub, (*words, name))

    yield from walk(parser(), ())


def arguments() -> list[Argument]:
    """Every argument that takes a value, of every command (the top-level flags take none)."""
    return [
        Argument(words, action)
        for words, parser in commands()
        for action in parser._actions
        if Argument(words, action).takes_value
    ]


def valid(command: tuple[str, ...], action: argparse.Action) -> str:
    """A valid value for a required argument; a KeyError (the test fails) for one the table lacks."""
    own = f"{command[0]}:{action.dest}"
    return VALID[own] if own in VALID else VALID[action.dest]


def argv(arg: Argument, value: str | None) -> list[str]:
    """The command with `value` for `arg` and a valid value for every other argument it requires (the
    baseline, `value` None: `arg` given its valid value when it has one, else left out)."""
    if value is None and has_valid(arg):
        value = valid(arg.command, arg.action)
    parser = dict(commands())[arg.command]
    words = list(arg.command)
    positionals: list[str] = []
    tested = [a for a in parser._actions if not a.option_strings]
    before = tested[: tested.index(arg.action)] if arg.action in tested else []
    for action in parser._actions:
        if action is arg.action and value is not None:
            if action.option_strings:
                words.append(f"{action.option_strings[-1]}={value}")
            else:
                positionals.append(value)
        elif action.required or action in before or f"{arg.command[0]}:{action.dest}" in VALID:
            given = valid(arg.command, action)
            if action.option_strings:
                words.append(f"{action.option_strings[-1]}={given}")
            else:
                positionals.append(given)
    return [*words, "--", *positionals] if positionals else words


def has_valid(arg: Argument) -> bool:
    try:
        valid(arg.command, arg.action)
    except KeyError:
        return False
    return True


def tree(root: Path) -> dict[str, tuple[int, int]]:
    """Every file and folder under `root`: its size and modification time (a write changes one)."""
    found: dict[str, tuple[int, int]] = {}
    for folder, dirs, files in os.walk(root):
        for name in [*dirs, *files]:
            path = Path(folder, name)
            st = path.lstat()
            found[str(path.relative_to(root))] = (st.st_size, st.st_mtime_ns)
    return found


def changed(before: dict[str, tuple[int, int]], after: dict[str, tuple[int, int]]) -> list[str]:
    """What a command wrote: each path new, gone or changed (size, modification time)."""
    return sorted(path for path in before.keys() | after.keys() if before.get(path) != after.get(path))


def undo(root: Path, before: dict[str, tuple[int, int]]) -> None:
    """Remove what a failing case created, so that the next case starts from the same tree."""
    import shutil

    for rel in sorted(set(tree(root)) - set(before), reverse=True):
        path = root / rel
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path, ignore_errors=True)
        elif path.exists() or path.is_symlink():
            path.unlink()


def error_lines(err: str) -> list[str]:
    """stderr without argparse's usage (`usage: …` and its indented continuation): what the command said."""
    return [line for line in err.splitlines() if not line.startswith(("usage: ", " "))]


DOCUMENTED = {0, 2, 3, 4}  # success, usage error, rejected, stale: what a value a command takes may end in


@dataclass(frozen=True)
class Baseline:
    """What the command does with valid values only, in the same place: its exit code (`catalog stale`
    ends in 1 where no toolchain can check a target) and whether it writes (`releases sync`, `verify
    --repair` record what they did). A value it takes may do the same; one it refuses writes nothing."""

    code: object = 0
    writes: bool = False


def problem(code: object, said: list[str], err: str, written: list[str], baseline: Baseline = Baseline()) -> str:
    """What is wrong with an answer: an exit code outside DOCUMENTED (1 is a store or environment failure,
    not a bad argument) unless the valid baseline ends in it, a traceback, other than one line for an
    error, or anything written where the baseline writes nothing or the value was refused."""
    if "Traceback" in err:
        return "a traceback"
    if code not in DOCUMENTED and code != baseline.code:
        return f"exit {code}"
    if len(said) > 1 or (code == 2 and not said):  # a summary on stdout may end in 1 (`catalog stale`)
        return f"{len(said)} lines on stderr"
    if written and not (baseline.writes and code == baseline.code):
        return f"wrote {written[:3]}"
    return ""
