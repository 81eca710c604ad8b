"""What every folder the store holds under a `MANIFEST.json` lists: its files (path, size, sha256).

The checkpoint manifest, the quantized manifest and the build's payload manifest each add their own
fields to this list; `neuronforge.artifacts.localcache` moves any such folder between the store and a host and
needs only the list, whatever the kind and version of the manifest around it (`FileListing`).
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from neuronforge.records.base import invalid


class StoredFile(BaseModel):
    """One file of a stored folder: its path relative to the folder ('/'-separated), size, sha256."""

    model_config = ConfigDict(frozen=True)

    path: str
    size: int = Field(ge=0)
    sha256: str


class FileListing(BaseModel):
    """The file list of any tree manifest (other fields ignored, no version needed): what moving the
    folder needs, and all it needs."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    files: list[StoredFile]

    @classmethod
    def from_bytes(cls, raw: bytes, where: str = "") -> FileListing:
        try:
            return cls.model_validate_json(raw)
        except ValidationError as exc:
            raise invalid(exc, f"{where}: " if where else "", "not a readable file list", "(manifest)") from None
