"""`FileStore`: the embedded default, a folder on the local disk (or a shared mount).

Its listings are S3's: keys in byte order, a page (`list_page`) after a key. A page is read by walking
the folders in that order and stopping once it is full, skipping every folder that sorts wholly before
the `start_after` key: one page of `artifacts/` or one key's lookup under `index/` reads the folders
on the way to it, never the whole store (a farm holds thousands of artifacts)."""

from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import itertools
import os
import shutil
import uuid
from collections.abc import Iterator
from pathlib import Path

from neuronforge.common.errors import StoreError, StoreNotFound
from neuronforge.common.transfers import DOWNLOAD, UPLOAD
from neuronforge.stores.base import (
    ArtifactStore,
    NotAFile,
    NotFound,
    ObjectInfo,
    clean_key,
    common_prefix,
    inside,
    join,
    local_files,
    transfer_step,
)

_TMP = ".nf-tmp-"


class FileStore(ArtifactStore):
    TRANSFER_CLIENT = "file"

    def __init__(self, root: Path, *, create: bool = True) -> None:
        """`create=False` (read-only commands): a store that does not exist is an error, so a
        mistyped path is reported instead of silently becoming an empty new store."""
        self.root = root.resolve()
        if self.root.exists() and not self.root.is_dir():
            raise StoreError(f"store {self.shown_uri} is a file, not a folder: give a folder (or a new path)")
        if not create and not self.root.is_dir():
            raise StoreNotFound(
                f"store {self.shown_uri} does not exist: check the path (reading a store never creates one)"
            )
        # A new store's folder is made by its first write (each write makes its parents): a command
        # refused before it writes (a source that does not exist) leaves no empty store behind.

    @property
    def root_uri(self) -> str:
        return f"file://{self.root}"

    def probe(self, write: bool) -> None:
        """With `write`, the folder takes a file: a read-only or full disk surfaces as the `OSError`
        naming the path (the CLI prints it in one line). A new store's folders are made to be asked and
        removed after (its first write makes them again): a probe leaves nothing behind."""
        if not write:
            return
        made = [p for p in (self.root, *self.root.parents) if not p.exists()]
        try:
            self.root.mkdir(parents=True, exist_ok=True)
            # an empty file fits on a full disk: its free blocks are asked too
            if os.statvfs(self.root).f_bavail == 0:
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(self.root))
            probe = self.root / f"{_TMP}probe-{uuid.uuid4().hex}"
            try:
                probe.write_bytes(b"")
            finally:
                probe.unlink(missing_ok=True)
        except OSError as exc:  # named by the store's folder, not the probe's made-up file name
            raise OSError(exc.errno, exc.strerror, str(self.root)) from None
        finally:
            for folder in made:  # the deepest first
                with contextlib.suppress(OSError):
                    folder.rmdir()

    def _path(self, key: str) -> Path:
        path = self.root / clean_key(key)
        # A link placed inside the store folder must not make it read or write elsewhere.
        if not path.resolve().is_relative_to(self.root):
            raise StoreError(f"{self.uri(key)} is a link to {path.resolve()}, outside the store; remove it")
        return path

    def _tmp_beside(self, final: Path) -> Path:
        final.parent.mkdir(parents=True, exist_ok=True)
        return final.parent / f"{_TMP}{uuid.uuid4().hex}-{final.name}"

    def _publish(self, tmp: Path, final: Path) -> None:
        try:
            os.replace(tmp, final)  # atomic within one filesystem
        except OSError:
            if final.is_dir() and not final.is_symlink():  # EISDIR, or ENOTEMPTY/EEXIST for a full folder
                raise NotAFile.at(self._uri_of(final)) from None
            raise

    def _uri_of(self, path: Path) -> str:
        return self.uri(path.relative_to(self.root).as_posix())

    def put_file(self, local: Path, key: str) -> None:
        with self.measured(UPLOAD, self.uri(key), local.stat().st_size, 1):
            self._put(local, key)

    def _put(self, local: Path, key: str) -> None:
        final = self._path(key)
        tmp = self._tmp_beside(final)
        try:
            shutil.copyfile(local, tmp)
            self._publish(tmp, final)
        finally:
            tmp.unlink(missing_ok=True)

    def get_file(self, key: str, local: Path) -> None:
        with self.measured(DOWNLOAD, self.uri(key), 0, 1) as done:
            done.bytes = self._get(key, local)

    def get_files(self, pairs: list[tuple[str, Path]], total_bytes: int = 0) -> None:
        what = f"copying {len(pairs)} files from {self.shown_uri}"
        with (
            self.measured(DOWNLOAD, self.uri(common_prefix([k for k, _ in pairs])), 0, len(pairs)) as done,
            transfer_step(what, total_bytes) as step,
        ):
            for key, local in pairs:
                size = self._get(key, local)
                done.bytes += size
                step.advance(size)

    def _get(self, key: str, local: Path) -> int:
        """Copy one object to `local` (a temporary name, then renamed); its size."""
        src = self._path(key)
        if not src.is_file():
            raise NotFound(f"{self.uri(key)} does not exist")
        local.parent.mkdir(parents=True, exist_ok=True)
        tmp = local.parent / f"{_TMP}{uuid.uuid4().hex}"
        try:
            shutil.copyfile(src, tmp)
            os.replace(tmp, local)
        finally:
            tmp.unlink(missing_ok=True)
        return local.stat().st_size

    def put_bytes(self, data: bytes, key: str) -> None:
        final = self._path(key)
        tmp = self._tmp_beside(final)
        try:
            tmp.write_bytes(data)
            self._publish(tmp, final)
        finally:
            tmp.unlink(missing_ok=True)

    def get_bytes(self, key: str) -> bytes:
        path = self._path(key)
        try:
            return path.read_bytes()
        except FileNotFoundError:
            raise NotFound(f"{self.uri(key)} does not exist") from None
        except IsADirectoryError:
            raise NotAFile.at(self.uri(key)) from None

    def read_capped(self, key: str, max_bytes: int) -> tuple[bytes, str]:
        """The first `max_bytes + 1` bytes; the version (the whole file's sha256) hashed as it streams,
        so an oversized object is never held whole."""
        path = self._path(key)
        try:
            with open(path, "rb") as f:
                data = f.read(max_bytes + 1)
                digest = hashlib.sha256(data)
                while chunk := f.read(1 << 20):
                    digest.update(chunk)
        except FileNotFoundError:
            raise NotFound(f"{self.uri(key)} does not exist") from None
        except IsADirectoryError:
            raise NotAFile.at(self.uri(key)) from None
        return data, digest.hexdigest()

    def exists(self, key: str) -> bool:
        return self._path(key).is_file()

    def list(self, prefix: str = "") -> list[ObjectInfo]:
        return list(self._objects(prefix))

    def list_page(self, prefix: str, start_after: str = "", limit: int = 1000) -> list[ObjectInfo]:
        """At most `limit` objects under `prefix` after `start_after`, in key order (`_walk`)."""
        return list(itertools.islice(self._objects(prefix, start_after), max(limit, 0)))

    def _objects(self, prefix: str, start_after: str = "") -> Iterator[ObjectInfo]:
        """The objects under `prefix` (a folder-like prefix, or one object's key) after `start_after`, in
        key order, read lazily: `list` takes them all, `list_page` stops at its limit."""
        base = self._path(prefix) if prefix.strip("/") else self.root
        if base.is_file():
            key = clean_key(prefix)
            if key > start_after:
                st = base.stat()
                yield ObjectInfo(key, st.st_size, modified=st.st_mtime)
        elif base.is_dir():
            start = "" if base == self.root else f"{base.relative_to(self.root).as_posix()}/"
            yield from self._walk(base, start, start_after)

    def _walk(self, folder: Path, key_prefix: str, start_after: str) -> Iterator[ObjectInfo]:
        """The objects under `folder` (whose keys start with `key_prefix`) after `start_after`, in key
        order: each folder's entries sorted as their keys sort (a subfolder `m` as `m/`), a subfolder
        entered only when some key in it can come after `start_after`. Links are not followed into
        folders (links, which neuronforge never writes, are not objects: they could name files elsewhere);
        a link to a file inside the store is listed."""
        try:
            entries = list(os.scandir(folder))
        except (FileNotFoundError, NotADirectoryError, PermissionError):  # as pathlib's walk skipped them
            return
        named = []
        for entry in entries:
            is_dir = entry.is_dir(follow_symlinks=False)
            if entry.name.startswith(_TMP) and not is_dir:  # a write in progress
                continue
            named.append((f"{key_prefix}{entry.name}/" if is_dir else f"{key_prefix}{entry.name}", is_dir, entry))
        for key, is_dir, entry in sorted(named, key=lambda n: n[0]):
            if is_dir:
                if key > start_after or start_after.startswith(key):
                    yield from self._walk(Path(entry.path), key, start_after)
                continue
            if key <= start_after:
                continue
            path = Path(entry.path)
            if entry.is_symlink() and not (path.is_file() and path.resolve().is_relative_to(self.root)):
                continue
            if not entry.is_symlink() and not entry.is_file(follow_symlinks=False):
                continue
            st = path.stat()
            yield ObjectInfo(key, st.st_size, modified=st.st_mtime)

    def delete_prefix(self, prefix: str) -> int:
        objects = self.list(prefix)
        for obj in objects:
            (self.root / obj.key).unlink(missing_ok=True)
        base = self._path(prefix)
        if base.is_dir():
            shutil.rmtree(base, ignore_errors=True)
        return len(objects)

    def put_if_absent(self, data: bytes, key: str) -> bool:
        final = self._path(key)
        tmp = self._tmp_beside(final)
        try:
            tmp.write_bytes(data)
            try:
                os.link(tmp, final)  # fails if `final` exists: atomic exclusive create, content complete
            except FileExistsError:
                return False
            return True
        finally:
            tmp.unlink(missing_ok=True)

    def read_versioned(self, key: str) -> tuple[bytes, str]:
        data = self.get_bytes(key)
        return data, hashlib.sha256(data).hexdigest()

    def replace_if_version(self, data: bytes, key: str, version: str) -> bool:
        """Compare-and-swap under an exclusive `flock` on a sidecar lock file, then an atomic rename."""
        final = self._path(key)
        final.parent.mkdir(parents=True, exist_ok=True)
        with open(final.parent / f"{_TMP}cas-{final.name}", "a", encoding="utf-8") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                current = final.read_bytes()
            except FileNotFoundError:
                return False
            except IsADirectoryError:
                raise NotAFile.at(self.uri(key)) from None
            if hashlib.sha256(current).hexdigest() != version:
                return False
            tmp = self._tmp_beside(final)
            try:
                tmp.write_bytes(data)
                self._publish(tmp, final)
            finally:  # a full disk leaves no half-written temp file beside the object
                tmp.unlink(missing_ok=True)
            return True

    def put_tree(self, local_dir: Path, prefix: str, exclude: tuple[str, ...] = ()) -> list[ObjectInfo]:
        out = []
        files = [(path, rel, path.stat().st_size) for path, rel in local_files(local_dir, exclude)]
        total = sum(f[2] for f in files)
        with (
            self.measured(UPLOAD, self.uri(prefix), total, len(files)),
            transfer_step(f"copying {len(files)} files to {self.uri(prefix)}", total) as step,
        ):
            for path, rel, size in files:
                self._put(path, join(prefix, rel))
                out.append(ObjectInfo(join(prefix, rel), size))
                step.advance(size)
        return out

    def copy_keys(self, pairs: list[tuple[str, str]]) -> None:
        for src_key, dst_key in pairs:
            src = self._path(src_key)
            if not src.is_file():
                raise NotFound(f"{self.uri(src_key)} does not exist")
            self._put(src, dst_key)  # a copy inside the store: no transfer of this host's

    def get_tree(self, prefix: str, local_dir: Path) -> list[ObjectInfo]:
        objects = self.list(prefix)
        base = clean_key(prefix)
        total = sum(o.size for o in objects)
        with (
            self.measured(DOWNLOAD, self.uri(prefix), total, len(objects)),
            transfer_step(f"copying {len(objects)} files from {self.uri(prefix)}", total) as step,
        ):
            for obj in objects:
                self._get(obj.key, inside(local_dir, obj.key[len(base) + 1 :]))
                step.advance(obj.size)
        return objects
