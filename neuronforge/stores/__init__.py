"""Artifact stores: one interface (`ArtifactStore`), a local-folder and an S3 implementation.

`open_store(uri)` picks the implementation from the URI: `file:///abs/path` or a plain path for the
embedded default, `s3://bucket/prefix` for S3 (credentials and endpoint from the standard AWS
environment / profile, or a boto3 session handed in by the Airflow connection). The S3 store (and
so boto3) is imported only when an `s3://` URI is opened.

Who opens the artifact store: the edges, once — the CLI (`interfaces.cli.options.opened_store`) and the
Airflow layer (`neuronforge_airflow.hooks.store`) — and hand the store down. The core opens only places
it reads that are not the artifact store (`open_location`): a model's `s3://` source, a copied artifact
or consumer cache a user named, a release-feed mirror.
"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any

from neuronforge.common.errors import StoreError
from neuronforge.stores.base import ArtifactStore, NotAFile, NotFound, ObjectInfo, refuse_credentials

__all__ = ["ArtifactStore", "NotAFile", "NotFound", "ObjectInfo", "local_folder", "open_location", "open_store"]


# The one place a store kind is registered: URI scheme -> (module, class with `from_uri`), imported
# only when a URI names it (boto3 stays out of processes that never open an S3 store). Everything
# else a store URI can be — `file://`, a path — is the folder store.
REMOTE_STORES: dict[str, tuple[str, str]] = {"s3": ("neuronforge.stores.s3", "S3Store")}


def open_store(uri: str, *, must_exist: bool = False, probe: bool = True, **kwargs: Any) -> ArtifactStore:
    """`file:///path`, `/path`, `./path` → FileStore; `s3://bucket[/prefix]` → S3Store.

    `must_exist` is for commands that only read: a folder that does not exist is an error instead of
    a new empty store, and an S3 bucket is checked to exist (and be reachable) before anything else —
    unless `probe` is False: a command counted in requests (a rollback) lets its first read say so."""
    refuse_credentials(uri)
    scheme, sep, _ = uri.partition("://")
    if sep and scheme in REMOTE_STORES:
        module, name = REMOTE_STORES[scheme]
        store = getattr(importlib.import_module(module), name).from_uri(uri, **kwargs)
        if must_exist and probe:
            store.probe(write=False)
        return store
    folder = local_folder(uri)
    if folder is None:
        remote = ", ".join(f"{scheme}://bucket/prefix" for scheme in REMOTE_STORES)
        raise StoreError(f"unsupported store URI {uri!r}; use file:///path, a local path, or {remote}")
    from neuronforge.stores.file import FileStore

    return FileStore(folder, create=not must_exist)


def open_location(uri: str, *, probe: bool = False, **kwargs: Any) -> ArtifactStore:
    """A place that is only read, never the artifact store a run writes: a model's `s3://` source
    prefix, an artifact folder or NEFF cache a user named, a release-feed mirror. Reading never creates
    it (a folder that does not exist is an error, not a new empty store); `probe` checks an S3 bucket
    first — off by default: the first listing or read says the same in one line for no extra request."""
    return open_store(uri, must_exist=True, probe=probe, **kwargs)


def local_folder(uri: str) -> Path | None:
    """The folder of this host a store URI names (`file:///path`, a path), None for any other
    scheme: where a file store's disk can be full or read-only."""
    if "://" in uri and not uri.startswith("file://"):
        return None
    return Path(uri.removeprefix("file://")).expanduser()
