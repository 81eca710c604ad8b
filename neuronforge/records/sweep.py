"""The sweep's record file: `<out>.records.json` beside the cache-config file (and in the store for
the sweep DAG), every candidate the sweep decided with its outcome, so a resumed or repeated sweep
never repeats a failure (`neuronforge.farm.sweep.records` rewrites it after each candidate)."""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field

from neuronforge.records.base import StoredRecord
from neuronforge.records.parts import Seconds


class SweepSpace(BaseModel):
    model_config = ConfigDict(frozen=True)

    tps: list[int]
    batch_sizes: list[int]
    seq_lens: list[int]


class DecidedCandidate(BaseModel):
    """One candidate (tp, batch, sequence length) and how the sweep decided it."""

    model_config = ConfigDict(frozen=True)

    tensor_parallel_size: int
    batch_size: int
    sequence_length: int
    outcome: Literal["valid", "failed", "skipped"]
    by: str  # tried | rule | planner | inferred | resume | earlier run
    reason: str = ""
    seconds: Seconds = 0.0


class SweepRecords(StoredRecord):
    KIND: ClassVar[str] = "sweep record file"
    SCHEMA: ClassVar[int] = 1
    MAX_BYTES: ClassVar[int] = 16 * 1024 * 1024  # ~200 bytes per candidate decided

    # the sweep it records: another model, instance or profile in the same file is refused
    model: str
    instance: str
    profile: str
    method: str
    space: SweepSpace
    updated_at: str  # UTC, ISO 8601
    finished: bool = False
    candidates: list[DecidedCandidate] = Field(default_factory=list)
