"""Where the integrity scrub stopped: `scrub/state.json` (`neuronforge.farm.scrub`). The next scrub
— the daily DAG's, or `verify --store --repair` without `--cursor` — starts after `cursor`; an empty
cursor starts a new pass at the first index pointer."""

from __future__ import annotations

from typing import ClassVar

from pydantic import Field

from neuronforge.records.base import StoredRecord
from neuronforge.records.parts import AnyObject, Text


class ScrubState(StoredRecord):
    KIND: ClassVar[str] = "scrub state"
    SCHEMA: ClassVar[int] = 1

    cursor: Text = ""  # the last cache key checked ("" : the last pass is complete)
    at: Text = ""  # UTC, ISO 8601, of the scrub that wrote it
    last: AnyObject = Field(default_factory=dict)  # that scrub's counts (`ScrubReport.to_json`)
