"""Old spellings of arguments, kept working for one release beside the new one: the one way a command
renames an argument.

The moves once spoke two dialects (`promote --to CHANNEL`, `rollback CHANNEL --to KEY`); they now say
`--channel CHANNEL` for a channel and `--build KEY` for a build everywhere, as `compare` did. A script
written for the old spelling keeps working for one release, told once per run, on one stderr line, what
to write instead. Giving both spellings, or neither where the argument is required, is one `error:` line
and exit 2 (`InvalidInput`), never argparse's usage dump.

    add_renamed(p, "--channel", old="--to", dest="channel", metavar="CHANNEL", required=True, help=...)
    add_renamed(p, "--channel", old="CHANNEL", ...)   # the old spelling was a positional argument

`main` calls `resolve_renamed(args)` after parsing, before any work: the new spelling's `dest` then holds
the value whichever spelling gave it.
"""

from __future__ import annotations

import argparse
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from neuronforge.common.errors import InvalidInput
from neuronforge.common.secrets import print_line

MARK = "__renamed"  # the parser's default `<dest>__renamed` holds the argument's `Renamed`


@dataclass(frozen=True)
class Renamed:
    """An argument's new spelling (`new`, an option) and the old one kept for a release (`old`: an option
    flag, or a positional argument's metavar), the old one's value parsed into `hidden`."""

    dest: str
    hidden: str
    new: str
    old: str
    metavar: str
    required: bool

    @property
    def new_shown(self) -> str:
        return f"`{self.new} {self.metavar}`"

    @property
    def old_shown(self) -> str:
        return f"`{self.old} {self.metavar}`" if self.old.startswith("-") else f"the positional {self.old}"

    def warning(self) -> str:
        return (
            f"warning: {self.old_shown} is deprecated: use {self.new_shown} (the old spelling goes in the next release)"
        )


def add_renamed(
    p: argparse.ArgumentParser,
    new: str,
    *,
    old: str,
    dest: str,
    metavar: str,
    help: str,
    required: bool = False,
    group: Any = None,
) -> argparse.Action:
    """Add option `new` (in `group`, a mutually exclusive group of `p`, when given) and, hidden from the
    help and the usage, its old spelling `old`: a flag (in the same group), or a positional argument
    when it does not start with `-` (optional: the new spelling may stand in its place). `required` is
    checked by `resolve_renamed` (argparse would refuse the old spelling alone)."""
    where = p if group is None else group
    action = where.add_argument(new, dest=dest, metavar=metavar, help=help)
    hidden = f"{dest}__old_{old.strip('-').lower().replace('-', '_')}"
    if old.startswith("-"):
        where.add_argument(old, dest=hidden, metavar=metavar, help=argparse.SUPPRESS)
    else:  # not an argparse positional: `MODEL --profile P CHANNEL` would not reach it (`take_positionals`)
        p.set_defaults(**{hidden: None})
    p.set_defaults(**{f"{dest}{MARK}": Renamed(dest, hidden, new, old, metavar, required)})
    return action


def take_positionals(namespace: argparse.Namespace, extras: list[str]) -> list[str]:
    """`extras` (what a command's parser did not recognise) less the value of each old positional
    spelling, taken into its hidden dest. argparse cannot hold an optional positional after a required
    one across options (`rollback MODEL --profile P CHANNEL`: it matches the optional one, empty, with
    MODEL), so the old positional is the first word left over that is not an option."""
    for r in [v for name, v in vars(namespace).items() if name.endswith(MARK)]:
        if r.old.startswith("-") or getattr(namespace, r.hidden, None) is not None:
            continue
        word = next((i for i, w in enumerate(extras) if not w.startswith("-")), None)
        if word is not None and (word == 0 or not extras[word - 1].startswith("-")):
            setattr(namespace, r.hidden, extras[word])
            extras = extras[:word] + extras[word + 1 :]
    return extras


def renamed_in(parser: argparse.ArgumentParser) -> list[Renamed]:
    """The renamed arguments of one command's parser."""
    return [value for name, value in parser._defaults.items() if name.endswith(MARK)]


@contextmanager
def shown_required(parser: argparse.ArgumentParser) -> Iterator[None]:
    """While `parser` formats its usage or help: each required renamed argument's new spelling marked
    required, so `--help` and the docs' synopsis show `--channel CHANNEL`, not `[--channel CHANNEL]`
    (argparse may not check it: the old spelling alone must still parse; `resolve_renamed` does)."""
    required = {r.dest for r in renamed_in(parser) if r.required}
    marked = [a for a in parser._actions if a.dest in required and not a.required]
    for action in marked:
        action.required = True
    try:
        yield
    finally:
        for action in marked:
            action.required = False


def resolve_renamed(args: argparse.Namespace) -> None:
    """Move each old spelling's value to its new `dest`, warning once on stderr; both spellings given, or
    neither for a required one, is `InvalidInput` (exit 2, one line: the warnings wait until every
    renamed argument resolved, so a refusal is never preceded by them)."""
    warnings = []
    for name, r in sorted(vars(args).items()):
        if not name.endswith(MARK):
            continue
        old, new = getattr(args, r.hidden, None), getattr(args, r.dest, None)
        if old is not None and new is not None:
            raise InvalidInput(
                f"{r.new_shown} and its old spelling, {r.old_shown}, both given: give {r.new_shown} only"
            )
        if old is not None:
            warnings.append(r.warning())
            setattr(args, r.dest, old)
        elif new is None and r.required:
            raise InvalidInput(f"{args.command}: give {r.new_shown}")
        delattr(args, r.hidden)
        delattr(args, name)
    for warning in warnings:
        print_line(warning)
