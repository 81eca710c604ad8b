"""Artifact stores: one interface (`ArtifactStore`), a local-folder and an S3 implementation.

`open_store(uri)` picks the implementation from the URI: `file:///abs/path` or a plain path for the
embedded default, `s3://bucket/prefix` for S3 (credentials and endpoint from the standard AWS
environment / profile, or a boto3 session handed in by the Airflow connection). The S3 store (and
so boto3) is imported only when an `s3://` URI is opened.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from neuronforge.common.errors import StoreError
from neuronforge.stores.base import ArtifactStore, NotFound, ObjectInfo, refuse_credentials

__all__ = ["ArtifactStore", "NotFound", "ObjectInfo", "local_folder", "open_store"]


def open_store(uri: str, *, must_exist: bool = False, **kwargs: Any) -> ArtifactStore:
    """`file:///path`, `/path`, `./path` → FileStore; `s3://bucket[/prefix]` → S3Store.

    `must_exist` is for commands that only read: a folder that does not exist is an error instead of
    a new empty store, and an S3 bucket is checked to exist (and be reachable) before anything else."""
    refuse_credentials(uri)
    if uri.startswith("s3://"):
        from neuronforge.stores.s3 import S3Store

        store = S3Store.from_uri(uri, **kwargs)
        if must_exist:
            store.probe(write=False)
        return store
    folder = local_folder(uri)
    if folder is None:
        raise StoreError(f"unsupported store URI {uri!r}; use file:///path, a local path, or s3://bucket/prefix")
    from neuronforge.stores.file import FileStore

    return FileStore(folder, create=not must_exist)


def local_folder(uri: str) -> Path | None:
    """The folder of this host a store URI names (`file:///path`, a path), None for any other
    scheme: where a file store's disk can be full or read-only."""
    if "://" in uri and not uri.startswith("file://"):
        return None
    return Path(uri.removeprefix("file://")).expanduser()
