"""The recompile report: `recompile/<stamp>.json` (beside its Markdown), what the recompile-on-upgrade
run found stale, triggered and saw finish (`neuronforge.farm.recompile.Report` builds it).

Version 1 (before e4c7f7d) keyed the toolchains by backend and named no profile per target; no
profile version can be derived from a backend, so version 1 reports are refused as too old rather
than lifted with guessed fields (`OLDEST = 2`): they were written for people, in the Markdown beside.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, Field

from neuronforge.records.base import StoredRecord


class SpeedAgainst(BaseModel):
    """A rebuilt or re-smoked build against the build `channel` serves for its model and profile line
    (`farm.speed.against_stable`): the comparison's verdict (regression, numerics differ, no regression,
    not comparable; `not compared` when there was nothing to compare) and its one sentence."""

    model_config = ConfigDict(frozen=True)

    channel: str
    base: str = ""  # the key the channel points to ("": none, or not read)
    verdict: str
    summary: str = ""


class ReportedTarget(BaseModel):
    """One catalog entry × target (`recompile.TargetState`, field for field)."""

    model_config = ConfigDict(frozen=True)

    order: int  # position in the catalog: the rebuild priority
    source: str  # as written in the catalog
    line: int
    slug: str
    target: dict[str, Any]  # the trigger form's spelling (`form_targets.form_target`)
    status: str  # fresh | stale | unavailable | unresolved
    key: str = ""
    pinned: str = ""
    profile: str = ""
    published_for: list[str] = Field(default_factory=list)
    stale_for: list[str] = Field(default_factory=list)
    detail: str = ""
    run_id: str = ""
    outcome: str = ""  # rebuilt | failed | running | queued
    outcome_detail: str = ""
    upgrade: dict[str, Any] | None = None  # `upgrades.Upgrade`: rebuild / current / stay / pinned / … and why
    migrated_from: str = ""  # a migration's row: the slug and profile of the target it moves off
    # Its speed against `stable` (rebuilt or re-smoked rows; None: neither, or a report of schema 3)
    speed: SpeedAgainst | None = None


def _v2_to_v3(data: dict[str, Any]) -> dict[str, Any]:
    """Version 2 reports aimed at no SDK release and decided nothing per target: they say so."""
    return {**data, "release": ""}


def _v3_to_v4(data: dict[str, Any]) -> dict[str, Any]:
    """Version 3 reports compared no build's speed: each row says so (`speed` None)."""
    targets = data.get("targets")
    if not isinstance(targets, list):
        return data  # not a report's rows: validation names the field
    return {**data, "targets": [{**t, "speed": None} if isinstance(t, dict) else t for t in targets]}


class RecompileReport(StoredRecord):
    KIND: ClassVar[str] = "recompile report"
    # 2: per-target profile, published_for and stale_for; toolchains keyed by profile ref.
    # 3: the SDK release the run aimed at, and per target the upgrade's decision (and migration rows).
    # 4: per rebuilt or re-smoked target, its speed against `stable` (`SpeedAgainst`).
    SCHEMA: ClassVar[int] = 4
    OLDEST: ClassVar[int] = 2
    UPGRADES: ClassVar[dict[int, Callable[[dict[str, Any]], dict[str, Any]]]] = {2: _v2_to_v3, 3: _v3_to_v4}
    MAX_BYTES: ClassVar[int] = 64 * 1024 * 1024  # a row per catalog target: ~1 KiB each

    stamp: str  # YYYY-MM-DDTHH-MM-SSZ
    release: str = ""  # the SDK release the upgrade aimed at ("": a version 2 report)
    generated_at: str
    catalog: str
    store: str
    profiles: dict[str, dict[str, Any]]  # profile ref -> its description, or {"ref", "registered": False}
    toolchains: dict[str, Any]  # profile ref -> the toolchain its workers reported (JSON), or why none
    sdk_release: dict[str, Any] | None = None
    runs: list[str] = Field(default_factory=list)
    counts: dict[str, int]
    targets: list[ReportedTarget]

    def to_bytes(self) -> bytes:
        """Indented in field order, as reports were always written (people read them)."""
        return (json.dumps(self.stored_json(), indent=2) + "\n").encode()
