"""Compile leases: identical requests compile once, whoever triggers them.

Before compiling, a worker takes `locks/<key>` in the store with a conditional create (holder,
started, heartbeat, expiry). Another run of the same request (a second trigger, the scheduled
recompile, another worker) finds the lease live, waits for the artifact's manifest and reuses it.
A lease whose holder stopped heart-beating past its expiry is taken over with a compare-and-swap
on the lease object's version (S3: `If-Match` on its ETag), so exactly one waiter wins; the old
holder, should it wake up, fails its next renewal and publishes nothing (`LeaseKeeper.assert_held`).
Releasing rewrites the lease as expired, which lets waiters take over at once.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from neuronforge.artifacts import layout
from neuronforge.common import settings
from neuronforge.common.errors import NeuronforgeError
from neuronforge.records.lease import LeaseRecord
from neuronforge.stores import ArtifactStore, NotFound

log = logging.getLogger(__name__)


def default_ttl_s() -> float:
    """How long a lease lives without a heartbeat (NEURONFORGE_LEASE_TTL_S, read when a lease is taken)."""
    return settings.current().lease_ttl_s


class LeaseLost(NeuronforgeError):
    """Another worker took the lease over (ours had expired): our work must not be published."""

    retryable = True  # the retry finds the other worker's artifact, or takes the lease again


@dataclass
class Lease:
    key: str
    holder: str
    started: float
    heartbeat: float
    expires: float
    version: str = ""  # the store's version of the lease object as we last wrote it

    def record(self) -> bytes:
        return LeaseRecord(
            key=self.key, holder=self.holder, started=self.started, heartbeat=self.heartbeat, expires=self.expires
        ).to_bytes()

    @property
    def live(self) -> bool:
        return self.expires > time.time()


def holder_id() -> str:
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


def current(store: ArtifactStore, key: str) -> Lease | None:
    try:
        data, version = store.read_versioned(layout.lock_entry(key))
    except NotFound:
        return None
    r = LeaseRecord.from_bytes(data, store.uri(layout.lock_entry(key)))
    return Lease(r.key, r.holder, r.started, r.heartbeat, r.expires, version=version)


def try_acquire(store: ArtifactStore, key: str, holder: str, ttl_s: float | None = None) -> Lease | None:
    """The lease for `key`, new or taken over from an expired holder; None while another holds it."""
    path = layout.lock_entry(key)
    ttl_s = default_ttl_s() if ttl_s is None else ttl_s
    for _ in range(3):  # the lease object can vanish between our calls (deleted by hand)
        now = time.time()
        lease = Lease(key, holder, now, now, now + ttl_s)
        if store.put_if_absent(lease.record(), path):
            lease.version = store.read_versioned(path)[1]
            return lease
        existing = current(store, key)
        if existing is None:
            continue
        if existing.live:
            return None
        if store.replace_if_version(lease.record(), path, existing.version):
            if existing.heartbeat < existing.expires:  # not a clean release: its holder died
                log.warning(
                    "lease %s: took over from %s, silent since %.0fs",
                    key[:12],
                    existing.holder,
                    now - existing.heartbeat,
                )
            lease.version = store.read_versioned(path)[1]
            return lease
        return None  # another waiter took it over first
    return None


def renew(store: ArtifactStore, lease: Lease, ttl_s: float | None = None) -> Lease:
    now = time.time()
    renewed = Lease(lease.key, lease.holder, lease.started, now, now + (default_ttl_s() if ttl_s is None else ttl_s))
    path = layout.lock_entry(lease.key)
    if not store.replace_if_version(renewed.record(), path, lease.version):
        raise LeaseLost(f"lease {lease.key[:12]} was taken over by another worker; this run publishes nothing")
    renewed.version = store.read_versioned(path)[1]
    return renewed


def release(store: ArtifactStore, lease: Lease) -> None:
    """Mark the lease expired (only if still ours), so waiters need not wait out the TTL."""
    done = Lease(lease.key, lease.holder, lease.started, time.time(), 0.0)
    store.replace_if_version(done.record(), layout.lock_entry(lease.key), lease.version)


class LeaseKeeper:
    """Heart-beats a lease on a thread while the work runs; `assert_held` before publishing."""

    def __init__(
        self, store: ArtifactStore, lease: Lease, ttl_s: float | None = None, release_on_exit: bool = True
    ) -> None:
        self.store, self.lease, self.release_on_exit = store, lease, release_on_exit
        self.ttl_s = default_ttl_s() if ttl_s is None else ttl_s
        self.lost: LeaseLost | None = None
        # One renewal at a time: the heartbeat and `assert_held` renew against `self.lease.version`;
        # interleaved, one would find the other's write and take it for a takeover (a false LeaseLost,
        # after which the run publishes nothing and never releases the lease).
        self._renewing = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._beat, daemon=True, name=f"lease-{lease.key[:8]}")

    def _beat(self) -> None:
        while not self._stop.wait(self.ttl_s / 3):
            try:
                with self._renewing:
                    self.lease = renew(self.store, self.lease, self.ttl_s)
            except LeaseLost as exc:
                self.lost = exc
                log.error("%s", exc)
                return
            except Exception as exc:  # a store hiccup: try again at the next beat
                log.warning("lease %s: renewal failed (%s); retrying", self.lease.key[:12], exc)

    def assert_held(self) -> None:
        if self.lost is not None:
            raise self.lost
        with self._renewing:
            self.lease = renew(self.store, self.lease, self.ttl_s)  # also proves it right now

    def __enter__(self) -> LeaseKeeper:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        if self.lost is None and self.release_on_exit:
            release(self.store, self.lease)


@contextmanager
def keeping(
    store: ArtifactStore, lease: Lease, ttl_s: float | None = None, *, hand_on: bool = False
) -> Iterator[LeaseKeeper]:
    """Hold `lease` while the body works — the one lease keeping of the CLI's runner and the DAG's
    tasks: heart-beat it, prove it ours before the work starts, and fail fast (`LeaseLost`) if it was
    taken over. Then release it (the CLI: the build is over, failed or not), or, with `hand_on` (a
    DAG task: the next task renews it), prove it still ours once the body succeeded and leave it
    held; `keeper.lease` is then its latest version, the one the next holder renews from."""
    keeper = LeaseKeeper(store, lease, ttl_s, release_on_exit=not hand_on)
    with keeper:
        keeper.assert_held()
        yield keeper
    if hand_on:
        keeper.assert_held()


def wait_for(store: ArtifactStore, key: str, found, poll_s: float = 5.0, timeout_s: float = 6 * 3600):
    """Poll until `found()` returns something (the published artifact) or the lease is no longer
    live (holder finished without publishing, or died); returns `found()`'s value or None."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        hit = found()
        if hit is not None:
            return hit
        lease = current(store, key)
        if lease is None or not lease.live:
            return found()
        time.sleep(poll_s)
    raise NeuronforgeError(f"gave up waiting {timeout_s:.0f}s for the holder of lease {key[:12]}")
