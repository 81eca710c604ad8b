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
from neuronforge.source import model_name
from neuronforge.stores.base import ArtifactStore, NotFound, StoreError

MAX_MESSAGE = 2000


@dataclass(frozen=True)
class BuildFailure:
    key: str
    stage: str
    error: str  # "<ExceptionType>: <message>"
    run_id: str
    at: str  # UTC, ISO 8601
    # What was being built, so a failure that never published can be shown under its model and
    # target (the artifact catalog page); empty in records written before they were kept.
    model: str = ""
    target: str = ""  # target slug
    profile: str = ""  # profile ref (name@version)
    instance: str = ""

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def write_failure(
    store: ArtifactStore, key: str, stage: str, exc: BaseException, run_id: str = "", state: Any = None
) -> BuildFailure:
    """Write `failures/<key>.json` (the farm index is told by `farm_index.record_failure`, which
    callers use). `state` (a BuildState) names the model, target and profile the failure belongs to."""
    message = f"{type(exc).__name__}: {exc}"
    if len(message) > MAX_MESSAGE:
        message = message[: MAX_MESSAGE - 1] + "…"
    what = {}
    if state is not None:
        target = state.target
        what = {
            "model": model_name(state.model),
            "target": target.slug,
            "profile": target.profile,
            "instance": target.instance.name,
        }
    failure = BuildFailure(key, stage, message, run_id, time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), **what)
    store.write_json(layout.failure_entry(key), failure.to_json())
    return failure


def read_failure(store: ArtifactStore, key: str) -> BuildFailure | None:
    try:
        data = store.read_json(layout.failure_entry(key))
    except (NotFound, StoreError, ValueError):
        return None
    try:
        known = {f: data[f] for f in ("key", "stage", "error", "run_id", "at")}
        return BuildFailure(**known, **{f: str(data.get(f, "")) for f in ("model", "target", "profile", "instance")})
    except (KeyError, TypeError):
        return None
