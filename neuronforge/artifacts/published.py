"""What a published artifact is in the store, and the readers that trust only complete ones.

`artifacts/<org>/<name>/<revision>/<target-slug>/<key12>/manifest.json` (written last by the publish
stage, `neuronforge.pipeline.stages.publish`) lists every file with its size and sha256; `index/<key>.json`
points at it. `lookup` follows the pointer to the manifest and checks every file it lists exists:
a reader never trusts a folder, only a complete manifest. The farm index, `gc`, `verify` and the
catalog read artifacts through this module, below the stage that writes them; a reader that opens one
artifact by any name (`show`, `verify`, `ls --check`, a channel move, the catalog's artifact page, the
pipeline's lookup) does so through `opening`, which checks it with `check_files` and records its damage.
"""

from __future__ import annotations

import hashlib
import logging
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from neuronforge.artifacts import layout
from neuronforge.common import advice
from neuronforge.common.errors import InvalidInput, StoreError
from neuronforge.records.artifact_manifest import ArtifactManifest
from neuronforge.records.base import RecordError, RecordTooNew
from neuronforge.records.index_entry import IndexEntry
from neuronforge.records.parts import FileEntry
from neuronforge.spec.source import sha256_file
from neuronforge.stores import ArtifactStore, NotFound, ObjectInfo

log = logging.getLogger(__name__)
SMOKE_JSON = "smoke.json"


@dataclass
class Published:
    key: str
    prefix: str
    manifest_uri: str
    uris: dict[str, str] = field(default_factory=dict)  # output (model folder, launch) -> URI
    manifest: ArtifactManifest | None = None
    manifest_key: str = ""  # the manifest's store key (what the index pointer names)
    # A file it lists was written after its manifest (by the times of the folder listing `examine`
    # made, the store's own clock), or the listing did not say: the one way an artifact whole by sizes
    # can have been found damaged since by a deeper check (`verify`'s sha256 of a rewritten file), or
    # restored since it was. False: every file is as it was published, so a reader may skip the damage
    # record's read (`farm_index.read_damage`); a write that keeps the time (a disk's bit rot) is not seen.
    rewritten: bool = True
    manifest_sha256: str = ""  # of the manifest's bytes as read (what a channel move records)


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


@dataclass(frozen=True)
class Damage:
    """Why the index pointer of `key` publishes nothing any more although it is there: its manifest
    gone or unreadable, of another key, or a file it lists missing or of another size. What the
    pipeline's lookup, `show` and the scrub record in the farm index (`farm_index.damage`)."""

    key: str
    reason: str  # one line
    manifest: str = ""  # the manifest key the pointer names
    found: ArtifactManifest | None = None  # the manifest, when it still reads (it names the build)
    prefix: str = ""  # the artifact's folder, when the pointer reads
    missing: tuple[str, ...] = ()  # the files missing or of another size, when that is the damage

    @property
    def gone(self) -> bool:
        """Its manifest is not there at all (rather than there and unreadable, or incomplete)."""
        return self.reason.startswith(GONE)


GONE = "manifest gone"


def _first_line(exc: BaseException) -> str:
    return str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__


def examine(store: ArtifactStore, key: str) -> Published | Damage | None:
    """The published artifact for `key` (its index entry points at a complete manifest), its `Damage`
    (the pointer is there, what it points at is not whole), or None (no pointer, or the store could
    not be read: nothing is concluded from an error that may pass). Sizes are checked against one
    listing of the artifact's folder; the sha256 only by `verify`, which downloads. A newer
    neuronforge's entry or manifest is `RecordTooNew` (upgrade this host), never damage."""
    try:
        index = index_pointer(store, key)
    except RecordTooNew:
        raise
    except StoreError:
        return None
    if index is None or isinstance(index, Damage):
        return index
    return examine_entry(store, key, index)


def index_pointer(store: ArtifactStore, key: str) -> IndexEntry | Damage | None:
    """The index pointer of `key`; its `Damage` when it does not read as one; None when there is none.
    A store that cannot be read raises its `StoreError` (`examine` concludes nothing from it)."""
    try:
        return IndexEntry.read(store, layout.index_entry(key))
    except RecordTooNew:
        raise
    except NotFound:
        return None
    except RecordError as exc:
        return Damage(key, f"index pointer unreadable: {_first_line(exc)}")


def examine_entry(store: ArtifactStore, key: str, index: IndexEntry) -> Published | Damage | None:
    """`examine` with the index pointer of `key` already read (a command that read it to say what is
    missing reads it once): the manifest it names and one listing of the artifact's folder."""
    try:
        read = pointed_manifest(store, key, index)
    except RecordTooNew:  # published by a newer neuronforge: never rebuilt over by this one
        raise
    except StoreError:
        return None
    return read if isinstance(read, Damage) else check_files(store, key, index, *read)


def pointed_manifest(store: ArtifactStore, key: str, index: IndexEntry) -> tuple[ArtifactManifest, str] | Damage:
    """The manifest `index` names and the sha256 of its bytes as read (what a channel move records and
    every host's resolve.sh checks), or its `Damage`: gone, or not an artifact manifest. A newer
    neuronforge's is `RecordTooNew`; a store that cannot be read raises its `StoreError`."""
    prefix = index.artifact_prefix
    try:
        raw, _ = ArtifactManifest.read_raw(store, index.manifest)  # under the bounds of every record
        return ArtifactManifest.from_bytes(raw, store.uri(index.manifest)), hashlib.sha256(raw).hexdigest()
    except RecordTooNew:
        raise
    except NotFound:
        return Damage(key, f"{GONE}: {index.manifest}", index.manifest, prefix=prefix)
    except RecordError as exc:
        return Damage(key, f"manifest unreadable: {_first_line(exc)}", index.manifest, prefix=prefix)


def check_files(
    store: ArtifactStore, key: str, index: IndexEntry, manifest: ArtifactManifest, digest: str = ""
) -> Published | Damage:
    """Whether the manifest `index` names (read: `manifest`, its bytes' sha256 `digest`) publishes `key`:
    of that key, and every file it lists in the artifact's folder at its size (one listing)."""
    prefix = index.artifact_prefix
    if manifest.cache_key != key:
        why = f"its manifest is of another cache key ({manifest.cache_key[:12]})"
        return Damage(key, why, index.manifest, prefix=prefix)
    listed = {o.key: o for o in store.list(prefix)}
    missing = missing_files({k: o.size for k, o in listed.items()}, prefix, manifest.files)
    if missing:
        why = f"{len(missing)} of {len(manifest.files)} file(s) missing or of another size (e.g. {missing[0]})"
        return Damage(key, why, index.manifest, manifest, prefix, tuple(missing))
    uris = format_uris(store, prefix, manifest.formats)
    rewritten = _rewritten(listed, index.manifest, [_under(prefix, f.path) for f in manifest.files])
    return Published(key, prefix, store.uri(index.manifest), uris, manifest, index.manifest, rewritten, digest)


def _rewritten(listed: dict[str, ObjectInfo], manifest_key: str, files: list[str]) -> bool:
    """Whether a file was written after the manifest (publish writes the manifest last), or a time is
    not known."""
    written = listed[manifest_key].modified if manifest_key in listed else None
    if written is None:
        return True
    times = [listed[k].modified for k in files]  # every one is listed: none is missing
    return any(t is None or t > written for t in times)


def lookup(store: ArtifactStore, key: str) -> Published | None:
    """The published artifact for `key`, if its index entry points at a complete manifest (`examine`);
    the pipeline looks up through `opening.lookup`, which also records what is damaged."""
    found = examine(store, key)
    if isinstance(found, Damage):
        log.warning("index/%s points at a damaged artifact (%s); ignoring it", key[:12], found.reason)
        return None
    return found


@dataclass(frozen=True)
class IndexedArtifact:
    """One `index/<key>.json` as found: its entry and manifest, or `problem` saying why it
    publishes nothing (unreadable, not JSON, another kind of file, manifest gone)."""

    index_key: str
    index: IndexEntry | None = None
    manifest: ArtifactManifest | None = None
    problem: str | None = None


def manifest_problem(data: Any) -> str | None:
    """None for what reads as an artifact manifest, else what it lacks (one line, no traceback)."""
    try:
        ArtifactManifest.from_json(data)
    except RecordError as exc:
        return why_not_artifact(exc)
    return None


def why_not_artifact(exc: RecordError) -> str:
    """What a manifest that did not read lacks, in one line."""
    if exc.loc[:1] == ("files",) and len(exc.loc) > 1:
        return "not an artifact manifest (its files are not path/size/sha256 entries)"
    if exc.loc:
        return f"not an artifact manifest (no valid {exc.loc[0]})"
    return str(exc)  # not an object, no schema version, a newer one


def read_manifest(store: ArtifactStore, key: str) -> ArtifactManifest:
    """The artifact manifest at `key`; one that is not (forged, truncated, newer) is a RecordError."""
    return ArtifactManifest.read(store, key)


def scan_index(store: ArtifactStore) -> Iterator[IndexedArtifact]:
    """Every index entry of the store, each either with its manifest or with the problem; nothing
    a store holds (another JSON file, bytes that are not JSON) makes the scan fail."""
    for obj in store.list("index"):
        try:
            index = IndexEntry.read(store, obj.key)
        except RecordError as exc:
            yield IndexedArtifact(obj.key, problem="not an index entry (no manifest key)" if exc.loc else str(exc))
            continue
        except StoreError as exc:
            yield IndexedArtifact(obj.key, problem=str(exc))
            continue
        try:
            raw = store.read_json(index.manifest, ArtifactManifest.MAX_BYTES)
        except StoreError as exc:
            yield IndexedArtifact(obj.key, index, problem=f"manifest unreadable: {exc}")
            continue
        try:
            yield IndexedArtifact(obj.key, index, ArtifactManifest.from_json(raw))
        except RecordError as exc:
            yield IndexedArtifact(obj.key, index, problem=why_not_artifact(exc))


def published_manifests(store: ArtifactStore) -> Iterator[tuple[str, IndexEntry, ArtifactManifest]]:
    """(index key, index entry, manifest) of every index entry whose manifest is readable and is
    one; any other entry publishes nothing and is skipped (`scan_index` says why)."""
    for entry in scan_index(store):
        if entry.problem is None and entry.index is not None and entry.manifest is not None:
            yield entry.index_key, entry.index, entry.manifest


def incomplete_files(store: ArtifactStore, index: IndexEntry, manifest: ArtifactManifest) -> list[str]:
    """The manifest's files that the store lacks or holds at another size (one listing, no
    download: what `ls` can afford per artifact; `verify` also re-hashes)."""
    return verify_files(store, index.artifact_prefix, manifest.files)


def verify_manifest(store: ArtifactStore, manifest_key: str, download_to: Path | None = None) -> list[str]:
    """Problems with a published artifact: files missing, sizes or (when downloaded) sha256 wrong."""
    try:
        files = read_manifest(store, manifest_key).files
    except RecordError as exc:
        if not exc.loc:  # not JSON, no or a newer schema version: the store's problem, as it says
            raise
        return [why_not_artifact(exc)]
    return verify_files(store, manifest_key.rpartition("/")[0], files, download_to)


def verify_files(
    store: ArtifactStore, prefix: str, files: Sequence[FileEntry], download_to: Path | None = None
) -> list[str]:
    """Problems with the files a manifest lists under `prefix` (the artifact root, "" for the store's
    root): missing or another size, and when downloaded into `download_to`, another sha256. A path
    that would leave the artifact folder is refused, never downloaded."""
    escaping = [f.path for f in files if Path(f.path).is_absolute() or ".." in Path(f.path).parts]
    problems = [f"{path}: path escapes the artifact folder" for path in escaping]
    files = [f for f in files if f.path not in escaping]
    present = object_sizes(store, prefix)
    missing = missing_files(present, prefix, files)
    problems += [f"{path}: missing or wrong size" for path in missing]
    if download_to is not None:
        for f in files:
            if _under(prefix, f.path) not in present:
                continue
            # a file of the wrong size is still downloaded: the caller may inspect what is there
            store.get_file(_under(prefix, f.path), download_to / f.path)
            if f.path not in missing and sha256_file(download_to / f.path) != f.sha256:
                problems.append(f"{f.path}: sha256 mismatch")
    return problems


def _under(prefix: str, path: str) -> str:
    return f"{prefix}/{path}" if prefix else path


def object_sizes(store: ArtifactStore, prefix: str) -> dict[str, int]:
    return {o.key: o.size for o in store.list(prefix)}


def missing_files(present: dict[str, int], prefix: str, files: Sequence[FileEntry]) -> list[str]:
    """Manifest entries absent from the store listing `present` (key -> size), or with another size."""
    return [f.path for f in files if present.get(_under(prefix, f.path)) != f.size]


KEY_PREFIX_MIN = 6  # hex characters of a cache key the commands accept (`ls` prints 12; their help says 6)
CACHE_KEY = re.compile(r"[0-9a-f]{64}")  # a full cache key (a sha256 in hex)
_KEY_CHARS = re.compile(r"[0-9a-f]+")
_CANDIDATES_SHOWN = 10


def key_prefix(given: str, what: str = "", store: str | None = None) -> str:
    """`given` as a cache key or its first `KEY_PREFIX_MIN`+ hex digits (stripped, lower case), else
    `InvalidInput` before anything is read: an empty value (an unset `$KEY` in a script) is never
    "no key" to a command that was given one. `what` names where it was given (`--to`); `store`, the
    store the key is looked up in, is the one the suggested listing reads."""
    prefix = given.strip().lower()
    named = f"{what} {given!r}" if what else repr(prefix)
    if not prefix:
        raise InvalidInput(
            f"{named} is empty (an unset variable?): give a cache key or its first 12 hex digits "
            f"({advice.command('ls', store=store)} prints them)"
        )
    if not _KEY_CHARS.fullmatch(prefix) or len(prefix) > 64:
        raise InvalidInput(
            f"{named} is not a cache key: give its hex digits ({advice.command('ls', store=store)} prints the first 12)"
        )
    if len(prefix) < KEY_PREFIX_MIN:
        raise InvalidInput(
            f"key prefix {named} is too short: give at least {KEY_PREFIX_MIN} hex characters of the cache key "
            f"({advice.command('ls', store=store)} prints 12)"
        )
    return prefix


def find_key(store: ArtifactStore, prefix: str) -> str:
    """The one cache key of the store's index that starts with `prefix`: one listing request that
    starts at `index/<prefix>` (S3: ListObjectsV2 with StartAfter), never a scan of the store. The one
    way every command (show, verify, promote, approve, ...) and page turns a key12 into a key."""
    prefix = key_prefix(prefix, store=store.root_uri)
    first = layout.index_entry(prefix).removesuffix(".json")
    page = store.list_page("index", start_after=first, limit=_CANDIDATES_SHOWN + 1)
    keys = [
        o.key.removeprefix("index/").removesuffix(".json")
        for o in page
        if o.key.startswith(first) and o.key.endswith(".json")
    ]
    if exact := [k for k in keys if k == prefix]:
        return exact[0]
    if not keys:
        raise InvalidInput(
            f"no artifact in {store.root_uri} has a cache key starting with {prefix} "
            f"({advice.command('ls', store=store.root_uri)} lists them)"
        )
    if len(keys) > 1:
        more = ", ..." if len(keys) > _CANDIDATES_SHOWN else ""
        shown = ", ".join(k[:16] for k in keys[:_CANDIDATES_SHOWN])
        raise InvalidInput(f"key prefix {prefix} is ambiguous in {store.root_uri}: {shown}{more}; give more characters")
    return keys[0]
