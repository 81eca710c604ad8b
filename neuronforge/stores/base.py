"""The `ArtifactStore` interface and its atomicity contract.

Every call below is safe to repeat. What each guarantees to a concurrent reader:

- `put_file`, `put_bytes`, `write_json`: the object appears whole or not at all (file store: write
  to a temporary name in the same folder, then rename; S3: a single PUT or a completed multipart
  upload is atomic). An existing object is replaced whole.
- `put_tree`, `get_tree`: per object atomic, NOT atomic as a whole. Writers therefore upload data
  first and a manifest last, and readers trust only what a manifest lists.
- `put_if_absent`: atomic create-if-missing; exactly one of several concurrent callers gets True
  (file store: hard link of a complete temporary file, which fails if the name exists; S3:
  conditional PUT with `If-None-Match: *`, answered 412 when the key exists).
- `delete_prefix`: removes objects one by one (not atomic); delete manifests before data.
"""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from neuronforge.errors import StoreError


class NotFound(StoreError, KeyError):
    """The key does not exist in the store."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0]) if self.args else "not found"


@dataclass(frozen=True)
class ObjectInfo:
    key: str  # relative to the store root
    size: int
    # What the store says identifies this version of the object without reading it (S3: the
    # ETag; file store: empty). Pins an s3:// checkpoint from its listing alone.
    etag: str = ""


def clean_key(key: str) -> str:
    """Reject keys that could escape the store root or alias another key."""
    key = key.strip("/")
    parts = key.split("/")
    if not key or any(p in ("", ".", "..") for p in parts):
        raise StoreError(f"invalid store key {key!r}")
    return key


class ArtifactStore(ABC):
    """A flat key space of immutable-once-published objects, addressed by '/'-separated keys."""

    @property
    @abstractmethod
    def root_uri(self) -> str: ...

    def uri(self, key: str = "") -> str:
        key = key.strip("/")
        return f"{self.root_uri.rstrip('/')}/{key}" if key else self.root_uri

    @abstractmethod
    def put_file(self, local: Path, key: str) -> None: ...

    @abstractmethod
    def get_file(self, key: str, local: Path) -> None: ...

    def get_files(self, pairs: list[tuple[str, Path]]) -> None:
        """Download several objects (key -> local path); stores override it to transfer in parallel."""
        for key, local in pairs:
            self.get_file(key, local)

    @abstractmethod
    def put_bytes(self, data: bytes, key: str) -> None: ...

    @abstractmethod
    def get_bytes(self, key: str) -> bytes: ...

    @abstractmethod
    def exists(self, key: str) -> bool: ...

    @abstractmethod
    def list(self, prefix: str = "") -> list[ObjectInfo]:
        """Every object under `prefix` (a folder-like prefix; `a/b` does not match `a/bc`), sorted."""

    @abstractmethod
    def delete_prefix(self, prefix: str) -> int:
        """Delete every object under `prefix`; returns how many were deleted."""

    @abstractmethod
    def put_if_absent(self, data: bytes, key: str) -> bool:
        """Create `key` with `data` unless it exists. True if this call created it."""

    @abstractmethod
    def read_versioned(self, key: str) -> tuple[bytes, str]:
        """The object's bytes and an opaque version that changes with every write (S3: the ETag)."""

    @abstractmethod
    def replace_if_version(self, data: bytes, key: str, version: str) -> bool:
        """Overwrite `key` only if it is still at `version` (compare-and-swap). True if replaced."""

    @abstractmethod
    def put_tree(self, local_dir: Path, prefix: str, exclude: tuple[str, ...] = ()) -> list[ObjectInfo]:
        """Upload every file under `local_dir` to `prefix/<relative path>`; `exclude` holds
        relative paths to skip (e.g. a manifest the caller writes last)."""

    @abstractmethod
    def get_tree(self, prefix: str, local_dir: Path) -> list[ObjectInfo]:
        """Download every object under `prefix` into `local_dir`, keeping relative paths."""

    # -- JSON helpers -------------------------------------------------------------------------
    def write_json(self, key: str, obj: Any) -> None:
        self.put_bytes(json.dumps(obj, indent=2, sort_keys=True).encode() + b"\n", key)

    def read_json(self, key: str) -> Any:
        data = self.get_bytes(key)
        try:
            return json.loads(data)
        except json.JSONDecodeError as exc:
            raise StoreError(f"{self.uri(key)} is not valid JSON: {exc}") from None


def local_files(local_dir: Path, exclude: tuple[str, ...] = ()) -> list[tuple[Path, str]]:
    """(absolute path, relative key) of every file under a folder, sorted, skipping `exclude`."""
    if not local_dir.is_dir():
        raise StoreError(f"{local_dir} is not a folder")
    out = []
    for path in sorted(p for p in local_dir.rglob("*") if p.is_file()):
        rel = path.relative_to(local_dir).as_posix()
        if rel not in exclude:
            out.append((path, rel))
    return out


def join(prefix: str, rel: str) -> str:
    return f"{prefix.strip('/')}/{rel}" if prefix.strip("/") else rel


def open_store(uri: str, **kwargs: Any) -> ArtifactStore:
    """`file:///path`, `/path`, `./path` → FileStore; `s3://bucket[/prefix]` → S3Store."""
    if uri.startswith("s3://"):
        from neuronforge.stores.s3 import S3Store

        return S3Store.from_uri(uri, **kwargs)
    if "://" in uri and not uri.startswith("file://"):
        raise StoreError(f"unsupported store URI {uri!r}; use file:///path, a local path, or s3://bucket/prefix")
    from neuronforge.stores.file import FileStore

    return FileStore(Path(uri.removeprefix("file://")).expanduser())
