"""What a published artifact is in the store, and the readers that trust only complete ones.

`artifacts/<org>/<name>/<revision>/<target-slug>/<key12>/manifest.json` (written last by the publish
stage, `neuronforge.stages.publish`) lists every file with its size and sha256; `index/<key>.json`
points at it. `lookup` follows the pointer to the manifest and checks every file it lists exists:
a reader never trusts a folder, only a complete manifest. The farm index, `gc`, `verify` and the
catalog read artifacts through this module, below the stage that writes them.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from neuronforge import layout
from neuronforge.errors import StoreError
from neuronforge.source import sha256_file
from neuronforge.stored_numbers import whole
from neuronforge.stores import ArtifactStore, NotFound

log = logging.getLogger(__name__)
MANIFEST_SCHEMA = 1
INDEX_SCHEMA = 1
SMOKE_JSON = "smoke.json"
# What a manifest must hold to be read at all (a complete one also lists every file present).
MANIFEST_SHAPE: dict[str, type] = {
    "cache_key": str,
    "source": dict,
    "toolchain": dict,
    "files": list,
}


@dataclass
class Published:
    key: str
    prefix: str
    manifest_uri: str
    uris: dict[str, str] = field(default_factory=dict)  # output (model folder, launch) -> URI
    manifest: dict[str, Any] = field(default_factory=dict)


def format_uris(store: ArtifactStore, prefix: str, formats: dict[str, str]) -> dict[str, str]:
    """The URIs of an artifact's outputs in the store being read. Manifests hold paths relative to
    the artifact's folder; older ones held URIs of the store they were written to, of which the part
    below the artifact's folder is kept — so a replicated bucket or a moved folder points at itself."""
    out = {}
    for name, where in formats.items():
        rel = str(where)
        if "://" in rel:
            rel = rel.split(f"/{prefix}/", 1)[-1] if f"/{prefix}/" in rel else rel.rsplit("/", 1)[-1]
        out[name] = store.uri(f"{prefix}/{rel}")
    return out


def lookup(store: ArtifactStore, key: str) -> Published | None:
    """The published artifact for `key`, if its index entry points at a complete manifest."""
    try:
        index = store.read_json(layout.index_entry(key))
        manifest = store.read_json(index["manifest"])
    except (NotFound, KeyError, StoreError):
        return None
    if manifest.get("cache_key") != key:
        return None
    missing = missing_files(object_sizes(store, index["prefix"]), index["prefix"], manifest.get("files", []))
    if missing:
        log.warning("index/%s points at an incomplete artifact (%s missing); ignoring it", key[:12], missing[0])
        return None
    uris = format_uris(store, index["prefix"], manifest.get("formats", {}))
    return Published(key, index["prefix"], store.uri(index["manifest"]), uris, manifest)


@dataclass(frozen=True)
class IndexedArtifact:
    """One `index/<key>.json` as found: its entry and manifest, or `problem` saying why it
    publishes nothing (unreadable, not JSON, another kind of file, manifest gone)."""

    index_key: str
    index: dict[str, Any] | None = None
    manifest: dict[str, Any] | None = None
    problem: str | None = None


def manifest_problem(manifest: Any) -> str | None:
    """None for something shaped like an artifact manifest, else what it lacks."""
    if not isinstance(manifest, dict):
        return f"not an artifact manifest (a JSON {type(manifest).__name__})"
    wrong = [k for k, kind in MANIFEST_SHAPE.items() if not isinstance(manifest.get(k), kind)]
    if wrong:
        return f"not an artifact manifest (no valid {', '.join(wrong)})"
    if not all(_file_entry(f) for f in manifest["files"]):
        return "not an artifact manifest (its files are not path/size/sha256 entries)"
    return None


def _file_entry(f: Any) -> bool:
    """A manifest's file as `publish` writes it: a path and a sha256 that are text, a size that is a
    whole number (what readers add up and compare with the store's listing)."""
    return (
        isinstance(f, dict)
        and isinstance(f.get("path"), str)
        and isinstance(f.get("sha256"), str)
        and whole(f.get("size")) is not None
    )


def scan_index(store: ArtifactStore) -> Iterator[IndexedArtifact]:
    """Every index entry of the store, each either with its manifest or with the problem; nothing
    a store holds (another JSON file, bytes that are not JSON) makes the scan fail."""
    for obj in store.list("index"):
        try:
            index = store.read_json(obj.key)
        except StoreError as exc:
            yield IndexedArtifact(obj.key, problem=str(exc))
            continue
        if not isinstance(index, dict) or not isinstance(index.get("manifest"), str):
            yield IndexedArtifact(obj.key, problem="not an index entry (no manifest key)")
            continue
        try:
            manifest = store.read_json(index["manifest"])
        except StoreError as exc:
            yield IndexedArtifact(obj.key, index, problem=f"manifest unreadable: {exc}")
            continue
        yield IndexedArtifact(obj.key, index, manifest, manifest_problem(manifest))


def published_manifests(store: ArtifactStore) -> Iterator[tuple[str, dict[str, Any], dict[str, Any]]]:
    """(index key, index entry, manifest) of every index entry whose manifest is readable and is
    one; any other entry publishes nothing and is skipped (`scan_index` says why)."""
    for entry in scan_index(store):
        if entry.problem is None and entry.index is not None and entry.manifest is not None:
            yield entry.index_key, entry.index, entry.manifest


def incomplete_files(store: ArtifactStore, index: dict[str, Any], manifest: dict[str, Any]) -> list[str]:
    """The manifest's files that the store lacks or holds at another size (one listing, no
    download: what `ls` can afford per artifact; `verify` also re-hashes)."""
    prefix = index.get("prefix") or index["manifest"].rpartition("/")[0]
    return verify_files(store, prefix, manifest["files"])


def verify_manifest(store: ArtifactStore, manifest_key: str, download_to: Path | None = None) -> list[str]:
    """Problems with a published artifact: files missing, sizes or (when downloaded) sha256 wrong."""
    return verify_files(store, manifest_key.rpartition("/")[0], store.read_json(manifest_key)["files"], download_to)


def verify_files(
    store: ArtifactStore, prefix: str, files: list[dict[str, Any]], download_to: Path | None = None
) -> list[str]:
    """Problems with the files a manifest lists under `prefix` (the artifact root, "" for the store's
    root): missing or another size, and when downloaded into `download_to`, another sha256. A path
    that would leave the artifact folder is refused, never downloaded."""
    escaping = [f["path"] for f in files if Path(f["path"]).is_absolute() or ".." in Path(f["path"]).parts]
    problems = [f"{path}: path escapes the artifact folder" for path in escaping]
    files = [f for f in files if f["path"] not in escaping]
    present = object_sizes(store, prefix)
    missing = missing_files(present, prefix, files)
    problems += [f"{path}: missing or wrong size" for path in missing]
    if download_to is not None:
        for f in files:
            if _under(prefix, f["path"]) not in present:
                continue
            # a file of the wrong size is still downloaded: the caller may inspect what is there
            store.get_file(_under(prefix, f["path"]), download_to / f["path"])
            if f["path"] not in missing and sha256_file(download_to / f["path"]) != f["sha256"]:
                problems.append(f"{f['path']}: sha256 mismatch")
    return problems


def _under(prefix: str, path: str) -> str:
    return f"{prefix}/{path}" if prefix else path


def object_sizes(store: ArtifactStore, prefix: str) -> dict[str, int]:
    return {o.key: o.size for o in store.list(prefix)}


def missing_files(present: dict[str, int], prefix: str, files: list[dict[str, Any]]) -> list[str]:
    """Manifest entries absent from the store listing `present` (key -> size), or with another size."""
    return [f["path"] for f in files if present.get(_under(prefix, f["path"])) != f["size"]]
