"""The vLLM cache manifest: `launch/vllm-cache.json` in an artifact built for the vLLM Neuron plugin,
what its server needs from the store to start without compiling and what it was compiled with
(`neuronforge.compilation.vllm_cache` keeps the entries' store side)."""

from __future__ import annotations

from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, Field

from neuronforge.records.base import StoredRecord
from neuronforge.records.tree import StoredFile


class EntryRecord(BaseModel):
    """One cache entry as the manifest lists it: its key (32 hex, the folder's name) and every
    published file (path inside the entry, size, sha256); the marker is among them, copied last."""

    model_config = ConfigDict(frozen=True)

    key: str
    files: list[StoredFile]


class CacheManifest(StoredRecord):
    """Every entry and NKI result the server loads, with the versions, `vllm serve` argv and env, the
    platform target and route it was compiled for."""

    KIND: ClassVar[str] = "vLLM cache manifest"
    SCHEMA: ClassVar[int] = 1
    MAX_BYTES: ClassVar[int] = 64 * 1024 * 1024  # every cache entry with every file

    profile: str  # name@version
    store_prefix: str  # URI of vllm-neuron-cache/<version>
    image: str = ""
    versions: dict[str, str]
    target: str  # NEURON_PLATFORM_TARGET_OVERRIDE: trn2 | trn3
    route: str  # native | xla
    argv: list[str]  # `vllm serve` arguments after `serve`, the model folder as $MODEL_DIR
    env: dict[str, str]  # the serving environment the graphs depend on
    entries: list[EntryRecord] = Field(default_factory=list)
    nki: list[StoredFile] = Field(default_factory=list)  # nki/<key>.json files
    built: dict[str, Any] = Field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        """Entries and NKI files sorted (the manifest is compared and hashed as bytes), built as given."""
        out = super().to_json()
        out["entries"] = sorted(out["entries"], key=lambda e: e["key"])
        out["nki"] = sorted(out["nki"], key=lambda f: (f["path"], f["size"], f["sha256"]))
        return out
