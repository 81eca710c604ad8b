"""`BuildFinishedTrigger`: the wait of a target another run is building (`operators.build_claim`),
in the triggerer, without a worker slot. Its classpath before this module was
`neuronforge_airflow.operators.build_claim.BuildFinishedTrigger`, which still imports it (a task deferred
by an earlier release is stored in the database under that path)."""

from __future__ import annotations

from typing import Any

from neuronforge.artifacts import leases
from neuronforge_airflow.triggers.polling import PollingTrigger


def _published(store_uri: str, key: str) -> dict[str, Any] | None:
    from neuronforge.artifacts.published import lookup
    from neuronforge.pipeline.buildstate import PublishedRef
    from neuronforge_airflow.hooks.store import open_store

    hit = lookup(open_store(store_uri), key)
    return None if hit is None else PublishedRef.of(hit).model_dump()


def _lease_live(store_uri: str, key: str) -> bool:
    from neuronforge_airflow.hooks.store import open_store

    return leases.held(leases.current(open_store(store_uri), key))


class BuildFinishedTrigger(PollingTrigger):
    """Fires when the artifact for `key` is published, or when nobody holds a live lease on it."""

    FIELDS = ("store_uri", "key", "poll_s")

    def __init__(self, store_uri: str, key: str, poll_s: float = 10.0) -> None:
        super().__init__()
        self.store_uri, self.key, self.poll_s = store_uri, key, poll_s

    def poll(self) -> dict[str, Any] | None:
        hit = _published(self.store_uri, self.key)
        if hit is not None:
            return {"status": "published", "hit": hit}
        if not _lease_live(self.store_uri, self.key):
            return {"status": "free"}
        return None
