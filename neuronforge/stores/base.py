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
- `copy_keys`, `copy_objects`: per object atomic, not as a whole (like `put_tree`); copies inside
  the store never pass through this host (S3: server-side CopyObject / UploadPartCopy).
- `delete_prefix`: removes objects one by one (not atomic); delete manifests before data.
"""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from http import HTTPStatus
from pathlib import Path
from typing import Any

from neuronforge.common import progress, stored_json, transfers
from neuronforge.common.errors import InvalidInput, InvalidStoreKey, StoreError
from neuronforge.common.line_breaks import escaped

# Transfers smaller than this finish before anyone could read a progress line (manifests, index
# pages); larger ones (weights, compiled graphs) are reported as a step with bytes and rate.
PROGRESS_MIN_BYTES = 8 * 1024 * 1024


class NotFound(StoreError, KeyError):
    """The key does not exist in the store."""

    http_status = HTTPStatus.NOT_FOUND

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0]) if self.args else "not found"


class NotAFile(StoreError):
    """A key names a folder where an object belongs (a file store: `channel.json/` made by hand or by
    a copy gone wrong). Not `NotFound`: something is there, and writing the key cannot succeed until it
    is removed; a reader of a record calls it a damaged record (`records.base.StoredRecord.read`). S3
    has no folders: objects under `key/` with none at `key` are just `NotFound` there."""

    def __init__(self, message: str, uri: str = "") -> None:
        super().__init__(message)
        self.uri = uri  # the folder's URI

    @classmethod
    def at(cls, uri: str) -> NotAFile:
        return cls(f"{uri} is a folder, not a file", uri)


@dataclass(frozen=True)
class ObjectInfo:
    key: str  # relative to the store root
    size: int
    # What the store says identifies this version of the object without reading it (S3: the
    # ETag; file store: empty). Pins an s3:// checkpoint from its listing alone.
    etag: str = ""
    # When the store last wrote it (seconds since the epoch, the store's own clock: S3's LastModified,
    # the file's mtime); None where a listing does not say. Not part of what the object is (equality).
    modified: float | None = field(default=None, compare=False)


def clean_key(key: str) -> str:
    """Reject keys that could escape the store root or alias another key."""
    key = key.strip("/")
    parts = key.split("/")
    if not key or any(p in ("", ".", "..") for p in parts):
        raise InvalidStoreKey(f"invalid store key {key!r}: a key holds no empty, '.' or '..' part")
    return key


def is_utf8(name: str) -> bool:
    """False for a file name that was not valid UTF-8 on disk (Python holds its bytes as lone
    surrogates, which no S3 key, JSON manifest or terminal takes)."""
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def is_safe_relpath(rel: str) -> bool:
    """True for a relative '/'-path that stays inside whatever folder it is joined to: not absolute,
    no empty, `.` or `..` parts, no NUL, and no U+FFFD (what a key that was not valid UTF-8 decodes to:
    it names another object than the one listed)."""
    parts = rel.split("/")
    return bool(rel) and not any(p in ("", ".", "..") for p in parts) and "\x00" not in rel and "\ufffd" not in rel


def inside(root: Path, rel: str, what: str = "store key") -> Path:
    """`root/rel` for a path read from a store, a manifest or a checkpoint listing, refusing one
    that would land outside `root` (`..`, a leading or doubled `/`) before anything is written."""
    if not is_safe_relpath(rel):
        raise StoreError(f"refusing {what} {rel!r}: it would be written outside {root}; remove or rename that object")
    return root.joinpath(*rel.split("/"))


class ArtifactStore(ABC):
    """A flat key space of immutable-once-published objects, addressed by '/'-separated keys.

    Each transfer through this host (`put_file`, `get_file`, `get_files`, `put_tree`, `get_tree`; not
    the small `put_bytes`/`get_bytes` records, not `copy_keys`) is measured once, around the real
    call, by `measured` (`neuronforge.common.transfers`): the build's manifest lists them."""

    TRANSFER_CLIENT = "?"  # how `transfers` names this store's transfers

    def transfer_settings(self, direction: str) -> tuple[str, int, int]:
        """(client, concurrency, part size in bytes) of this store's transfers in `direction`, as recorded."""
        return self.TRANSFER_CLIENT, 0, 0

    def measured(
        self, direction: str, where: str, nbytes: int, files: int
    ) -> AbstractContextManager[transfers.Measuring]:
        client, concurrency, part_size = self.transfer_settings(direction)
        return transfers.measured(direction, where, nbytes, files, client, concurrency, part_size)

    @property
    @abstractmethod
    def root_uri(self) -> str: ...

    @property
    def shown_uri(self) -> str:
        """`root_uri` as a message names it: on one line, whatever the folder's name holds (a file system
        allows a newline in one; `line_breaks.escaped`). A command a message suggests takes `root_uri`
        itself, quoted (`common.advice`)."""
        return escaped(self.root_uri)

    def uri(self, key: str = "") -> str:
        key = key.strip("/")
        return f"{self.root_uri.rstrip('/')}/{key}" if key else self.root_uri

    @abstractmethod
    def put_file(self, local: Path, key: str) -> None: ...

    @abstractmethod
    def get_file(self, key: str, local: Path) -> None: ...

    def get_files(self, pairs: list[tuple[str, Path]], total_bytes: int = 0) -> None:
        """Download several objects (key -> local path); stores override it to transfer in parallel.
        `total_bytes`, when the caller knows it (a manifest, a listing), makes it a progress step."""
        with transfer_step(f"downloading {len(pairs)} files from {self.shown_uri}", total_bytes) as step:
            for key, local in pairs:
                self.get_file(key, local)
                step.advance(local.stat().st_size)

    @abstractmethod
    def put_bytes(self, data: bytes, key: str) -> None: ...

    @abstractmethod
    def get_bytes(self, key: str) -> bytes: ...

    @abstractmethod
    def exists(self, key: str) -> bool: ...

    @abstractmethod
    def list(self, prefix: str = "") -> list[ObjectInfo]:
        """Every object under `prefix` (a folder-like prefix; `a/b` does not match `a/bc`), sorted."""

    def list_page(self, prefix: str, start_after: str = "", limit: int = 1000) -> list[ObjectInfo]:
        """At most `limit` objects under `prefix` whose keys sort after `start_after`, in one request
        where the store allows (S3: one ListObjectsV2 call): a reader that needs a page of a
        listing, or to know whether a folder is empty, does not pay for the whole folder."""
        out = [o for o in self.list(prefix) if o.key > start_after]
        return out[:limit]

    @abstractmethod
    def delete_prefix(self, prefix: str) -> int:
        """Delete every object under `prefix`; returns how many were deleted."""

    @abstractmethod
    def put_if_absent(self, data: bytes, key: str) -> bool:
        """Create `key` with `data` unless it exists. True if this call created it."""

    @abstractmethod
    def read_versioned(self, key: str) -> tuple[bytes, str]:
        """The object's bytes and an opaque version that changes with every write (S3: the ETag)."""

    def read_capped(self, key: str, max_bytes: int) -> tuple[bytes, str]:
        """At most `max_bytes + 1` bytes of the object (more than `max_bytes` read: it is larger than a
        reader bounded by `max_bytes` takes) and its version as `read_versioned` gives it, so an
        oversized record is refused without holding it and can still be replaced by compare-and-swap.
        Stores override it to read no more than that; this one reads the object whole."""
        data, version = self.read_versioned(key)
        return data[: max_bytes + 1], version

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

    @abstractmethod
    def copy_keys(self, pairs: list[tuple[str, str]]) -> None:
        """Copy each (source key, destination key) inside the store (the bytes do not travel
        through this host); a missing source raises `NotFound`."""

    def copy_objects(self, src_prefix: str, dst_prefix: str, paths: list[str]) -> None:
        """Copy `src_prefix/<path>` to `dst_prefix/<path>` for each relative path, inside the store
        (the bytes do not travel through this host)."""
        self.copy_keys([(join(src_prefix, rel), join(dst_prefix, rel)) for rel in paths])

    @abstractmethod
    def probe(self, write: bool) -> None:
        """Raise a `StoreError` naming the store and the fix unless it can be read (and, with
        `write`, written) now: called before a run downloads or compiles anything."""

    # -- JSON helpers -------------------------------------------------------------------------
    def write_json(self, key: str, obj: Any) -> None:
        self.put_bytes(json.dumps(obj, indent=2, sort_keys=True).encode() + b"\n", key)

    def read_json(self, key: str, max_bytes: int = stored_json.DEFAULT_MAX_BYTES) -> Any:
        """A JSON object that is no record of ours (a mirrored file another tool wrote), read under
        the bounds of every stored JSON (`common.stored_json`); a record is read by its kind's class."""
        data, _ = self.read_capped(key, max_bytes)
        try:
            return stored_json.loads(data, max_bytes)
        except ValueError as exc:  # not JSON, or outside the bounds
            raise StoreError(f"{self.uri(key)} is not valid JSON: {exc}") from None


def local_files(local_dir: Path, exclude: tuple[str, ...] = ()) -> list[tuple[Path, str]]:
    """(absolute path, relative key) of every file under a folder, sorted, skipping `exclude`."""
    if not local_dir.is_dir():
        raise StoreError(f"{local_dir} is not a folder")
    out = []
    root = local_dir.resolve()
    for path in sorted(p for p in local_dir.rglob("*") if p.is_file()):
        rel = path.relative_to(local_dir).as_posix()
        if not is_utf8(rel):
            raise StoreError(
                f"refusing to upload {path!r}: its name is not valid UTF-8 and cannot be a store key; rename it"
            )
        if path.is_symlink() and not path.resolve().is_relative_to(root):
            raise StoreError(f"refusing to upload {path}: it is a link to {path.resolve()}, outside {local_dir}")
        if rel not in exclude:
            out.append((path, rel))
    return out


def transfer_step(what: str, total: int) -> AbstractContextManager[progress.Step]:
    """A progress step counting `total` bytes, or a silent one for a small transfer."""
    if total < PROGRESS_MIN_BYTES:
        return nullcontext(progress.Step(what, total, "B"))
    return progress.step(what, total=total, unit="B")


def common_prefix(keys: list[str]) -> str:
    """The deepest folder holding every key ("" for none in common): where a file list came from."""
    if not keys:
        return ""
    first, last = min(keys), max(keys)
    n = 0
    while n < min(len(first), len(last)) and first[n] == last[n]:
        n += 1
    return first[:n].rpartition("/")[0] if n < len(first) or len(keys) > 1 else first


def join(prefix: str, rel: str) -> str:
    return f"{prefix.strip('/')}/{rel}" if prefix.strip("/") else rel


def masked(uri: str) -> str | None:
    """`uri` with its credentials replaced by `***` when it carries any (`scheme://USER:SECRET@host/...`,
    `s3://KEY:SECRET/...`, a presigned query), else None: `common.secrets.mask_credentials`, the one rule."""
    from neuronforge.common.secrets import mask_credentials

    shown = mask_credentials(uri)
    return shown if shown != uri else None


def refuse_credentials(uri: str, what: str = "store URI") -> None:
    """Refuse `scheme://USER:SECRET@host/...`: a secret in a URI ends up in logs, task parameters
    and manifests. The message shows the URI with the credentials replaced by `***`."""
    if (shown := masked(uri)) is not None:
        raise InvalidInput(
            f"{what} {shown} carries credentials: neuronforge never takes secrets in a URI (they would reach "
            "logs and manifests). Remove them and provide credentials through the Airflow connection "
            "(aws_default) or the AWS environment (AWS_PROFILE, or AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY)"
        )
