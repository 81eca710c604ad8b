"""The damage record: `damaged/<key>.json`, why a published artifact no longer is what its index pointer
promises — its manifest gone or unreadable, a file it lists missing or of another size or sha256 — who
noticed (`show`, the pipeline's lookup, `verify`, a channel move, the scrub) and when.

Written beside the farm index's "damaged" note (`neuronforge.artifacts.farm_index.damage`), so a rebuild of
the index from the store keeps showing it; a later publish of the same key deletes it. Never written
inside the artifact's folder: published data is never rewritten.
"""

from __future__ import annotations

from typing import ClassVar

from pydantic import StrictStr

from neuronforge.records.base import StoredRecord
from neuronforge.records.parts import Text


class DamageRecord(StoredRecord):
    KIND: ClassVar[str] = "damage record"
    SCHEMA: ClassVar[int] = 1

    key: StrictStr  # the artifact's full cache key
    reason: Text  # one line: what is wrong ("manifest gone: artifacts/.../manifest.json")
    at: Text  # UTC, ISO 8601
    by: Text = ""  # what noticed it: show, lookup, verify, promote, scrub, ls --check, catalog
    manifest: Text = ""  # the manifest key the index pointer names
    checked: Text = "sizes"  # how it was found: "sizes" (a listing) or "sha256" (`verify` downloaded it)
    # What the artifact was, when known (its manifest, or the build that looked it up): the columns
    # the catalog sorts and filters on, so the row stays where it was.
    model: Text = ""
    profile: Text = ""
    target: Text = ""
    instance: Text = ""

    def summary(self) -> dict[str, str]:
        """The part of a farm-index row it sets (`LogRecord.damage`)."""
        return {"reason": self.reason, "at": self.at, "by": self.by, "manifest": self.manifest}
