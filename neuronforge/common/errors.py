"""Error types that carry a message meant for the person who gave the input, and their outcome.

Every error raised for bad input says what was wrong (with the value) and what to do instead,
so that the CLI and the Airflow tasks can show it as is. Each class also carries what follows from
it — the CLI's exit code, whether the DAG's tasks retry it, the prefix the user sees before the
message, the HTTP status a web surface answers with — and `outcome` reads them for any exception: the
CLI's `main` and the tasks' `task_failure` (Celery workers and Kubernetes pods alike) both map through
it, and the catalog's one exception handler answers with `http_status`, so one policy decides all three.
`neuronforge/interfaces/error_table.py` renders the classes as the table in docs/failure-behaviour.md.
"""

from __future__ import annotations

import errno
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import IntEnum
from http import HTTPStatus
from pathlib import Path
from typing import ClassVar

from neuronforge.common.line_breaks import escaped
from neuronforge.common.secrets import mask_credentials


class ExitCode(IntEnum):
    """The CLI's exit codes: a contract later tooling relies on (their meanings per command are
    `neuronforge.interfaces.cli.exit_codes.EXIT_CODES`, printed at the end of `neuronforge --help`)."""

    OK = 0
    FAILURE = 1
    USAGE = 2
    REJECTED = 3
    STALE = 4
    INTERRUPTED = 130  # 128 + SIGINT (Ctrl+C): the shell's convention, as a program SIGINT killed
    TERMINATED = 143  # 128 + SIGTERM (kill, a CI step's timeout)
    CLOSED_PIPE = 141  # 128 + SIGPIPE: what a program the closed pipe killed exits with


class NeuronforgeError(Exception):
    """A problem neuronforge can explain: a store or environment failure, not retried."""

    exit_code: ClassVar[ExitCode] = ExitCode.FAILURE  # what the CLI exits with
    retryable: ClassVar[bool] = False  # whether the DAG's tasks retry it (as their `retries` say)
    prefix: ClassVar[str] = ""  # shown before the message, by the CLI and the tasks alike
    # What a web surface (the catalog) answers with. A class that does not set it derives it from its
    # outcome (`derived_status`), so the HTTP answer follows the exit code and the retry decision.
    http_status: ClassVar[HTTPStatus] = HTTPStatus.INTERNAL_SERVER_ERROR

    def __init_subclass__(cls, **kwargs: object) -> None:
        super().__init_subclass__(**kwargs)
        if "http_status" not in vars(cls):
            cls.http_status = derived_status(cls)

    def said(self, surface: str) -> str:
        """The message in a surface's words ("cli", "form"): the same for most errors; a rejected plan
        words its fixes as the surface does (`--seq-len 2048` / "Sequence length: 2048")."""
        return str(self)


def derived_status(cls: type[NeuronforgeError]) -> HTTPStatus:
    """The HTTP status an error class's outcome implies: retried (it may pass) 503, a usage error 400,
    a rejection (refused: the input or the state does not allow it) 409; otherwise its first base's."""
    if cls.retryable:
        return HTTPStatus.SERVICE_UNAVAILABLE
    if cls.exit_code == ExitCode.USAGE:
        return HTTPStatus.BAD_REQUEST
    if cls.exit_code == ExitCode.REJECTED:
        return HTTPStatus.CONFLICT
    base = next(b for b in cls.__mro__[1:] if issubclass(b, NeuronforgeError))
    return base.http_status


class InvalidInput(NeuronforgeError, ValueError):
    """A user-supplied value is malformed or impossible (usage error)."""

    exit_code = ExitCode.USAGE


class CheckpointError(NeuronforgeError):
    """A checkpoint failed verification; nothing derived from it is published."""

    exit_code = ExitCode.REJECTED
    prefix = "checkpoint rejected: "


class StoreError(NeuronforgeError):
    """A store operation failed or a store URI cannot be used (a missing bucket, rejected credentials)."""

    http_status = HTTPStatus.SERVICE_UNAVAILABLE  # the store a page reads cannot be used: not the request's fault


class StoreNotFound(StoreError):
    """A store folder that does not exist, named to be read: a mistyped path, a usage error as a missing
    `--model` folder is (reading a store never creates one)."""

    exit_code = ExitCode.USAGE
    http_status = HTTPStatus.SERVICE_UNAVAILABLE  # behind a page it is the server's configured store: not the request


class InvalidStoreKey(StoreError):
    """A key that could escape the store's root or alias another (`..`, an empty part): what was asked is
    wrong, not the store — a usage error where a command was given it."""

    exit_code = ExitCode.USAGE
    http_status = HTTPStatus.SERVICE_UNAVAILABLE  # a page checks what it asks for first: one here came from the store


class ArtifactDamaged(StoreError):
    """A published artifact is not what its index pointer promises (its manifest gone or unreadable, a
    file missing or of another size or sha256): recorded in the farm index, never served or promoted."""

    exit_code = ExitCode.REJECTED
    prefix = "damaged: "
    http_status = HTTPStatus.SERVICE_UNAVAILABLE  # what the store holds is damaged: a store problem, as StoreError


class ServiceUnreachable(NeuronforgeError):
    """A service neuronforge depends on (the Hugging Face Hub) cannot be reached or answers an
    error: nothing about the input, so callers that judge inputs (a sweep's trial) must not."""

    retryable = True


class StoreUnreachable(StoreError, ServiceUnreachable):
    """The store's endpoint does not answer (refused, timed out): a store problem that may pass, where
    a missing bucket or rejected credentials will not (the DAG's tasks retry only the former)."""

    retryable = True  # said here, not left to the order of the bases (StoreError's would not)


# A disk that is full or cannot be written: one line naming the path and the fix, never a traceback.
DISK_FIXES = {
    errno.ENOSPC: "free space there, or point the store / --work-dir (NEURONFORGE_HOME) at a larger disk",
    errno.EDQUOT: "raise the quota there, or point the store / --work-dir (NEURONFORGE_HOME) elsewhere",
    errno.EROFS: "the file system is mounted read-only: use a writable store / --work-dir (NEURONFORGE_HOME)",
    errno.EACCES: "this user cannot write there: fix its permissions or use another store / --work-dir",
    errno.EPERM: "this user cannot write there: fix its permissions or use another store / --work-dir",
}
# Of those, the ones that may pass without anyone changing the setup (space freed by a cleanup).
TRANSIENT_DISK = {errno.ENOSPC, errno.EDQUOT}
NAME_LIMITS = "a file or folder name is at most 255 bytes, a path at most 4096 (Linux's NAME_MAX, PATH_MAX)"


def disk_error(exc: OSError, places: list[Path] | None = None) -> str:
    """`exc` (an errno in DISK_FIXES) as one line: what failed, where, what to do. A failed `write`
    (not `open`) carries no file name: then the place is the one of `places` (the store, work dir,
    output the caller writes) whose file system is full or read-only, as `statvfs` tells."""
    path = exc.filename2 or exc.filename or _culprit(exc.errno, places or []) or "?"
    return f"{exc.strerror}: {path}; {DISK_FIXES[exc.errno]}"


def _culprit(code: int | None, places: list[Path]) -> Path | None:
    for place in places:
        here = place.expanduser()
        while not here.exists() and here != here.parent:
            here = here.parent
        try:
            fs = os.statvfs(here)
        except OSError:
            continue
        if (code == errno.ENOSPC and fs.f_bavail == 0) or (code == errno.EROFS and fs.f_flag & os.ST_RDONLY):
            return place
    return None


@dataclass(frozen=True)
class Outcome:
    """What follows from an explained failure, for the CLI and the DAG's tasks alike."""

    exit_code: ExitCode  # what the CLI exits with
    retryable: bool  # whether the DAG's tasks retry it (AirflowException) or fail at once (AirflowFailException)
    prefix: str  # the class's word before the message ("checkpoint rejected: ")
    text: str  # the message as raised

    @property
    def message(self) -> str:
        """What the CLI prints after "error: " (a rejected plan lists each problem on a line of its own)."""
        return f"{self.prefix}{self.text}"

    @property
    def line(self) -> str:
        """The message on one line: the task's failure, which Airflow shows as one line."""
        return self.prefix + "; ".join(part.strip() for part in self.text.splitlines() if part.strip())


def outcome(
    exc: BaseException, places: Sequence[Path] | Callable[[], Sequence[Path]] = (), surface: str = "cli"
) -> Outcome | None:
    """The outcome of `exc`: an error of ours by its class's `exit_code`, `retryable` and `prefix`; a
    full, read-only or forbidden disk (`DISK_FIXES`) as one line naming the path and the fix, retried
    only when it may pass by itself (`TRANSIENT_DISK`). None for anything else: not explained, the
    caller keeps its traceback. `places` are where the caller writes (asked only for a disk error
    whose exception names no file; a callable is called only then). `surface` words the message as the
    caller's users speak (the CLI's flags, the trigger form's titles)."""
    if isinstance(exc, NeuronforgeError):
        said = exc.said(surface)
        text = said if said.strip() else type(exc).__name__  # a message-less error still says what it is
        # masked here, the one place the CLI's line and a task's failure come from (common.secrets); a
        # message's own lines are the surface's to join (a task's failure), a value it names is escaped
        # where it is named (`line_breaks.escaped`)
        return Outcome(exc.exit_code, exc.retryable, exc.prefix, mask_credentials(text))
    if isinstance(exc, OSError) and exc.errno == errno.ENAMETOOLONG:  # a name given (an argument, a setting)
        name = str(exc.filename or exc.filename2 or "?")
        shown = name if len(name) <= 80 else f"{name[:60]}…({len(name)} characters)"
        said = f"file name too long: {shown}; {NAME_LIMITS}"
        return Outcome(ExitCode.USAGE, False, "", escaped(mask_credentials(said)))
    if isinstance(exc, OSError) and exc.errno in DISK_FIXES:
        named = exc.filename2 or exc.filename  # else the place whose file system is full or read-only
        where = [] if named else list(places() if callable(places) else places)
        said = escaped(mask_credentials(disk_error(exc, where)))
        return Outcome(ExitCode.FAILURE, exc.errno in TRANSIENT_DISK, "", said)
    return None
