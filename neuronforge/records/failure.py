"""The failure record: `failures/<key>.json`, why the last build of a key failed (`neuronforge.artifacts.failures`).
It has never stored a version; records from before the model, target, profile and instance were kept
read with those empty."""

from __future__ import annotations

from typing import ClassVar

from neuronforge.records.base import StoredRecord


class FailureRecord(StoredRecord):
    KIND: ClassVar[str] = "failure record"
    SCHEMA: ClassVar[int] = 1
    VERSION_FIELD: ClassVar[str | None] = None

    key: str
    stage: str
    error: str  # "<ExceptionType>: <message>", truncated, never credentials
    run_id: str
    at: str  # UTC, ISO 8601
    # What was being built, so a failure that never published shows under its model and target.
    model: str = ""
    target: str = ""  # target slug
    profile: str = ""  # profile ref (name@version)
    instance: str = ""
