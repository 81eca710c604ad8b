# PYTHON_ARGCOMPLETE_OK
"""`neuronforge` command line.

Every command that takes a target defaults to the same serving profile (`settings.default_profile()`:
NEURONFORGE_PROFILE, else `cpu`); every command that reads or writes a store defaults to the same store
(`settings.store_uri()`: NEURONFORGE_STORE, else the local store under NEURONFORGE_HOME). The exit codes
are a contract later tooling relies on: `ExitCode` (in `neuronforge.common.errors`, where each error class names
its own) and `EXIT_CODES` (in `exit_codes.py`) are their one table (printed at the end of `neuronforge --help`).
Which error ends in which code and line is `errors.outcome`'s to say, for `main` and the DAG's tasks alike.

The commands live in one module per group (`build`, `store`, `catalog`, `cache`, `sweep`, `environment`),
each declaring its commands' options and handlers together (`command.Command`); `parser.py` assembles them
under the top-level options, `options.py` holds what several share (target and store flags).
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import sys
from pathlib import Path

from neuronforge.common import errors, interrupts, settings
from neuronforge.common.errors import ExitCode, InvalidInput
from neuronforge.common.secrets import mask_logs, print_line
from neuronforge.interfaces.cli.exit_codes import (
    EXIT_CLOSED_PIPE,
    EXIT_CODES,
    EXIT_FAILURE,
    EXIT_OK,
    EXIT_REJECTED,
    EXIT_STALE,
    EXIT_USAGE,
)
from neuronforge.interfaces.cli.options import resolve_store
from neuronforge.interfaces.cli.parser import build_parser, join_dash_values, version
from neuronforge.interfaces.cli.spellings import resolve_renamed

__all__ = [
    "EXIT_CODES",
    "EXIT_FAILURE",
    "EXIT_OK",
    "EXIT_REJECTED",
    "EXIT_STALE",
    "EXIT_USAGE",
    "ExitCode",
    "build_parser",
    "main",
]


def main(argv: list[str] | None = None) -> int:
    """The `neuronforge` command; without `argv` it is the process's entry point (the console script,
    `python -m`), which an interrupt ends at once after its one line (`interrupts.finish`)."""
    entry_point = argv is None
    argv = sys.argv[1:] if argv is None else [str(a) for a in argv]
    if argv == ["--version"]:  # before the parser: its target flags are read from TargetSpec (pydantic)
        print(f"neuronforge {version()}")
        return EXIT_OK
    mask_logs()  # every log line masked, whichever logger or handler (common.secrets)
    try:  # a bad NEURONFORGE_* value: one line, before any work (the parser's help shows the settings too)
        settings.current()
        parser = build_parser()
    except InvalidInput as exc:
        print_line(f"error: {errors.outcome(exc).message}")  # type: ignore[union-attr]
        return EXIT_USAGE
    if "_ARGCOMPLETE" in os.environ:  # the shell's completion hook (register-python-argcomplete neuronforge)
        import argcomplete

        argcomplete.autocomplete(parser)
    args = parser.parse_args(join_dash_values(argv))
    _show_unencodable()
    from neuronforge.common import progress

    # By default: warnings, and the heartbeats of long steps when stderr is not a terminal (their own
    # level, progress.HEARTBEAT, between INFO and WARNING); -v adds every INFO line, -q only errors.
    logging.basicConfig(
        level=logging.ERROR if args.quiet else logging.INFO if args.verbose else progress.HEARTBEAT,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        handlers=[progress.StderrHandler()],  # above the progress display, not through it
    )

    command = " ".join(filter(None, (args.command, getattr(args, f"{args.command}_command", None))))
    guard = (
        contextlib.nullcontext()
        if command in OWN_SIGNALS
        else interrupts.handled(command, publishes=command in PUBLISHERS)
    )
    with guard as watcher:
        caller = progress.current()  # restored after: `main` is also called in-process (the demo, tests)
        try:
            try:
                resolve_renamed(args)  # an old spelling: its one warning line, or both given: exit 2
                resolve_store(args)
                # Progress on stderr, never stdout: a display on a terminal, else heartbeat lines (-q: none).
                progress.use(progress.for_cli(quiet=args.quiet, machine=getattr(args, "json", False)))
                return args.func(args)
            except Exception as exc:  # an interrupt is a BaseException: unwound to the clause below
                if isinstance(exc, BrokenPipeError) and _stdout_closed():
                    _silence_stdout()
                    return EXIT_CLOSED_PIPE
                found = errors.outcome(exc, lambda: _written_places(args))
                if found is None:
                    raise  # not explained: a bug, with its traceback
                print_line(f"error: {found.message}")
                return found.exit_code
            finally:
                progress.use(caller)
        except interrupts.Interrupted as exc:  # unwound: the lease released, children stopped on the way
            interrupts.finish(watcher, exc, exit_process=entry_point)
            return exc.exit_code


# Commands that handle SIGINT / SIGTERM themselves (`airflow` stops its components with their own grace).
OWN_SIGNALS = {"airflow"}
# Commands whose interrupt line may say that nothing was published (the manifest is written last and
# `interrupts.note_published` says when it is).
PUBLISHERS = {"run"}


def _show_unencodable() -> None:
    """Text that cannot be encoded (a name that is not UTF-8, as a store or a folder gave it) is
    printed as its `\\xNN` escape (`stored_text.SHOWN`) by every command, never a UnicodeEncodeError."""
    from contextlib import suppress

    from neuronforge.common.stored_text import SHOWN

    for stream in (sys.stdout, sys.stderr):
        with suppress(AttributeError, ValueError, OSError):  # not a text file (in-process callers' captures)
            stream.reconfigure(errors=SHOWN)  # type: ignore[union-attr]


def _stdout_closed() -> bool:
    """Whether stdout is a pipe its reader closed (POLLERR on the write end), so that a broken pipe to
    a store or a service is still reported as the failure it is."""
    import select

    try:
        poller = select.poll()
        poller.register(sys.stdout.fileno(), select.POLLOUT)
        return any(event & select.POLLERR for _, event in poller.poll(0))
    except (OSError, ValueError, AttributeError):  # no file descriptor (in-process callers), no poll
        return False


def _silence_stdout() -> None:
    """The reader of stdout went away (`neuronforge show KEY | head`): stop quietly. stdout is pointed
    at /dev/null so that the interpreter's flush at exit does not fail again with a traceback (the
    recipe of Python's `signal` docs, "Note on SIGPIPE")."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):  # stdout without a file descriptor (in-process callers): nothing to flush
        pass


def _written_places(args: argparse.Namespace) -> list[Path]:
    """Where a command writes on this host, the most specific first: --out, --work-dir, its file
    store, NEURONFORGE_HOME."""
    from neuronforge.stores import local_folder

    places = [Path(p) for p in (getattr(args, "out", None), getattr(args, "work_dir", None)) if p]
    uri = getattr(args, "store", None)
    store = local_folder(str(uri)) if uri else None
    return [*places, *([store] if store else []), settings.home()]
