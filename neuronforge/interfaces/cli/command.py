"""One `neuronforge` command as its group module declares it: its name, help line, options and handler in
one place, or the subcommands of a command with subcommands (`cache ls`, `catalog check`, ...). The top-level
parser (`parser.py`) adds each; nothing else names a command."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

Handler = Callable[[argparse.Namespace], int]


@dataclass(frozen=True)
class Command:
    name: str
    help: str
    # adds the command's arguments to its parser, in the order `--help` lists them
    options: Callable[[argparse.ArgumentParser], None] | None = None
    # what `main` calls with the parsed arguments: the command's exit code
    handler: Handler | None = None
    # a command with subcommands (`cache`) has these instead of options and a handler
    subcommands: tuple[Command, ...] = ()

    def __post_init__(self) -> None:
        if bool(self.subcommands) == (self.handler is not None):
            raise TypeError(f"command {self.name}: give a handler or subcommands, one of them")

    def add_to(self, commands: Any) -> None:
        """This command's parser (and its subcommands') under `commands`, a parser's subparsers action; the
        parsed arguments carry the handler as `func` and, below a command with subcommands, the chosen one's
        name as `<command>_command`."""
        parser = commands.add_parser(self.name, help=self.help)
        if self.subcommands:
            nested = parser.add_subparsers(
                dest=f"{self.name}_command", required=True, metavar="COMMAND", help="one of:"
            )
            for command in self.subcommands:
                command.add_to(nested)
            return
        if self.options is not None:
            self.options(parser)
        parser.set_defaults(func=self.handler)
