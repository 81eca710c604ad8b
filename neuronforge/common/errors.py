"""Error types that carry a message meant for the person who gave the input, and their outcome.

Every error raised for bad input says what was wrong (with the value) and what to do instead,
so that the CLI and the Airflow tasks can show it as is. Each class also carries what follows from
it — the CLI's exit code, whether the DAG's tasks retry it, the prefix the user sees before the
message — and `outcome` reads them for any exception: the CLI's `main` and the tasks'
`task_failure` (Celery workers and Kubernetes pods alike) both map through it, so one policy decides
both. `neuronforge/interfaces/error_table.py` renders the classes as the table in docs/failure-behaviour.md.
"""

from __future__ import annotations

import errno
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import IntEnum
from pathlib import Path
from typing import ClassVar

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

    def said(self, surface: str) -> str:
        """The message in a surface's words ("cli", "form"): the same for most errors; a rejected plan
        words its fixes as the surface does (`--seq-len 2048` / "Sequence length: 2048")."""
        return str(self)


class InvalidInput(NeuronforgeError, ValueError):
    """A user-supplied value is malformed or impossible (usage error)."""

    exit_code = ExitCode.USAGE


class CheckpointError(NeuronforgeError):
    """A checkpoint failed verification; nothing derived from it is published."""

    exit_code = ExitCode.REJECTED
    prefix = "checkpoint rejected: "


class StoreError(NeuronforgeError):
    """A store operation failed or a store URI cannot be used (a missing bucket, rejected credentials)."""


class ArtifactDamaged(StoreError):
    """A published artifact is not what its index pointer promises (its manifest gone or unreadable, a
    file missing or of another size or sha256): recorded in the farm index, never served or promoted."""

    exit_code = ExitCode.REJECTED
    prefix = "damaged: "


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
        # masked here, the one place the CLI's line and a task's failure come from (common.secrets)
        return Outcome(exc.exit_code, exc.retryable, exc.prefix, mask_credentials(text))
    if isinstance(exc, OSError) and exc.errno in DISK_FIXES:
        named = exc.filename2 or exc.filename  # else the place whose file system is full or read-only
        where = [] if named else list(places() if callable(places) else places)
        return Outcome(ExitCode.FAILURE, exc.errno in TRANSIENT_DISK, "", mask_credentials(disk_error(exc, where)))
    return None
