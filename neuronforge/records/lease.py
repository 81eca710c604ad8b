"""The compile lease: `locks/<key>` in the store, who compiles a key and until when
(`neuronforge.artifacts.leases`).

Schema 2 adds who the holder is as a process, so that a waiter on the holder's own host can tell a
dead holder at once instead of waiting out its expiry: the host's identity (`hostname`, `boot_id`
from /proc/sys/kernel/random/boot_id — None where unreadable, then the hostname alone names the host
— and `pid_ns`, the PID namespace, so two containers sharing a kernel are not one host), the process
(`pid`, and `pid_start`, its start time in clock ticks since boot from /proc/<pid>/stat, so a PID the
kernel reused is not taken for the holder), and `heartbeat_s`, how often the holder renews. `pid` is
None while no process holds the lease (a DAG run between two tasks): then only its expiry counts.

Old leases (schema 1: no `schema_version`, no identity; written by workers of the previous release)
still read, with every identity field None: a waiter treats them as held on another host, so they are
taken over only after their expiry, as that release's waiters do. New leases keep every field the
previous release reads, with the same meaning: its readers (`LeaseRecord` ignoring unknown keys) read a
schema-2 lease as the schema-1 one it contains, and wait for its expiry.

Its numbers are bounded (`parts`): times between 2000 and 2100 (`expires` 0.0 once released), a PID the
kernel could give, a start time and a heartbeat period that are whole and finite. A lease outside them
is damaged, as one whose `key` is not the cache key of its file (`for_key`): nobody wrote it, so nothing
in it is trusted — see `neuronforge.artifacts.leases` for what waiters and `lease break` do with one.
"""

from __future__ import annotations

import json
from typing import Any, ClassVar

from neuronforge.records.base import RecordError, StoredRecord
from neuronforge.records.parts import Count, Expiry, Pid, Seconds, Timestamp


def _from_v1(data: dict[str, Any]) -> dict[str, Any]:
    """A schema-1 lease: no holder identity (every identity field reads as None)."""
    return data


class LeaseRecord(StoredRecord):
    KIND: ClassVar[str] = "compile lease"
    SCHEMA: ClassVar[int] = 2
    UNVERSIONED: ClassVar[int | None] = 1  # leases stored no version before schema 2
    UPGRADES: ClassVar[dict] = {1: _from_v1}
    MAX_BYTES: ClassVar[int] = 64 * 1024  # ~400 bytes as written; rewritten and read on every heartbeat

    key: str  # the cache key compiled under the lease
    holder: str  # host:pid:nonce of the worker holding it (a DAG run's names the run and task too)
    started: Timestamp  # epoch seconds
    heartbeat: Timestamp  # last renewal
    expires: Expiry  # 0.0 once released
    # schema 2: the holder as a process (None: unknown, an old lease, or no process holds it now)
    hostname: str | None = None
    boot_id: str | None = None
    pid_ns: str | None = None
    pid: Pid | None = None
    pid_start: Count | None = None  # clock ticks after boot
    heartbeat_s: Seconds | None = None

    def for_key(self, key: str, where: str) -> LeaseRecord:
        """This lease, if it is the lease of `key` (its file's name); one naming another key was not
        written there by a holder of `key` (copied, or forged): a damaged record."""
        if self.key != key:
            raise RecordError(f"{where}: {self.KIND} is damaged: it names key {self.key[:64]!r}, not its file's {key}")
        return self

    def to_bytes(self) -> bytes:
        """Compact, as leases were always written (a lease is rewritten on every heartbeat)."""
        return json.dumps(self.stored_json(), sort_keys=True).encode()
