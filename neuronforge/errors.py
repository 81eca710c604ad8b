"""Error types that carry a message meant for the person who gave the input.

Every error raised for bad input says what was wrong (with the value) and what to do instead,
so that the CLI and the Airflow tasks can show it as is.
"""

from __future__ import annotations

import errno
import os
from pathlib import Path


class NeuronforgeError(Exception):
    """Base class: a problem neuronforge can explain."""


class InvalidInput(NeuronforgeError, ValueError):
    """A user-supplied value is malformed or impossible (usage error)."""


class CheckpointError(NeuronforgeError):
    """A checkpoint failed verification; nothing derived from it is published."""


class StoreError(NeuronforgeError):
    """A store operation failed or a store URI cannot be used."""


class ServiceUnreachable(NeuronforgeError):
    """A service neuronforge depends on (the Hugging Face Hub) cannot be reached or answers an
    error: nothing about the input, so callers that judge inputs (a sweep's trial) must not."""


class StoreUnreachable(StoreError, ServiceUnreachable):
    """The store's endpoint does not answer (refused, timed out): a store problem that may pass, where
    a missing bucket or rejected credentials will not (the DAG's tasks retry only the former)."""


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
