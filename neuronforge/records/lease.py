"""The compile lease: `locks/<key>` in the store, who compiles a key and until when
(`neuronforge.artifacts.leases`). Leases have never stored a version: a lease record without one is this
shape, and one is written the same way, so workers of the previous release read it during an
upgrade (they built the lease from every key the object holds)."""

from __future__ import annotations

import json
from typing import ClassVar

from neuronforge.records.base import StoredRecord


class LeaseRecord(StoredRecord):
    KIND: ClassVar[str] = "compile lease"
    SCHEMA: ClassVar[int] = 1
    VERSION_FIELD: ClassVar[str | None] = None

    key: str  # the cache key compiled under the lease
    holder: str  # host:pid:nonce of the worker holding it
    started: float  # epoch seconds
    heartbeat: float  # last renewal
    expires: float  # 0.0 once released

    def to_bytes(self) -> bytes:
        """Compact, as leases were always written (a lease is rewritten on every heartbeat)."""
        return json.dumps(self.to_json(), sort_keys=True).encode()
