"""Every transfer that moves bytes, measured around the real call: what, how many bytes and files, how
long, with which client and settings — and one warning line when it ran below the floor.

A model's weights are tens to hundreds of GB: at the ~80 MB/s of one network flow a 70B checkpoint
takes half an hour, at 1 GB/s (parallel ranged requests) two and a half minutes. Nobody sees that
difference unless it is written down, so the stores (`neuronforge.stores`) and the Hub download
(`stages.resolve.hub_snapshot`) wrap each transfer in `measured(...)`, which times it with `CLOCK`
and hands the result (`Transfer`) to whoever is `collecting()` — the pipeline's `TransferLog` hook,
which keeps each stage's transfers in the build state for the manifest's `transfers` part
(`neuronforge.records.transfers`). Only a transfer that finished is recorded: a failed one raised.

`slow_warning` is the floor check: a transfer of at least `WARN_MIN_BYTES` (small files finish before
a rate means anything) below `NEURONFORGE_TRANSFER_FLOOR_MBS` logs ONE line naming the likely cause
from what the transfer knows: one flow (concurrency 1, or one object below the part size), parts
too small, a Hub download without hf_xet; else the network or the endpoint.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

log = logging.getLogger(__name__)

MIB = 1024 * 1024
# Below this a transfer is not judged by its rate: its requests' latency, not the bandwidth, sets it.
WARN_MIN_BYTES = 256 * MIB
# Parts smaller than this spend more on each request's round trip than on its bytes.
SMALL_PART_BYTES = 8 * MIB
# The clock transfers are timed with (tests replace it to make a transfer slow without waiting).
CLOCK: Callable[[], float] = time.monotonic

UPLOAD, DOWNLOAD = "upload", "download"


@dataclass(frozen=True)
class Transfer:
    """One transfer as measured: a tree, a file list or one file, in one direction."""

    direction: str  # UPLOAD | DOWNLOAD
    where: str  # the store URI of the prefix (or object), or hf://org/name@revision
    bytes: int
    files: int
    seconds: float
    client: str  # "s3 crt", "s3 boto3", "file", "huggingface_hub 0.36.2 + hf_xet", ...
    concurrency: int = 0  # parallel requests it allowed (0: not the client's notion)
    part_size: int = 0  # bytes per ranged request / multipart part (0: whole objects)

    @property
    def mbs(self) -> float:
        """MB/s (10^6 bytes per second, as network speeds are given); 0 for an instant transfer."""
        return self.bytes / 1e6 / self.seconds if self.seconds > 0 else 0.0


_SINKS: list[list[Transfer]] = []
_LOCK = threading.Lock()


@contextmanager
def collecting() -> Iterator[list[Transfer]]:
    """The transfers this process finishes inside the block, in order (nested collectors each get them)."""
    sink: list[Transfer] = []
    with _LOCK:
        _SINKS.append(sink)
    try:
        yield sink
    finally:
        with _LOCK:  # this very list: `remove` would take the first *equal* one (two empty sinks are equal)
            _SINKS[:] = [s for s in _SINKS if s is not sink]


def record(transfer: Transfer) -> None:
    """Hand a measured transfer to every collector, and warn when it ran below the floor (one that
    moved nothing — an empty marker file — is no transfer)."""
    if transfer.bytes == 0:
        return
    with _LOCK:
        for sink in _SINKS:
            sink.append(transfer)
    warning = slow_warning(transfer, floor_mbs())
    if warning:
        log.warning("%s", warning)


class Measuring:
    """What a running transfer has moved: set when the size is known only as it ends (one object
    whose size the request answers)."""

    def __init__(self, nbytes: int) -> None:
        self.bytes = nbytes


@contextmanager
def measured(
    direction: str,
    where: str,
    nbytes: int,
    files: int,
    client: str,
    concurrency: int = 0,
    part_size: int = 0,
) -> Iterator[Measuring]:
    """Time the block (a transfer of `nbytes` in `files` files) and `record` it when it finishes."""
    done = Measuring(nbytes)
    started = CLOCK()
    yield done
    seconds = max(CLOCK() - started, 0.0)
    record(Transfer(direction, where, done.bytes, files, round(seconds, 6), client, concurrency, part_size))


def floor_mbs() -> float:
    """`NEURONFORGE_TRANSFER_FLOOR_MBS` (0: no warning)."""
    from neuronforge.common import settings

    return settings.current().transfer_floor_mbs


def likely_cause(t: Transfer) -> str:
    """Why a transfer was slow, from what it knows, with what to do (the first that applies)."""
    if t.client == "file":
        return "the disk (or the network filesystem) under the file store"
    if t.client.startswith("huggingface_hub") and "hf_xet" not in t.client:
        return (
            "a Hub download without hf_xet (plain HTTP, one stream per file): pip install hf_xet "
            "(huggingface_hub[hf_xet]), and unset HF_HUB_DISABLE_XET"
        )
    if t.concurrency == 1:
        return "a single flow (concurrency 1): one network flow is capped far below a host's bandwidth"
    if t.files == 1 and (t.part_size == 0 or t.bytes <= t.part_size):
        return "a single flow (one object in one request): split it, or lower the part size below its size"
    if 0 < t.part_size < SMALL_PART_BYTES:
        return (
            f"a part size of {t.part_size / MIB:g} MiB (below {SMALL_PART_BYTES // MIB} MiB, each request's round "
            "trip costs more than its bytes): raise it"
        )
    return (
        f"not the client's settings ({t.client}, concurrency {t.concurrency or '-'}, parts "
        f"{f'{t.part_size / MIB:g} MiB' if t.part_size else '-'}): the network, the endpoint or the disk"
    )


def slow_warning(t: Transfer, floor: float) -> str | None:
    """The one warning line for a transfer below `floor` MB/s, or None (small, fast, or no floor)."""
    if floor <= 0 or t.bytes < WARN_MIN_BYTES or t.seconds <= 0 or t.mbs >= floor:
        return None
    verb = "uploading" if t.direction == UPLOAD else "downloading"
    return (
        f"slow transfer: {verb} {size(t.bytes)} in {t.files} file(s) {'to' if t.direction == UPLOAD else 'from'} "
        f"{t.where} ran at {t.mbs:.0f} MB/s, below NEURONFORGE_TRANSFER_FLOOR_MBS={floor:g}; likely {likely_cause(t)}"
    )


def size(n: int) -> str:
    """Bytes for people: 512 B, 3.1 MiB, 14.9 GiB."""
    value = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{value:.1f} TiB"  # pragma: no cover - the loop returns
