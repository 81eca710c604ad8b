"""The `neuronforge` parser: the options every command takes (-v, -q, --version), the defaults and the
exit-code table in the epilog of `--help`, and the commands of every group module, in the order `--help`
lists them. Options that several commands share are `options.py`'s."""

from __future__ import annotations

import argparse
from typing import IO, Any, NoReturn

from neuronforge.common import advice, settings
from neuronforge.common.secrets import mask_credentials
from neuronforge.interfaces.cli import (
    build,
    cache,
    catalog,
    environment,
    leases,
    recompile,
    releases,
    sdk_feed,
    store,
    sweep,
)
from neuronforge.interfaces.cli.command import Command
from neuronforge.interfaces.cli.exit_codes import EXIT_CODES
from neuronforge.interfaces.cli.options import text
from neuronforge.interfaces.cli.spellings import shown_required, take_positionals

DESCRIPTION = "`neuronforge` command line."  # the first line of `--help`
# The command groups: each module declares its commands (`COMMANDS`), options and handler together.
GROUPS = (build, store, releases, catalog, recompile, sdk_feed, cache, sweep, environment, leases)
# The order `neuronforge --help` lists the commands in: the order they came in, which the help has always shown.
HELP_ORDER = (
    "plan",
    "fetch",
    "quantize",
    "cache-key",
    "store",
    "run",
    "show",
    "catalog",
    "gc",
    "cache",
    "profiles",
    "config",
    "worker-queues",
    "airflow",
    "verify",
    "sweep",
    "ls",
    "index",
    "promote",
    "compare",
    "rollback",
    "channels",
    "history",
    "require-release",
    "approve",
    "reject",
    "recompile",
    "releases",
    "attest",
    "lease",
)

# Options whose value may start with `-` (`--compiler-flags "-O1"`): argparse would take the value for an
# option, so `main` joins them to `--option=value` before parsing.
DASH_VALUE_OPTIONS = ("--compiler-flags", "--prompt")


def version() -> str:
    """The installed distribution's version (what `--version` prints)."""
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as installed_version

    try:
        return installed_version("neuronforge")
    except PackageNotFoundError:
        return "unknown (not installed)"


def _epilog() -> str:
    import textwrap

    codes = "\n".join(
        textwrap.fill(text, 100, initial_indent=f"  {int(code)}  ", subsequent_indent="     ")
        for code, text in EXIT_CODES.items()
    )
    return (
        f"defaults:\n  profile  $NEURONFORGE_PROFILE, else {settings.DEFAULT_PROFILE} (every command that takes a "
        "target, but sweep)\n  store    $NEURONFORGE_STORE, else the local store $NEURONFORGE_HOME/store "
        "(every command that\n           reads or writes one)\n"
        f"  settings {advice.command('config')} prints every NEURONFORGE_* setting and where its value came from\n\n"
        f"exit codes:\n{codes}\n\n"
        'shell completion (bash, zsh): eval "$(register-python-argcomplete neuronforge)"'
    )


def commands() -> list[Command]:
    """Every group's commands in `HELP_ORDER`; a command a group declares that the order does not place (or
    the other way round) is a mistake in this package, said here rather than left out of `--help`."""
    declared = {command.name: command for group in GROUPS for command in group.COMMANDS}
    if set(declared) != set(HELP_ORDER) or len(declared) != sum(len(group.COMMANDS) for group in GROUPS):
        raise RuntimeError(
            f"the CLI's commands {sorted(declared)} and their help order {sorted(HELP_ORDER)} differ (or a name is "
            "declared twice): add each command to HELP_ORDER once"
        )
    return [declared[name] for name in HELP_ORDER]


class Parser(argparse.ArgumentParser):
    """argparse's parser, printing masked (`common.secrets`): `--help` shows the effective store and
    profile, which the environment may have set to a URI carrying credentials, and a usage error
    quotes what was typed. Help text is masked before its formatter wraps it (a URI cut across two
    lines is no longer one the rule sees), anything else as it is printed. Its commands' parsers are
    of this class too (`add_subparsers` makes them of the parser's own class)."""

    def __init__(
        self, *args: Any, formatter_class: type[argparse.HelpFormatter] = argparse.HelpFormatter, **kwargs: Any
    ):
        super().__init__(*args, formatter_class=_masking(formatter_class), **kwargs)

    def error(self, message: str) -> NoReturn:
        """A usage error in one line, as every error of the CLI is (`--help` prints the usage): the
        argument and why, exit 2."""
        self.exit(2, f"{self.prog}: error: {message}\n")

    def _print_message(self, message: str, file: IO[str] | None = None) -> None:
        super()._print_message(mask_credentials(message) if message else message, file)

    def format_usage(self) -> str:
        with shown_required(self):
            return super().format_usage()

    def format_help(self) -> str:
        with shown_required(self):
            return super().format_help()

    def parse_known_args(self, args: Any = None, namespace: Any = None) -> tuple[argparse.Namespace, list[str]]:
        """argparse's, the old positional spellings of renamed arguments taken from what is left over."""
        parsed, extras = super().parse_known_args(args, namespace)
        return parsed, take_positionals(parsed, extras)


class _Default(str):
    """A string default as a command declares it (a typed value is a plain `str`)."""


def _text_or_default(raw: str) -> str:
    return str(raw) if isinstance(raw, _Default) else text(raw)  # a plain str: a YAML or JSON writer takes it


_text_or_default.__name__ = "text"


def _masking(formatter: type[argparse.HelpFormatter]) -> type[argparse.HelpFormatter]:
    """`formatter`, masking each text before it wraps or fills it."""

    class Masking(formatter):  # type: ignore[valid-type,misc]
        def _split_lines(self, text: str, width: int) -> list[str]:
            return super()._split_lines(mask_credentials(text), width)

        def _fill_text(self, text: str, width: int, indent: str) -> str:
            return super()._fill_text(mask_credentials(text), width, indent)

    return Masking


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(
        prog="neuronforge",
        description=DESCRIPTION,
        epilog=_epilog(),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="log progress to stderr")
    parser.add_argument("-q", "--quiet", action="store_true", help="print only the result and errors, no progress")
    parser.add_argument("--version", action="version", version=f"neuronforge {version()}", help="print the version")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND", help="one of:")
    for command in commands():
        command.add_to(sub)
    _text_unless_declared(parser)
    return parser


def _text_unless_declared(parser: argparse.ArgumentParser) -> None:
    """Every argument that takes a value and declares neither a type nor choices is text, checked by the
    one rule for text (`options.text`: not empty, one line, bounded), in every command, whichever module
    declares it and however (a group's arguments too): no value reaches a handler unchecked. A string
    default (`--reason` is "" unless given), which argparse passes through the type as if typed, is marked
    as the command's own and passes."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                _text_unless_declared(sub)
        elif action.nargs != 0 and action.type is None and action.choices is None:
            action.type = _text_or_default
            if isinstance(action.default, str):
                action.default = _Default(action.default)


def join_dash_values(argv: list[str]) -> list[str]:
    """`--compiler-flags -O1` -> `--compiler-flags=-O1` for the options of DASH_VALUE_OPTIONS, whose
    value may start with `-` (argparse would take it for an option); nothing after `--` is touched."""
    out: list[str] = []
    i = 0
    while i < len(argv):
        arg = argv[i]
        if arg == "--":
            out += argv[i:]
            break
        if arg in DASH_VALUE_OPTIONS and i + 1 < len(argv):
            out.append(f"{arg}={argv[i + 1]}")
            i += 2
            continue
        out.append(arg)
        i += 1
    return out
