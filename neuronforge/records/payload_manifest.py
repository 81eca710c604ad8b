"""The payload manifest: `builds/<key>/<digest>/manifest.json`, the tested payload as staged.

The compile host assembles the artifact's payload and stages it in the store (`localcache.publish_tree`)
under a folder named for this manifest's sha256, which `localcache.TreeRef` pins: the smoke test loads
exactly that payload, and `stages.publish` copies the files it lists into the artifact (after checking
the manifest is still the one the ref pins).
"""

from __future__ import annotations

from typing import Any, ClassVar

from pydantic import Field

from neuronforge.records.base import StoredRecord
from neuronforge.records.parts import FileEntry, Text


class PayloadManifest(StoredRecord):
    KIND: ClassVar[str] = "payload manifest"
    SCHEMA: ClassVar[int] = 1
    # Its reader (publish) only ever needed the files: a tree staged by hand or by a test reads as 1.
    UNVERSIONED: ClassVar[int | None] = 1
    MAX_BYTES: ClassVar[int] = 64 * 1024 * 1024  # as the artifact manifest, whose files and launch text it holds

    files: list[FileEntry]
    cache_key: Text = ""
    # The launch files' text (`launch/<name>` -> text, each up to `artifact_manifest.LAUNCH_TEXT_LIMIT`):
    # read on the compile host, which has them, so that publish records them in the artifact's manifest
    # (`launch_text`) without downloading them. Empty: none, or a payload staged before it was recorded.
    launch: dict[str, Text] = Field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        """As stored; without `launch` when there is none (a payload without launch files stages as before)."""
        out = super().to_json()
        if not out.get("launch"):
            out.pop("launch", None)
        return out
