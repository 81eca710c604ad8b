"""Failed builds, recorded in the store so that whoever scheduled the build can say why it failed.

A run that fails after the cache key is known writes `failures/<key>.json` (the stage, the error's
type and message, the Airflow run that failed, when). It is advisory: the published manifest always
wins, so a later successful build makes an old failure record irrelevant without deleting it.
Messages are truncated and never carry credentials: the stages' errors name paths and settings,
not secrets.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass
from typing import Any

from neuronforge import layout
from neuronforge.stores.base import ArtifactStore, NotFound, StoreError

MAX_MESSAGE = 2000


@dataclass(frozen=True)
class BuildFailure:
    key: str
    stage: str
    error: str  # "<ExceptionType>: <message>"
    run_id: str
    at: str  # UTC, ISO 8601

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def record_failure(store: ArtifactStore, key: str, stage: str, exc: BaseException, run_id: str = "") -> BuildFailure:
    message = f"{type(exc).__name__}: {exc}"
    if len(message) > MAX_MESSAGE:
        message = message[: MAX_MESSAGE - 1] + "…"
    failure = BuildFailure(key, stage, message, run_id, time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()))
    store.write_json(layout.failure_entry(key), failure.to_json())
    return failure


def read_failure(store: ArtifactStore, key: str) -> BuildFailure | None:
    try:
        data = store.read_json(layout.failure_entry(key))
    except (NotFound, StoreError, ValueError):
        return None
    try:
        return BuildFailure(**{f: data[f] for f in ("key", "stage", "error", "run_id", "at")})
    except (KeyError, TypeError):
        return None
