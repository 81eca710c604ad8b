"""The index entry: `index/<key>.json`, the pointer from a cache key to its artifact's manifest.

Created by the publish stage with `put_if_absent` after the manifest; `published.lookup` follows it
and trusts only a complete manifest. Entries of every release name the manifest's key; `prefix`
(the artifact's folder) is derived from it when absent.
"""

from __future__ import annotations

from typing import ClassVar

from pydantic import StrictStr

from neuronforge.records.base import StoredRecord
from neuronforge.records.parts import Text


class IndexEntry(StoredRecord):
    KIND: ClassVar[str] = "index entry"
    SCHEMA: ClassVar[int] = 1
    UNVERSIONED: ClassVar[int | None] = 1  # its readers never required the field: hand-made ones read

    manifest: StrictStr  # the manifest's store key
    cache_key: Text = ""
    prefix: Text = ""  # the artifact's folder

    @property
    def artifact_prefix(self) -> str:
        return self.prefix or self.manifest.rpartition("/")[0]
