"""The synopsis of docs/cli.md: every command's usage line, rendered from the `neuronforge` parser
itself (`cli.parser.build_parser`), so the page cannot show an argument the tool does not take or miss
one it does (the moves' hand-typed synopsis kept `--to` after the parser had `--channel`). Regenerate it
with:

    python -m neuronforge.interfaces.cli_synopsis

A renamed argument's old spelling is hidden from the usage, its new spelling shown required when the
argument is, as `--help` shows them (`cli.spellings`).
"""

from __future__ import annotations

import argparse
import sys

from neuronforge.common.docs_section import DOCS, GeneratedSection, write_all

WIDTH = 100  # the page's code block, whatever the terminal that regenerates it


def _commands(parser: argparse.ArgumentParser) -> list[argparse.ArgumentParser]:
    """The parsers of `parser`'s commands, in `--help`'s order; a command with subcommands by its
    subcommands' parsers."""
    found = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    if not found:
        return [parser]
    return [leaf for sub in found[0].choices.values() for leaf in _commands(sub)]


def usage(parser: argparse.ArgumentParser) -> str:
    """`parser`'s usage as `--help` prints it at WIDTH columns, without `-h` and the `usage: ` prefix."""
    from neuronforge.interfaces.cli.spellings import shown_required

    actions = [a for a in parser._actions if not isinstance(a, argparse._HelpAction)]
    formatter = argparse.HelpFormatter(parser.prog, width=WIDTH)
    with shown_required(parser):
        formatter.add_usage(None, actions, parser._mutually_exclusive_groups, prefix="")
        return formatter.format_help().strip("\n")


def body() -> list[str]:
    from neuronforge.interfaces.cli.parser import build_parser

    return ["```text", *(usage(p) for p in _commands(build_parser())), "```"]


SECTION = GeneratedSection(
    DOCS / "cli.md",
    "synopsis",
    "neuronforge.interfaces.cli_synopsis",
    "the CLI's parser",
    body,
)
SECTIONS = (SECTION,)

if __name__ == "__main__":
    sys.exit(write_all(SECTIONS))
