"""What every folder the store holds under a `MANIFEST.json` lists: its files (path, size, sha256).

The checkpoint manifest, the quantized manifest and the build's payload manifest each add their own
fields to this list; `neuronforge.artifacts.localcache` moves any such folder between the store and a host and
needs only the list, whatever the kind and version of the manifest around it (`FileListing`).
"""

from __future__ import annotations

from typing import ClassVar

from pydantic import BaseModel, ConfigDict, ValidationError

from neuronforge.common import stored_json
from neuronforge.records.base import RecordError, invalid
from neuronforge.records.parts import Size


class StoredFile(BaseModel):
    """One file of a stored folder: its path relative to the folder ('/'-separated), size, sha256."""

    model_config = ConfigDict(frozen=True)

    path: str
    size: Size
    sha256: str


class FileListing(BaseModel):
    """The file list of any tree manifest (other fields ignored, no version needed): what moving the
    folder needs, and all it needs."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    files: list[StoredFile]

    MAX_BYTES: ClassVar[int] = 64 * 1024 * 1024  # the largest manifest it reads (`PayloadManifest.MAX_BYTES`)

    @classmethod
    def from_bytes(cls, raw: bytes, where: str = "") -> FileListing:
        """The list in `raw`, read under the bounds of every stored record (`common.stored_json`)."""
        at = f"{where}: " if where else ""
        try:
            return cls.model_validate(stored_json.loads(raw, cls.MAX_BYTES))
        except ValidationError as exc:
            raise invalid(exc, at, "not a readable file list", "(manifest)") from None
        except ValueError as exc:  # not JSON, or outside the bounds
            raise RecordError(f"{at}not a readable file list: {exc}") from None
