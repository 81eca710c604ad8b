"""Compile leases: identical requests compile once, whoever triggers them.

Before compiling, a worker takes `locks/<key>` in the store with a conditional create (holder,
started, heartbeat, expiry). Another run of the same request (a second trigger, the scheduled
recompile, another worker) finds the lease live, waits for the artifact's manifest and reuses it.
A lease whose holder stopped heart-beating past its expiry is taken over with a compare-and-swap
on the lease object's version (S3: `If-Match` on its ETag), so exactly one waiter wins; the old
holder, should it wake up, fails its next renewal and publishes nothing (`LeaseKeeper.assert_held`).
Releasing rewrites the lease as expired, which lets waiters take over at once.

A lease whose record is damaged — not a lease (`records.lease`: not JSON, nested too deep, numbers out
of range, a folder where its file belongs) or the lease of another key than its file names — was not
written by a holder of that key, so nothing in it is trusted: not its holder, not its expiry, not its
PID. It keeps waiters waiting as a lease would, for one TTL (`NEURONFORGE_LEASE_TTL_S`) measured from
when the store last wrote it (its listing's modified time: a holder that still renews it rewrites it),
then it is taken over by compare-and-swap like a lapsed one; `neuronforge lease break KEY` frees it at
once. So a waiter never waits forever on one, and never takes over a lease that is being renewed.
"""

from __future__ import annotations

import functools
import logging
import os
import re
import socket
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from http import HTTPStatus
from typing import Any

from neuronforge.artifacts import layout
from neuronforge.common import advice, settings
from neuronforge.common.errors import ExitCode, InvalidInput, NeuronforgeError
from neuronforge.records.base import RecordError
from neuronforge.records.lease import LeaseRecord
from neuronforge.records.parts import PID_LIMIT
from neuronforge.stores import ArtifactStore, NotFound

log = logging.getLogger(__name__)

# What `state` calls a lease: held by a process that renews it; released by its holder; past its expiry
# without a release (its holder stopped renewing: died elsewhere, or stalled); held by a process of this
# host that no longer exists. Only a live lease keeps a waiter waiting.
WAIT_LIMIT_S = 6 * 3600.0  # how long a waiter waits for a holder that keeps renewing its lease
LIVE, RELEASED, STALE, DEAD_HERE = "live", "released", "stale", "dead-on-this-host"
STATES = (LIVE, STALE, DEAD_HERE, RELEASED)


def default_ttl_s() -> float:
    """How long a lease lives without a heartbeat (NEURONFORGE_LEASE_TTL_S, read when a lease is taken)."""
    return settings.current().lease_ttl_s


def heartbeat_for(ttl_s: float) -> float:
    """How often the holder of a lease living `ttl_s` renews it: NEURONFORGE_LEASE_HEARTBEAT_S, or a
    third of a TTL too short for two of those (a caller's own short TTL: tests, a benchmark)."""
    beat = settings.current().lease_heartbeat_s
    return beat if ttl_s >= settings.LEASE_TTL_MIN_HEARTBEATS * beat else max(ttl_s / 3, 0.0)  # never < 0: recorded


def handoff_s() -> float:
    """How long a DAG run's lease stays held between two of its tasks (NEURONFORGE_LEASE_HANDOFF_S)."""
    return settings.current().lease_handoff_s


class LeaseLost(NeuronforgeError):
    """Another worker took the lease over (ours had expired): our work must not be published."""

    retryable = True  # the retry finds the other worker's artifact, or takes the lease again


# -- who holds a lease, as a process -----------------------------------------------------------------
@dataclass(frozen=True)
class Host:
    """A host as a process sees it: one kernel boot (boot id), one name, one PID namespace. Two
    processes can see each other's PIDs only when all three agree."""

    hostname: str
    boot_id: str | None  # None: /proc/sys/kernel/random/boot_id unreadable (then the hostname names the host)
    pid_ns: str | None  # the PID namespace ("pid:[4026531836]"); None where /proc has no such link

    def same(self, other: Host) -> bool:
        return (self.hostname, self.boot_id, self.pid_ns) == (other.hostname, other.boot_id, other.pid_ns)


@dataclass(frozen=True)
class Owner:
    """The process holding a lease. `pid` None: no process holds it now (a DAG run between tasks)."""

    host: Host
    pid: int | None
    pid_start: int | None = None  # clock ticks after boot (/proc/<pid>/stat): tells a reused PID apart


def _read(path: str) -> str | None:
    try:
        with open(path, encoding="ascii", errors="replace") as f:
            return f.read().strip() or None
    except OSError:
        return None


@functools.cache
def this_host() -> Host:
    try:
        pid_ns: str | None = os.readlink("/proc/self/ns/pid")
    except OSError:
        pid_ns = None
    return Host(socket.gethostname(), _read("/proc/sys/kernel/random/boot_id"), pid_ns)


def process_start(pid: int) -> int | None:
    """When process `pid` started (clock ticks after boot, field 22 of /proc/<pid>/stat), or None."""
    stat = _read(f"/proc/{pid}/stat")
    if stat is None:
        return None
    try:  # the command name (field 2) is in parentheses and may hold spaces or ")": split after the last
        return int(stat.rpartition(")")[2].split()[19])
    except (IndexError, ValueError):
        return None


@functools.cache
def pid_max() -> int:
    """The largest PID this host gives (/proc/sys/kernel/pid_max; the kernel's limit where unreadable)."""
    text = _read("/proc/sys/kernel/pid_max")
    return int(text) if text is not None and text.isdigit() and 1 < int(text) <= PID_LIMIT else PID_LIMIT


def holder_here(owner: Owner | None) -> bool:
    """Whether `owner` is a process running on this host now, positively identified: a PID above 1
    (`kill 0` and `kill -1` signal groups, 1 is the host's or the container's init) and at most this
    host's pid_max, whose start time is recorded and is the one of the process with that PID now. The
    only process any advice may tell someone to stop."""
    if owner is None or owner.pid is None or owner.pid_start is None or not owner.host.same(this_host()):
        return False
    if not 1 < owner.pid <= pid_max():
        return False
    return process_start(owner.pid) == owner.pid_start


def me(*, bound: bool = True) -> Owner:
    """This process as a lease's owner; `bound=False`: this host, no process (held past our exit)."""
    if not bound:
        return Owner(this_host(), None)
    pid = os.getpid()
    return Owner(this_host(), pid, process_start(pid))


def gone_here(owner: Owner | None) -> str | None:
    """Why `owner`'s process is known dead (a process of this host that no longer exists, or whose PID
    another process has now), or None: alive, another host's, or unknown."""
    if owner is None or owner.pid is None or not owner.host.same(this_host()):
        return None
    try:
        os.kill(owner.pid, 0)
    except ProcessLookupError:
        return f"pid {owner.pid} is gone on this host"
    except PermissionError:  # another user's process: it exists
        pass
    except OSError:
        return None
    start = process_start(owner.pid)
    if owner.pid_start is not None and start is not None and start != owner.pid_start:
        return f"pid {owner.pid} is gone on this host (the pid is another process's now)"
    return None


@dataclass
class Lease:
    key: str
    holder: str
    started: float
    heartbeat: float
    expires: float
    version: str = ""  # the store's version of the lease object as we last wrote it
    owner: Owner | None = None  # None: an old lease (no identity recorded)
    heartbeat_s: float | None = None  # how often its holder renews it
    # Why its record is damaged ("" : it read). Then nothing above is from the record: `holder` is
    # empty, `heartbeat` is when the store last wrote it (0.0: unknown) and `expires` one TTL later.
    damaged: str = ""

    def record(self) -> bytes:
        o = self.owner
        return LeaseRecord(
            key=self.key,
            holder=self.holder,
            started=self.started,
            heartbeat=self.heartbeat,
            expires=self.expires,
            hostname=o.host.hostname if o else None,
            boot_id=o.host.boot_id if o else None,
            pid_ns=o.host.pid_ns if o else None,
            pid=o.pid if o else None,
            pid_start=o.pid_start if o else None,
            heartbeat_s=self.heartbeat_s,
        ).to_bytes()

    @classmethod
    def of(cls, r: LeaseRecord, version: str = "") -> Lease:
        owner = None
        if r.hostname is not None:
            owner = Owner(Host(r.hostname, r.boot_id, r.pid_ns), r.pid, r.pid_start)
        return cls(r.key, r.holder, r.started, r.heartbeat, r.expires, version, owner, r.heartbeat_s)

    @classmethod
    def unreadable(cls, key: str, why: str, version: str, written: float | None) -> Lease:
        """The lease of `key` whose record is damaged (`why`): held for one TTL after the store last wrote
        it (`written`; None: unknown, or a folder no compare-and-swap can replace — stale at once)."""
        at = written if written is not None and version else 0.0
        expires = at + default_ttl_s() if at else 0.0
        return cls(key, "", at, at, expires, version, damaged=why)

    @property
    def live(self) -> bool:
        """Not yet expired (by its clock alone; `state` also knows a dead holder of this host)."""
        return self.expires > time.time()


def state(lease: Lease, now: float | None = None) -> str:
    """LIVE, RELEASED, STALE or DEAD_HERE (see `STATES`); a damaged lease is LIVE or STALE by when it
    was last written (module docstring), never released: it says nothing."""
    now = time.time() if now is None else now
    if lease.damaged:
        return LIVE if lease.expires > now else STALE
    if lease.expires <= 0:
        return RELEASED
    if gone_here(lease.owner):
        return DEAD_HERE
    return LIVE if lease.expires > now else STALE


def held(lease: Lease | None) -> bool:
    """Whether `lease` keeps a waiter waiting: live and not held by a dead process of this host."""
    return lease is not None and state(lease) == LIVE


def holder_id() -> str:
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


def current(store: ArtifactStore, key: str, written: float | None = None) -> Lease | None:
    """The lease of `key` (None: there is none); one whose record is damaged as `Lease.unreadable`,
    held from when the store last wrote it (`written` when the caller listed it, else looked up)."""
    path = layout.lock_entry(key)
    try:
        data, version = LeaseRecord.read_raw(store, path)
    except NotFound:
        return None
    except RecordError as exc:  # a folder where the lease belongs: nothing to compare-and-swap
        return Lease.unreadable(key, str(exc), "", None)
    try:
        record = LeaseRecord.from_bytes(data, store.uri(path)).for_key(key, store.uri(path))
    except RecordError as exc:
        return Lease.unreadable(key, str(exc), version, written or _written(store, path))
    return Lease.of(record, version)


def _written(store: ArtifactStore, path: str) -> float | None:
    """When the store last wrote the object at `path` (its listing's modified time), or None."""
    found = [o for o in store.list(path) if o.key == path]
    return found[0].modified if found else None


def why_free(lease: Lease, now: float | None = None) -> str | None:
    """Why a lease that is not `held` may be taken over, in words (None: it was released)."""
    now = time.time() if now is None else now
    if lease.damaged:
        unchanged = f"unchanged for {now - lease.heartbeat:.0f} s" if lease.heartbeat else "no holder can renew it"
        return f"its record is damaged and {unchanged} ({lease.damaged})"
    if lease.expires <= 0:
        return None
    reason = gone_here(lease.owner)
    if reason is not None:
        return reason
    beat = f" (it renews every {lease.heartbeat_s:g} s)" if lease.heartbeat_s else ""
    return f"silent for {now - lease.heartbeat:.0f} s{beat}"


def try_acquire(
    store: ArtifactStore, key: str, holder: str, ttl_s: float | None = None, *, bound: bool = True
) -> Lease | None:
    """The lease for `key`, new or taken over from a holder that released it, lapsed, or died on this
    host; None while another holds it. `bound=False` (a DAG run's claim, whose process ends at once):
    no process holds it until the run's next task renews it."""
    path = layout.lock_entry(key)
    ttl_s = default_ttl_s() if ttl_s is None else ttl_s
    for _ in range(3):  # the lease object can vanish between our calls (deleted by hand)
        now = time.time()
        lease = Lease(key, holder, now, now, now + ttl_s, owner=me(bound=bound), heartbeat_s=heartbeat_for(ttl_s))
        if store.put_if_absent(lease.record(), path):
            lease.version = store.read_versioned(path)[1]
            return lease
        existing = current(store, key)
        if existing is None:
            continue
        if held(existing):
            return None
        reason = why_free(existing, now)
        if store.replace_if_version(lease.record(), path, existing.version):
            if reason is not None:  # not a clean release: its holder died or stalled
                log.warning("lease %s: took over from %s: %s", key[:12], existing.holder or who(existing), reason)
            lease.version = store.read_versioned(path)[1]
            return lease
        return None  # another waiter took it over first
    return None


def renew(store: ArtifactStore, lease: Lease, ttl_s: float | None = None, *, bound: bool = True) -> Lease:
    """Our lease renewed by this process (`bound=False`: renewed for whoever continues the work)."""
    now = time.time()
    ttl_s = default_ttl_s() if ttl_s is None else ttl_s
    renewed = Lease(lease.key, lease.holder, lease.started, now, now + ttl_s, owner=me(bound=bound))
    renewed.heartbeat_s = heartbeat_for(ttl_s)
    path = layout.lock_entry(lease.key)
    if not store.replace_if_version(renewed.record(), path, lease.version):
        raise LeaseLost(f"lease {lease.key[:12]} was taken over by another worker; this run publishes nothing")
    renewed.version = store.read_versioned(path)[1]
    return renewed


def release(store: ArtifactStore, lease: Lease) -> None:
    """Mark the lease expired (only if still ours), so waiters need not wait out the TTL."""
    done = Lease(lease.key, lease.holder, lease.started, time.time(), 0.0, owner=lease.owner)
    store.replace_if_version(done.record(), layout.lock_entry(lease.key), lease.version)


class LeaseKeeper:
    """Heart-beats a lease on a thread while the work runs; `assert_held` before publishing."""

    def __init__(
        self, store: ArtifactStore, lease: Lease, ttl_s: float | None = None, release_on_exit: bool = True
    ) -> None:
        self.store, self.lease, self.release_on_exit = store, lease, release_on_exit
        self.ttl_s = default_ttl_s() if ttl_s is None else ttl_s
        self.beat_s = heartbeat_for(self.ttl_s)
        self.lost: LeaseLost | None = None
        # One renewal at a time: the heartbeat and `assert_held` renew against `self.lease.version`;
        # interleaved, one would find the other's write and take it for a takeover (a false LeaseLost,
        # after which the run publishes nothing and never releases the lease).
        self._renewing = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._beat, daemon=True, name=f"lease-{lease.key[:8]}")

    def _beat(self) -> None:
        while not self._stop.wait(self.beat_s):
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

    def hand_over(self) -> None:
        """Prove the lease ours and leave it held for the run's next task (whichever process runs it):
        no process of ours holds it from now, so it lives `NEURONFORGE_LEASE_HANDOFF_S` unrenewed."""
        if self.lost is not None:
            raise self.lost
        with self._renewing:
            self.lease = renew(self.store, self.lease, max(self.ttl_s, handoff_s()), bound=False)

    def __enter__(self) -> LeaseKeeper:
        self._thread.start()
        return self

    def __exit__(self, exc_type: object, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        if self.lost is not None:
            return
        if self.release_on_exit:
            release(self.store, self.lease)
        elif exc_type is not None:  # a failed task whose retry continues: this process no longer holds it
            try:
                self.hand_over()
            except Exception as handed:
                log.warning("lease %s: not handed on (%s)", self.lease.key[:12], handed)


@contextmanager
def keeping(
    store: ArtifactStore, lease: Lease, ttl_s: float | None = None, *, hand_on: bool = False
) -> Iterator[LeaseKeeper]:
    """Hold `lease` while the body works — the one lease keeping of the CLI's runner and the DAG's
    tasks: heart-beat it, prove it ours before the work starts, and fail fast (`LeaseLost`) if it was
    taken over. Then release it (the CLI: the build is over, failed or not), or, with `hand_on` (a
    DAG task: the next task renews it), prove it still ours once the body succeeded and leave it
    held (`LeaseKeeper.hand_over`); `keeper.lease` is then its latest version, the one the next holder
    renews from."""
    keeper = LeaseKeeper(store, lease, ttl_s, release_on_exit=not hand_on)
    with keeper:
        keeper.assert_held()
        yield keeper
    if hand_on:  # after the heartbeat stopped: a late beat would bind the lease to this process again
        keeper.hand_over()


def wait_for(store: ArtifactStore, key: str, found, poll_s: float = 5.0, timeout_s: float = WAIT_LIMIT_S):
    """Poll until `found()` returns something (the published artifact) or the lease is no longer
    `held` (holder finished without publishing, lapsed, or died on this host); returns `found()`'s
    value or None."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        hit = found()
        if hit is not None:
            return hit
        if not held(current(store, key)):
            return found()
        time.sleep(poll_s)
    raise NeuronforgeError(
        f"gave up waiting {_span(timeout_s)} for the holder of lease {key[:12]}, which still renews it: "
        f"{advice.command('lease ls', store=store.root_uri)} shows who holds it"
    )


def _span(seconds: float) -> str:
    """A duration as people say it: 45 s, 12 min, 6 h."""
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.0f} h"


def _when(epoch: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(epoch))


def who(lease: Lease) -> str:
    """The holder as people look for it: its host and pid when recorded, else its holder id."""
    if lease.damaged:
        return "nobody known (its record is damaged)"
    o = lease.owner
    if o is None:
        return lease.holder
    return f"{o.host.hostname} pid {o.pid}" if o.pid is not None else f"{lease.holder} (between tasks)"


def waiting_line(store: ArtifactStore, lease: Lease, timeout_s: float = WAIT_LIMIT_S, now: float | None = None) -> str:
    """What a waiter says once: who holds the build, since when, how long it waits at most, and what
    ends the wait early (for a damaged lease, the break of it in `store`)."""
    now = time.time() if now is None else now
    ttl = max(lease.expires - lease.heartbeat, 0.0)
    if lease.damaged:
        return (
            f"the lease of {lease.key[:12]} is damaged ({lease.damaged}); waiting at most {_span(ttl)} after the "
            f"store last wrote it, then this run takes it over; "
            f"{advice.command('lease break', lease.key, store=store.root_uri)} frees it now"
        )
    here = lease.owner is not None and lease.owner.pid is not None and lease.owner.host.same(this_host())
    dies = "exits" if here else "stops renewing"
    return (
        f"{lease.key[:12]} is being built by {who(lease)} since {_when(lease.started)} "
        f"({_span(now - lease.started)} ago); waiting at most {_span(timeout_s)} for its artifact, or until its "
        f"process {dies} (then this run builds it{'' if here else f', {_span(ttl)} after its last renewal'})"
    )


def waiting_beat(lease: Lease | None, key: str, timeout_s: float = WAIT_LIMIT_S, now: float | None = None) -> str:
    """What a waiter's heartbeat says each time (the progress display adds how long it has waited):
    who builds `key`, since when, and the moment the wait ends at the latest."""
    now = time.time() if now is None else now
    by = "an unknown holder" if lease is None else who(lease)
    since = "" if lease is None or lease.damaged else f" since {_when(lease.started)}"
    return f"waiting for {by}{since} to publish {key[:12]} (gives up at {_when(now + timeout_s)})"


# -- seeing and breaking leases (`neuronforge lease ls / break`, the catalog's leases page) -----------
UNREADABLE = "unreadable"  # a `locks/` object that does not read as a lease (its row says why)
KEY_RE = re.compile(r"[0-9a-f]{1,64}")


class LeaseHeld(NeuronforgeError):
    """A lease `lease break` will not break: its holder is a running process of this host."""

    exit_code = ExitCode.REJECTED
    prefix = "lease kept: "


class LeaseChanged(NeuronforgeError):
    """The lease changed while `lease break` was deciding (its holder renewed it, or another took it
    over): nothing was written."""

    http_status = HTTPStatus.CONFLICT  # a lost compare-and-swap


@dataclass(frozen=True)
class Listed:
    """One `locks/` object: its key and lease, or why it does not read."""

    key: str
    lease: Lease | None
    state: str  # one of STATES, or UNREADABLE
    problem: str = ""

    def row(self) -> dict[str, Any]:
        """As `lease ls --json` and the catalog's JSON show it (times in epoch seconds, None if unknown)."""
        lease, owner = self.lease, self.lease.owner if self.lease else None
        return {
            "key": self.key,
            "state": self.state,
            "holder": lease.holder if lease else None,
            "host": owner.host.hostname if owner else None,
            "pid": owner.pid if owner else None,
            "started": lease.started if lease else None,
            "heartbeat": lease.heartbeat if lease else None,
            "expires": lease.expires if lease else None,
            "heartbeat_s": lease.heartbeat_s if lease else None,
            "problem": self.problem or None,
        }


def listing(store: ArtifactStore, start_after: str = "", limit: int = 100) -> list[Listed]:
    """At most `limit` leases, in key order after the key `start_after`: one listing request of
    `locks/` and one read per lease (O(page), whatever the store holds). A lease that vanished
    between the two (released by deletion) is left out; one that does not read is a row saying why."""
    after = layout.lock_entry(start_after) if start_after else ""
    out: list[Listed] = []
    now = time.time()
    for obj in store.list_page(layout.lock_entry("").rstrip("/"), start_after=after, limit=limit):
        # an object below `locks/<key>/` (a file store): a folder where that lease belongs, one row
        key = obj.key.removeprefix(layout.lock_entry("")).partition("/")[0]
        if out and out[-1].key == key:
            continue
        try:
            lease = current(store, key, obj.modified)
        except NeuronforgeError as exc:  # an unsafe key
            out.append(Listed(key, None, UNREADABLE, str(exc)))
            continue
        if lease is not None and lease.damaged:
            out.append(Listed(key, None, UNREADABLE, lease.damaged))
        elif lease is not None:
            out.append(Listed(key, lease, state(lease, now)))
    return out


def find(store: ArtifactStore, ref: str) -> Lease:
    """The lease named by a cache key or a unique prefix of one (one page of `locks/` for a prefix)."""
    if not KEY_RE.fullmatch(ref):
        raise InvalidInput(
            f"lease key {ref!r} is not a cache key (up to 64 lowercase hex characters): "
            f"{advice.command('lease ls', store=store.root_uri)} lists the leases and their keys"
        )
    if len(ref) == 64:
        matches = [ref]
    else:  # every key starting with `ref` sorts right after it: the first page holds them
        page = store.list_page(layout.lock_entry("").rstrip("/"), start_after=layout.lock_entry(ref), limit=2)
        matches = {o.key.removeprefix(layout.lock_entry("")).partition("/")[0] for o in page}  # a folder: its key
        matches = sorted(k for k in matches if k.startswith(ref))
    if len(matches) > 1:
        raise InvalidInput(f"lease key {ref!r} is the start of more than one lease's key: give more of it")
    lease = current(store, matches[0]) if matches else None
    if lease is None:
        raise InvalidInput(
            f"no lease for key {ref!r} in {store.uri(layout.lock_entry(''))}: "
            f"{advice.command('lease ls', store=store.root_uri)} lists the leases"
        )
    return lease


def refuse_to_break(lease: Lease, now: float | None = None) -> None:
    """A live lease whose holder is a running process of this host is not broken: stop that run. The
    advice names `kill PID` only for a process positively identified as the holder (`holder_here`): a
    PID read from a record is data, and `kill -1` run as told signals every process of the user. A
    lease whose holder cannot be identified that way (its record damaged, no start time recorded, a
    PID that is another process's now) is not refused: breaking it is what the user asked."""
    now = time.time() if now is None else now
    o = lease.owner
    if lease.damaged or state(lease, now) != LIVE or o is None or o.pid is None or not o.host.same(this_host()):
        return
    if o.pid == 1 and o.pid_start is not None and process_start(1) == o.pid_start:
        raise LeaseHeld(
            f"the lease of {lease.key[:12]} is held by the first process of this host or container (pid 1), "
            f"which is running (last renewal {_span(now - lease.heartbeat)} ago): stop that run (its container) "
            "instead of breaking its lease"
        )
    if not holder_here(o):
        return
    raise LeaseHeld(
        f"the lease of {lease.key[:12]} is held by pid {o.pid} on this host, which is running (last renewal "
        f"{_span(now - lease.heartbeat)} ago): stop that run (kill {o.pid}) instead of breaking its lease"
    )


def break_lease(store: ArtifactStore, lease: Lease) -> None:
    """Rewrite `lease` as released, if it is still at the version read (compare-and-swap): a waiter
    builds at once, and its holder, should it still be running, fails its next renewal and publishes
    nothing. A live holder of this host is refused (`refuse_to_break`); a renewal meanwhile wins. A
    damaged lease is rewritten as a released lease of its file's key (a folder where it belongs, which
    no compare-and-swap replaces, is removed)."""
    refuse_to_break(lease)
    path = layout.lock_entry(lease.key)
    if lease.damaged and not lease.version:
        store.delete_prefix(path)
        return
    holder = lease.holder if not lease.damaged else f"lease break:{holder_id()}"
    now = time.time()
    done = Lease(lease.key, holder, lease.started or now, now, 0.0, owner=lease.owner)
    if not store.replace_if_version(done.record(), path, lease.version):
        raise LeaseChanged(
            f"the lease of {lease.key[:12]} changed while deciding (its holder renewed it, or another run took it "
            f"over): not broken; {advice.command('lease ls', store=store.root_uri)} shows it now"
        )
