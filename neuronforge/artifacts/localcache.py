"""Per-host, content-addressed cache of folders the store holds: how a task gets the files an
earlier task (maybe on another host) produced.

Tasks hand each other a `TreeRef` — a store prefix and the sha256 of the MANIFEST.json that
lists every file under it (path, size, sha256) — never a local path. `materialize` turns a ref
into a local folder on *this* host:

    <work dir>/objects/<manifest sha256>/        the files, verified against the manifest
    <work dir>/objects/<manifest sha256>/.nf-verified   written last: the folder is complete

A folder with its marker is reused without reading the store; otherwise the manifest is read
from the store, its sha256 checked against the ref (a manifest that changed is refused), the
listed files (and only those) downloaded into a unique temporary folder, each file's size and
sha256 checked, and the folder renamed into place. A file lock per digest makes concurrent
materializations of one ref (two tasks, two runs on one host) download once; unique temporary
names make a killed download harmless. The host that produced a folder `adopt`s it instead of
downloading what it just uploaded.

The store stays the truth: a local folder is evidence of nothing until `materialize` verified it
against the manifest the ref names.
"""

from __future__ import annotations

import hashlib
import logging
import shutil
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from filelock import FileLock
from pydantic import BaseModel, ConfigDict

from neuronforge.artifacts import layout
from neuronforge.common.errors import StoreError
from neuronforge.records.base import StoredRecord
from neuronforge.records.tree import FileListing, StoredFile
from neuronforge.spec.source import sha256_file
from neuronforge.stores import ArtifactStore, NotFound
from neuronforge.stores.base import ObjectInfo, inside

log = logging.getLogger(__name__)
MARKER = ".nf-verified"


class TreeRef(BaseModel):
    """A folder in the store, pinned by the sha256 of its manifest."""

    model_config = ConfigDict(frozen=True)

    prefix: str
    manifest_sha256: str

    @property
    def manifest_key(self) -> str:
        return f"{self.prefix}/{layout.MANIFEST}"


def objects_dir(work_dir: Path) -> Path:
    return work_dir / "objects"


def file_entries(folder: Path, exclude: tuple[str, ...] = (layout.MANIFEST, MARKER)) -> list[dict[str, Any]]:
    """(path, size, sha256) of every file under `folder`, hidden ones included except our own."""
    out = []
    for rel in _all_files(folder):
        if rel in exclude:
            continue
        out.append({"path": rel, "size": (folder / rel).stat().st_size, "sha256": sha256_file(folder / rel)})
    return out


def _all_files(folder: Path) -> list[str]:
    return sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file())


@contextmanager
def _locked(work_dir: Path, digest: str) -> Iterator[None]:
    locks = objects_dir(work_dir) / ".locks"
    locks.mkdir(parents=True, exist_ok=True)
    with FileLock(str(locks / f"{digest}.lock")):
        yield


def _verified(folder: Path, digest: str) -> bool:
    try:
        return (folder / MARKER).read_text(encoding="utf-8").strip() == digest
    except OSError:
        return False


def lookup_local(ref: TreeRef, work_dir: Path, *, deep: bool = False) -> Path | None:
    """The verified local folder for `ref` on this host, if there is one (no store access).

    Every use re-checks that each listed file is there with its size (cheap); `deep` re-hashes
    them too (what `fetch` does, as a re-fetch promises a checked copy)."""
    folder = objects_dir(work_dir) / ref.manifest_sha256
    if not _verified(folder, ref.manifest_sha256):
        return None
    try:
        files = FileListing.from_bytes((folder / layout.MANIFEST).read_bytes()).files
        intact = all(
            (folder / f.path).stat().st_size == f.size and (not deep or sha256_file(folder / f.path) == f.sha256)
            for f in files
        )
    except (OSError, StoreError):
        intact = False
    if not intact:
        log.warning("local copy of %s is damaged; fetching it from the store again", ref.prefix)
        (folder / MARKER).unlink(missing_ok=True)
        return None
    return folder


def materialize(store: ArtifactStore, ref: TreeRef, work_dir: Path, *, deep: bool = False) -> Path:
    """The folder `ref` names, on this host, verified against its manifest (see module doc)."""
    if (done := lookup_local(ref, work_dir, deep=deep)) is not None:
        return done
    final = objects_dir(work_dir) / ref.manifest_sha256
    with _locked(work_dir, ref.manifest_sha256):
        if _verified(final, ref.manifest_sha256):
            return final  # another task on this host finished it while we waited
        try:
            raw = store.get_bytes(ref.manifest_key)
        except NotFound:
            raise StoreError(
                f"{store.uri(ref.manifest_key)} is missing: the store no longer holds what an earlier stage "
                "wrote (deleted or garbage-collected); run the build again"
            ) from None
        if hashlib.sha256(raw).hexdigest() != ref.manifest_sha256:
            raise StoreError(
                f"{store.uri(ref.manifest_key)} changed since an earlier stage wrote it "
                f"(sha256 {hashlib.sha256(raw).hexdigest()[:12]} != {ref.manifest_sha256[:12]}); run the build again"
            )
        files = FileListing.from_bytes(raw, store.uri(ref.manifest_key)).files
        tmp = final.with_name(f".tmp-{ref.manifest_sha256[:16]}-{uuid.uuid4().hex[:8]}")
        try:
            pairs = [(f"{ref.prefix}/{f.path}", inside(tmp, f.path, "manifest entry")) for f in files]
            log.info("materializing %s (%d files, %s) from the store", ref.prefix, len(files), _size(files))
            store.get_files(pairs, total_bytes=sum(f.size for f in files))
            for f, (_, local) in zip(files, pairs, strict=True):
                if local.stat().st_size != f.size or sha256_file(local) != f.sha256:
                    raise StoreError(
                        f"{store.uri(ref.prefix)}/{f.path} does not match {layout.MANIFEST} (size or sha256); "
                        "the store copy is damaged: delete that prefix and run the build again"
                    )
            (tmp / layout.MANIFEST).write_bytes(raw)
            (tmp / MARKER).write_text(ref.manifest_sha256 + "\n", encoding="utf-8")
            shutil.rmtree(final, ignore_errors=True)  # an unverified leftover (no marker)
            tmp.rename(final)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    return final


def adopt(folder: Path, ref: TreeRef, work_dir: Path, *, move: bool = True) -> Path:
    """Make a folder this host just verified and uploaded the cached copy of `ref` (no download).
    `folder` must hold exactly the files of the manifest the ref names (the caller built both)."""
    final = objects_dir(work_dir) / ref.manifest_sha256
    with _locked(work_dir, ref.manifest_sha256):
        if _verified(final, ref.manifest_sha256):
            if move:
                shutil.rmtree(folder, ignore_errors=True)
            return final
        tmp = final.with_name(f".tmp-{ref.manifest_sha256[:16]}-{uuid.uuid4().hex[:8]}")
        tmp.parent.mkdir(parents=True, exist_ok=True)
        if move:
            folder.rename(tmp)
        else:
            shutil.copytree(folder, tmp, symlinks=False)
        (tmp / MARKER).write_text(ref.manifest_sha256 + "\n", encoding="utf-8")
        shutil.rmtree(final, ignore_errors=True)
        tmp.rename(final)
    return final


# (sha256, size) -> the key of an object the store already holds with exactly those bytes
StoredObjects = dict[tuple[str, int], str]


def stored_objects(files: list[StoredFile], prefix: str) -> StoredObjects:
    """What the file list of the folder `prefix`'s manifest says the store holds there, by content."""
    return {(f.sha256, f.size): f"{prefix}/{f.path}" for f in files}


def stored_objects_of(store: ArtifactStore, ref: TreeRef, work_dir: Path) -> StoredObjects:
    """`stored_objects` of the folder `ref` names, from this host's verified copy of its manifest when
    there is one (no store access), else from the store (one small GET, checked against the ref)."""
    local = objects_dir(work_dir) / ref.manifest_sha256 / layout.MANIFEST
    try:
        raw = local.read_bytes()
    except OSError:
        raw = b""
    if hashlib.sha256(raw).hexdigest() != ref.manifest_sha256:
        try:
            raw = store.get_bytes(ref.manifest_key)
        except NotFound:
            return {}
        if hashlib.sha256(raw).hexdigest() != ref.manifest_sha256:
            return {}  # not the folder the ref pins: claim nothing about it
    try:
        return stored_objects(FileListing.from_bytes(raw).files, ref.prefix)
    except StoreError:
        return {}  # a manifest this release cannot list: claim nothing about it


def publish_tree(
    store: ArtifactStore,
    folder: Path,
    prefix: str,
    manifest: StoredRecord,
    stored: StoredObjects | None = None,
) -> TreeRef:
    """Upload `folder` under `prefix`, data first and its manifest last, and return the ref.

    `stored` names objects the store already holds by content ((sha256, size) -> key, e.g. the
    checkpoint's files and the compile-cache entries the compile just synced): each listed file
    whose sha256 and size match one is copied inside the store (`ArtifactStore.copy_keys`, S3
    CopyObject: no byte through this host) instead of uploaded; the rest is uploaded. A source
    that vanished meanwhile (deleted, pruned) is uploaded after all.

    The manifest is created only if absent: when a concurrent writer of the same content won, its
    manifest is the one the ref pins (the data it lists is the same), so every reader agrees. It is
    written as its record writes itself (`to_bytes`, never a dict dumped here), so a folder named for
    the manifest's sha256 (`layout.build_prefix`) holds exactly the bytes that sha256 is of, and what
    a reader reads back (`from_bytes`) is what the writer was given: plain `json.dumps` skipped the
    escaping of `stored_text`, and a backslash in a launch file's text came back altered (issue 51)."""
    if not isinstance(manifest, StoredRecord):  # a dict would be dumped without `stored_text`'s escapes
        raise TypeError(f"publish_tree takes the manifest's record, not {type(manifest).__name__}")
    data = manifest.to_bytes()
    copies: list[tuple[str, str]] = []
    copied: list[StoredFile] = []
    for f in FileListing.from_bytes(data, f"the manifest for {store.uri(prefix)}").files:
        src, dst = (stored or {}).get((f.sha256, f.size)), f"{prefix}/{f.path}"
        if src is not None and src != dst:  # (an object is never copied onto itself: uploaded)
            copies.append((src, dst))
            copied.append(f)
    if copies:
        try:
            store.copy_keys(copies)
        except NotFound as exc:
            log.warning("%s; uploading the files it would have copied instead", exc)
            copied = []
    skip = (layout.MANIFEST, MARKER, *(f.path for f in copied))
    uploaded = store.put_tree(folder, prefix, exclude=skip)
    if copied:
        log.info(
            "%s: %d files (%s) copied inside the store, %d uploaded (%s)",
            store.uri(prefix),
            len(copied),
            _size(copied),
            len(uploaded),
            _size(uploaded),
        )
    key = f"{prefix}/{layout.MANIFEST}"
    if not store.put_if_absent(data, key):
        data = store.get_bytes(key)
    (folder / layout.MANIFEST).write_bytes(data)
    return TreeRef(prefix=prefix, manifest_sha256=hashlib.sha256(data).hexdigest())


def ref_of(store: ArtifactStore, prefix: str) -> TreeRef | None:
    """The ref of a complete folder the store already holds under `prefix`, or None."""
    try:
        data = store.get_bytes(f"{prefix}/{layout.MANIFEST}")
    except NotFound:
        return None
    return TreeRef(prefix=prefix, manifest_sha256=hashlib.sha256(data).hexdigest())


def _size(files: list[StoredFile] | list[ObjectInfo]) -> str:
    n = sum(f.size for f in files)
    return f"{n / 2**20:.1f} MiB" if n >= 2**20 else f"{n} B"


def read_tree_file(store: ArtifactStore, ref: TreeRef, relpath: str) -> bytes:
    """One file of the folder `ref` pins, checked against its manifest (size and sha256): for a
    stage that needs a config file of a checkpoint or a build, not the whole tree on its host."""
    raw = store.get_bytes(ref.manifest_key)
    if hashlib.sha256(raw).hexdigest() != ref.manifest_sha256:
        raise StoreError(f"{store.uri(ref.manifest_key)} changed since it was pinned; run the build again")
    listed = {f.path: f for f in FileListing.from_bytes(raw, store.uri(ref.manifest_key)).files}
    entry = listed.get(relpath)
    if entry is None:
        raise StoreError(f"{store.uri(ref.prefix)} holds no {relpath}")
    data = store.get_bytes(f"{ref.prefix}/{relpath}")
    if len(data) != entry.size or hashlib.sha256(data).hexdigest() != entry.sha256:
        where = store.uri(f"{ref.prefix}/{relpath}")
        raise StoreError(f"{where} is not the file its manifest lists; run the build again")
    return data
