"""One way to open a published artifact, however it is named, and to record what is found damaged.

    a cache key, or a unique prefix of one (>= 6 hex characters)   looked up in the store given
    <root>/artifacts/<org>/<name>/<revision>/<target>/<key12>[/manifest.json]
                                            a folder or manifest URI laid out as a store's artifact
                                            (file://, a local path, s3://): its store is <root>
    any other folder or manifest.json       a copied artifact: checked, but no store to record in

An artifact of a store is checked the same way whatever names it: its index pointer must name this
manifest, the manifest must read and be of that key, every file it lists must be in its folder at its
size (one listing: `published.check_files`), and the damage a deeper check recorded (`verify`'s sha256)
is read when a file was written after the manifest (`Published.rewritten`). What is found damaged is
recorded in the farm index (`farm_index.note_damaged`) in the same words, by whoever found it: `show`,
`verify`, `ls --check`, a channel move, the catalog, the pipeline's lookup. A name that reaches an
artifact by another way than its store's index would be a weaker path: a URI is taken as the store's
artifact only when the index pointer of its manifest's key names it; a folder the index does not name (a
copy, a folder left over) is opened as itself, and says so (`Opened.unrecorded`), so nothing is recorded
about a key from files that are not its published ones.

A name costs what the key costs: the pointer, the manifest and one listing (a URI reads the manifest
first, then the pointer); a key prefix adds the listing that finds it (`published.find_key`).
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from neuronforge.artifacts import layout
from neuronforge.artifacts.farm_index.damage import SHA256, clear_damage, note_damaged, read_damage
from neuronforge.artifacts.published import (
    Damage,
    Published,
    check_files,
    find_key,
    index_pointer,
    pointed_manifest,
)
from neuronforge.common import advice
from neuronforge.common.errors import ArtifactDamaged, InvalidInput, StoreError
from neuronforge.records.artifact_manifest import ArtifactManifest
from neuronforge.records.base import RecordTooNew
from neuronforge.records.damage import DamageRecord
from neuronforge.records.index_entry import IndexEntry
from neuronforge.stores import ArtifactStore, open_location

log = logging.getLogger(__name__)

LAID_OUT = "<root>/artifacts/<org>/<name>/<revision>/<target>/<key12>"


@dataclass(frozen=True)
class Opened:
    """A published artifact as opened: where it is, what its index pointer names, and its state —
    `found` published or damaged (with the reason), and `record`, the damage recorded for it (found
    here, or by a deeper check before). `unrecorded` says why what is found cannot be recorded: the
    folder is not what its store's index names ("" for a store's own artifact)."""

    store: ArtifactStore  # its store; a copied artifact's own folder
    key: str  # its cache key ("" for a copy whose manifest does not read)
    manifest_key: str  # its manifest in `store` ("" when the pointer does not read)
    found: Published | Damage
    index: IndexEntry | None = None  # its index pointer (None: a copy, or a pointer that does not read)
    record: DamageRecord | None = None
    unrecorded: str = ""

    @property
    def prefix(self) -> str:
        """Its folder in `store` ("" for a copy opened at its own folder)."""
        return self.found.prefix

    @property
    def manifest(self) -> ArtifactManifest | None:
        return self.found.manifest if isinstance(self.found, Published) else self.found.found

    @property
    def damaged(self) -> bool:
        return isinstance(self.found, Damage) or self.record is not None

    @property
    def reason(self) -> str:
        """Why it is damaged ("" when it is not)."""
        if isinstance(self.found, Damage):
            return self.found.reason
        return self.record.reason if self.record is not None else ""

    @property
    def what(self) -> str:
        """How messages name it: its key in its store, or a copy's folder."""
        if self.unrecorded or not self.key:
            return self.store.uri(self.manifest_key).rpartition("/")[0] or self.store.root_uri
        return f"{self.key[:12]} in {self.store.root_uri}"


# -- naming -------------------------------------------------------------------------------------------
_HEX = re.compile(r"[0-9a-fA-F]+")
_KEY = re.compile(r"[0-9a-f]{1,64}")  # a cache key as the index names it


def _exists(ref: str) -> bool:
    try:
        return Path(ref).exists()
    except (OSError, ValueError):  # a NUL, a name too long: no path of that name
        return False


def is_key_ref(ref: str) -> bool:
    """A cache key or a prefix of one (hex, no `/`), unless a local path of that name exists."""
    return bool(_HEX.fullmatch(ref)) and len(ref) <= 64 and not _exists(ref)


def _refuse_bad_key(ref: str, store: ArtifactStore | str | None) -> None:
    """A bare word that is neither hex nor a path here (`show zzzzzz`) was meant as a key: say so in one
    line, instead of opening it as a store folder that does not exist; the listing it suggests is of the
    store the key was meant for."""
    if "/" not in ref and not _exists(ref):
        uri = store.root_uri if isinstance(store, ArtifactStore) else store
        raise InvalidInput(
            f"{ref!r} is not a cache key (hex digits) and no file or folder here has that name: give a cache key or "
            f"at least 6 of its hex characters ({advice.command('ls', store=uri)} prints 12), or an artifact's "
            "folder or manifest URI"
        )


def open_artifact(
    ref: str, store: ArtifactStore | str | None = None, *, by: str, deep: bool = False, refuse: bool = True
) -> Opened:
    """The artifact `ref` names — a cache key or a unique prefix of one (in `store`), or the URI of its
    manifest or folder — checked and what is damaged recorded (`by`: the command). `refuse`: a damaged
    artifact is `ArtifactDamaged`, in one line (`refusal`). `deep`: the caller re-hashes every file
    (`verify`), so a file missing or of another size, or a damage recorded before, is left to that check
    and its record (`note_checked`); a manifest or pointer that does not read is still refused. A name
    that finds nothing is `InvalidInput`. A store given by its URI is opened without a bucket check: the
    first read says the same in one line when the bucket is missing, so a command pays no extra request."""
    if is_key_ref(ref):
        if store is None:
            raise InvalidInput(f"{ref} is a cache key: give the store it is published in (--store)")
        if isinstance(store, str):
            store = open_location(store)
        key = ref.lower() if len(ref) == 64 else find_key(store, ref)  # a whole key: its pointer says
        opened = open_published(store, key, by=by, deep=deep)
        if opened is None:
            raise InvalidInput(f"no artifact in {store.root_uri} has the cache key {key}")
    else:
        _refuse_bad_key(ref, store)
        opened = _open_uri(ref, by=by, deep=deep)
    if refuse and (why := refusal(opened, deep)) is not None:
        raise why
    return opened


def open_published(
    store: ArtifactStore,
    key: str,
    *,
    by: str,
    deep: bool = False,
    index: IndexEntry | None = None,
    state: Any = None,
) -> Opened | None:
    """The artifact of the whole cache key `key` in `store`, checked as every name of it is (the
    module's docstring), damage recorded by `by`; None when no index pointer names the key. `index`:
    the pointer as the caller holds it already (`ls --check`: the farm index's copy), not read again.
    `state` (a BuildState) names the build in the record when its manifest is gone. A store that cannot
    be read raises its `StoreError`; a newer neuronforge's record `RecordTooNew`."""
    pointer = index if index is not None else index_pointer(store, key)
    if pointer is None:
        return None
    return _checked(store, key, pointer, None, by=by, deep=deep, state=state)


def _checked(
    store: ArtifactStore,
    key: str,
    pointer: IndexEntry | Damage,
    read: tuple[ArtifactManifest, str] | None,
    *,
    by: str,
    deep: bool,
    state: Any = None,
) -> Opened:
    """The check every name ends in: the pointer's manifest (`read` when the name read it already),
    its files by one listing, then the damage recorded — or read, when a file was written after the
    manifest and a deeper check may have found it since."""
    if isinstance(pointer, Damage):
        return Opened(store, key, "", pointer, record=note_damaged(store, pointer, by, state)[0])
    got = read if read is not None else pointed_manifest(store, key, pointer)
    found = got if isinstance(got, Damage) else check_files(store, key, pointer, *got)
    record = None
    if isinstance(found, Damage) and not (deep and found.found is not None):
        record, _ = note_damaged(store, found, by, state)
    elif isinstance(found, Published) and found.rewritten and not deep:
        record = read_damage(store, key)
    return Opened(store, key, pointer.manifest, found, pointer, record)


def _open_uri(uri: str, *, by: str, deep: bool) -> Opened:
    """An artifact named by its folder or manifest URI: the store's own when laid out under a store's
    `artifacts/` and named by the index pointer of its key (then checked as that key), else a copy."""
    laid_out = layout.split_artifact_uri(uri)
    if laid_out is None:
        return _open_copy(uri)
    root, prefix = laid_out
    store = open_location(root)
    named = IndexEntry(manifest=f"{prefix}/{layout.ARTIFACT_MANIFEST}", prefix=prefix)
    got = pointed_manifest(store, "", named)
    # Its key: the manifest's (a hostile one never reaches a store path); one that does not read is
    # found by the folder's name (its key's first 12 characters).
    key = got[0].cache_key if not isinstance(got, Damage) else _key_named(store, prefix.rpartition("/")[2])
    pointer = index_pointer(store, key) if _KEY.fullmatch(key) else None
    if isinstance(pointer, Damage) or (pointer is not None and pointer.manifest == named.manifest):
        read = None if isinstance(got, Damage) else got
        return _checked(store, key, pointer, read, by=by, deep=deep)
    if isinstance(got, Damage) and got.gone:
        raise InvalidInput(
            f"{store.uri(named.manifest)}: no manifest there (give an artifact's folder or its manifest.json)"
        )
    if pointer is None:
        why = f"no index pointer of {store.root_uri} names its cache key {key[:12] or '(unreadable)'!r}"
    else:
        why = (
            f"the index of {store.root_uri} names {store.uri(pointer.artifact_prefix)} for {key[:12]}, not this folder"
        )
    return _copy(store, key, named, got, f"{store.uri(prefix)} is not a published artifact: {why}")


def _key_named(store: ArtifactStore, key12: str) -> str:
    """The key an artifact folder's name (its key's first 12 characters) is of, when one is indexed."""
    try:
        return find_key(store, key12)
    except InvalidInput:
        return ""


def _open_copy(uri: str) -> Opened:
    """A folder (or its manifest.json) not laid out as a store's artifact: opened as its own store."""
    folder = uri.rstrip("/")
    if folder.rpartition("/")[2] == layout.ARTIFACT_MANIFEST:
        folder = folder.rpartition("/")[0]
    store = open_location(folder, probe=True)
    named = IndexEntry(manifest=layout.ARTIFACT_MANIFEST)
    got = pointed_manifest(store, "", named)
    if isinstance(got, Damage) and got.gone:
        raise InvalidInput(
            f"{store.uri(named.manifest)}: no manifest there (give an artifact's folder or its manifest.json)"
        )
    return _copy(store, "", named, got, f"{store.root_uri} is not laid out as a store's artifact ({LAID_OUT})")


def _copy(
    store: ArtifactStore, key: str, named: IndexEntry, got: tuple[ArtifactManifest, str] | Damage, why: str
) -> Opened:
    """A folder checked as itself (its manifest, its files' sizes); nothing recorded: it is not a key's."""
    key = got[0].cache_key if not isinstance(got, Damage) else key
    found = got if isinstance(got, Damage) else check_files(store, key, named, *got)
    return Opened(store, key, named.manifest, found, unrecorded=f"{why}; what is found here is not recorded")


# -- what a reader says --------------------------------------------------------------------------------
def refusal(opened: Opened, deep: bool = False) -> ArtifactDamaged | None:
    """Why a command refuses `opened` (None: it does not), in one line with what to do: damaged (found
    here and recorded, or recorded by a deeper check before), or a copy found damaged. `deep`: files are
    left to the caller's re-hash; only a manifest or pointer that does not read is refused."""
    found, record = opened.found, opened.record
    if isinstance(found, Damage) and (not deep or found.found is None):
        if opened.unrecorded:
            return ArtifactDamaged(f"{opened.what}: {found.reason}; {opened.unrecorded}")
        fix = "run its build again to publish it afresh"
        if not opened.manifest_key:  # the pointer itself: a new build would not replace it
            fix = f"remove {opened.store.uri(layout.index_entry(opened.key))} (not an index pointer), then {fix}"
        return ArtifactDamaged(
            f"{opened.what}: {found.reason}; recorded in the farm index "
            f"({advice.command('ls', store=opened.store.root_uri)} lists it): {fix}"
        )
    if record is not None and not deep:
        return ArtifactDamaged(
            f"{opened.what}: {record.reason} (found by {record.by} at {record.at}); run its build again to publish "
            f"it afresh, or {advice.command('verify', opened.key[:12], store=opened.store.root_uri)} clears it if "
            "every file matches again"
        )
    return None


def note_checked(opened: Opened, problems: list[str], by: str = "verify") -> bool:
    """What a re-hash of every file of `opened` found (`problems`, one line each), into the farm index:
    the damage (checked by sha256), or, when every file matches, the end of a damage recorded before.
    False when nothing could be recorded: a copy (`Opened.unrecorded`), or a manifest that did not read."""
    manifest = opened.manifest
    if opened.unrecorded or manifest is None:
        return False
    if problems:
        reason = f"{len(problems)} file(s) do not match the manifest (e.g. {problems[0]})"
        note_damaged(
            opened.store, Damage(opened.key, reason, opened.manifest_key, manifest, opened.prefix), by, checked=SHA256
        )
    else:
        whole = Published(
            opened.key, opened.prefix, opened.store.uri(opened.manifest_key), {}, manifest, opened.manifest_key
        )
        clear_damage(opened.store, whole, deepest=SHA256)
    return True


def lookup(store: ArtifactStore, key: str, by: str = "lookup", state: Any = None) -> Published | None:
    """The pipeline's lookup: the published artifact for `key`, or None — and when its pointer is there
    but what it points at is damaged, or was recorded damaged by a deeper check, that is recorded (then
    it is rebuilt like a miss, and its publish clears the record). A store that cannot be read is a
    miss: nothing is concluded from an error that may pass; a newer neuronforge's record is raised."""
    try:
        opened = open_published(store, key, by=by, state=state)
    except RecordTooNew:
        raise
    except StoreError:
        return None
    if opened is None:
        return None
    if opened.damaged:
        log.warning(
            "%s: the published artifact is damaged (%s); not a cache hit: recorded in the farm index, built again",
            key[:12],
            opened.reason,
        )
        return None
    assert isinstance(opened.found, Published)
    return opened.found
