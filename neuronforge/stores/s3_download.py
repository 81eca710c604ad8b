"""Downloads from S3 as parallel ranged GETs, each read into one reused buffer and written in place.

Why not s3transfer's download (which uploads still use): measured with bench/transfer.py on 2 cores,
its download path spends ~3 s of CPU per GiB (8 MiB reads become bytes objects, handed to one writer
thread through a queue), this one ~1 s — s5cmd (Go) ~1.1 s. On a host whose cores are busy, CPU per
byte is the download speed. The CRT client (awscrt through s3transfer.crt) was measured too: ~3 s per
GiB through s3transfer's wrapper (a Python progress callback per chunk), ~1.8 s called directly, and
slower than this in the same run (docs/benchmarks.md).

How: one HEAD per object whose size the caller does not know (its size and ETag); each object is
written to a temporary name beside its destination, sized up front, its parts (`part_size` bytes)
fetched by `concurrency` threads with `Range` and `If-Match: <ETag>` (an object replaced meanwhile
fails instead of mixing two versions) and written at their offsets with `os.pwrite`; the temporary
file is renamed when its last part lands. A read that breaks mid-part (reset, timeout) resumes from
the byte it reached, up to `READ_ATTEMPTS` times; the request itself is retried by botocore.
"""

from __future__ import annotations

import os
import threading
import uuid
from collections.abc import Iterator
from concurrent.futures import FIRST_EXCEPTION, ThreadPoolExecutor, wait
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from botocore.exceptions import ClientError, IncompleteReadError, ReadTimeoutError, ResponseStreamingError
from botocore.exceptions import ConnectionError as BotoConnectionError
from urllib3.exceptions import ProtocolError
from urllib3.exceptions import ReadTimeoutError as Urllib3ReadTimeout

from neuronforge.common.errors import StoreUnreachable

READ_ATTEMPTS = 5
BUFFER = 1024 * 1024  # bytes read from the socket per call: few wake-ups, little memory per thread
_BROKEN_READS = (
    BotoConnectionError,
    IncompleteReadError,
    ReadTimeoutError,
    ResponseStreamingError,
    ProtocolError,
    Urllib3ReadTimeout,
    ConnectionError,
    TimeoutError,
)


@contextmanager
def _naming(key: str) -> Iterator[None]:
    """An S3 error answered for `key` carries it (`failed_key`): the store's message names that object."""
    try:
        yield
    except ClientError as exc:
        exc.failed_key = key  # type: ignore[attr-defined]
        raise


@dataclass
class _Object:
    key: str  # the full S3 key
    dest: Path
    size: int = -1  # -1: not known yet (HEAD)
    etag: str = ""
    tmp: Path | None = None
    fd: int = -1
    left: int = 0  # parts not written yet
    lock: threading.Lock = field(default_factory=threading.Lock)


class RangedDownload:
    """Download `(key, dest, size or -1, etag or "")` objects of one bucket (a listing gives both; -1: one
    HEAD asks); `advance(n)` is told every n bytes written."""

    def __init__(self, client: Any, bucket: str, concurrency: int, part_size: int, advance: Any) -> None:
        self.client, self.bucket = client, bucket
        self.concurrency, self.part_size = max(1, concurrency), max(1, part_size)
        self.advance = advance

    def run(self, jobs: list[tuple[str, Path, int, str]]) -> list[int]:
        """Download every job; their sizes, in order. Nothing is left at a destination unless it is whole."""
        objects = [_Object(key, dest, size, etag if size >= 0 else "") for key, dest, size, etag in jobs]
        try:
            with ThreadPoolExecutor(self.concurrency, thread_name_prefix="nf-s3-get") as pool:
                self._all(pool, [pool.submit(self._head, o) for o in objects if o.size < 0])
                parts = [part for o in objects for part in self._open(o)]
                self._all(pool, [pool.submit(self._part, o, lo, hi) for o, lo, hi in parts])
        finally:
            for o in objects:
                self._close(o, keep=False)
        return [o.size for o in objects]

    @staticmethod
    def _all(pool: ThreadPoolExecutor, futures: list[Any]) -> None:
        done, pending = wait(futures, return_when=FIRST_EXCEPTION)
        for f in pending:
            f.cancel()
        for f in done:
            f.result()  # the first failure raises; the pool's exit waits for the running ones

    def _head(self, o: _Object) -> None:
        with _naming(o.key):
            head = self.client.head_object(Bucket=self.bucket, Key=o.key)
        o.size, o.etag = int(head["ContentLength"]), str(head.get("ETag", ""))

    def _open(self, o: _Object) -> list[tuple[_Object, int, int]]:
        o.dest.parent.mkdir(parents=True, exist_ok=True)
        o.tmp = o.dest.parent / f".nf-tmp-{uuid.uuid4().hex}-{o.dest.name}"[:255]
        o.fd = os.open(o.tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        # Not sized beforehand (ftruncate): on ext4 the parts' writes then cost 1.55 s of CPU per GiB against
        # 0.58 without it, and downloads ran at 0.85x s5cmd against 1.27x (bench/transfer.py, same machine).
        if o.size == 0:
            self._close(o, keep=True)
            return []
        ranges = [(lo, min(lo + self.part_size, o.size) - 1) for lo in range(0, o.size, self.part_size)]
        o.left = len(ranges)
        return [(o, lo, hi) for lo, hi in ranges]

    def _part(self, o: _Object, lo: int, hi: int) -> None:
        buf = memoryview(bytearray(min(BUFFER, hi - lo + 1)))
        pos, attempts = lo, 0
        while pos <= hi:
            kwargs: dict[str, Any] = {"Bucket": self.bucket, "Key": o.key}
            if lo > 0 or hi < o.size - 1 or pos > lo:
                kwargs["Range"] = f"bytes={pos}-{hi}"
            if o.etag:
                kwargs["IfMatch"] = o.etag
            with _naming(o.key):
                body = self.client.get_object(**kwargs)["Body"]
            broke: Exception | None = None
            try:
                while pos <= hi:
                    n = body.readinto(buf[: hi - pos + 1])
                    if not n:
                        break
                    os.pwrite(o.fd, buf[:n], pos)
                    pos += n
                    self.advance(n)
            except _BROKEN_READS as exc:
                broke = exc
            finally:
                body.close()
            if pos <= hi:  # broke off, or ended short: the rest again, from where it got
                attempts += 1
                if attempts >= READ_ATTEMPTS:
                    why = broke or f"ended at byte {pos} of {hi + 1}"
                    raise StoreUnreachable(
                        f"reading s3://{self.bucket}/{o.key} broke off {attempts} times ({why}); check the network "
                        "and the endpoint, then run again"
                    )
        with o.lock:
            o.left -= 1
            last = o.left == 0
        if last:
            self._close(o, keep=True)

    @staticmethod
    def _close(o: _Object, keep: bool) -> None:
        with o.lock:
            if o.fd >= 0:
                os.close(o.fd)
                o.fd = -1
                if keep and o.tmp is not None:
                    os.replace(o.tmp, o.dest)
                    o.tmp = None
            if o.tmp is not None:
                o.tmp.unlink(missing_ok=True)
                o.tmp = None
