"""Failed builds, recorded in the store so that whoever scheduled the build can say why it failed.

A run that fails after the cache key is known writes `failures/<key>.json` (the stage, the error's
type and message, the Airflow run that failed, when). It is advisory: the published manifest always
wins, so a later successful build makes an old failure record irrelevant without deleting it.
Messages are truncated and never carry credentials: the stages' errors name paths and settings,
and what a library's error quotes (a presigned URL, a URI with userinfo) is masked by the one rule
(`common.secrets.mask_credentials`) before it is stored.
"""

from __future__ import annotations

import time
from typing import Any

from neuronforge.artifacts import layout
from neuronforge.common.secrets import mask_credentials
from neuronforge.records.failure import FailureRecord
from neuronforge.spec.source import model_name
from neuronforge.stores.base import ArtifactStore, NotFound, StoreError

MAX_MESSAGE = 2000


def names_of(state: Any = None) -> dict[str, str]:
    """What a build (a `BuildState`, or None) is called in the failure record and the farm index:
    its model, target slug, profile and instance — the columns the catalog filters on."""
    if state is None:
        return {}
    target = state.target
    return {
        "model": model_name(state.model),
        "target": target.slug,
        "profile": target.profile,
        "instance": target.instance.name,
    }


def write_failure(
    store: ArtifactStore, key: str, stage: str, exc: BaseException, run_id: str = "", state: Any = None
) -> FailureRecord:
    """Write `failures/<key>.json` (the farm index is told by `farm_index.record_failure`, which
    callers use). `state` (a BuildState) names the model, target and profile the failure belongs to."""
    message = mask_credentials(f"{type(exc).__name__}: {exc}")
    if len(message) > MAX_MESSAGE:
        message = message[: MAX_MESSAGE - 1] + "…"
    at = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    failure = FailureRecord(key=key, stage=stage, error=message, run_id=run_id, at=at, **names_of(state))
    failure.write(store, layout.failure_entry(key))
    return failure


def read_failure(store: ArtifactStore, key: str) -> FailureRecord | None:
    """The failure record of `key`, or None when there is none or it cannot be read (it is advisory)."""
    try:
        return FailureRecord.read(store, layout.failure_entry(key))
    except (NotFound, StoreError):
        return None
