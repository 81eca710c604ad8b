"""The toolchain record: `toolchains/<name>@<version>.json`, what a Neuron profile's toolchain queue
last detected (`neuronforge.pipeline.toolchain_records`). A hint for computing keys without waking that queue."""

from __future__ import annotations

from typing import Any, ClassVar

from neuronforge.records.base import StoredRecord


class ToolchainRecord(StoredRecord):
    KIND: ClassVar[str] = "toolchain record"
    SCHEMA: ClassVar[int] = 1

    profile: str  # name@version
    # `request.Toolchain.to_json()` (the request layer, above this package, owns its shape and reads it)
    toolchain: dict[str, Any]
    run_id: str = ""
    recorded_at: str  # UTC, ISO 8601
