"""`neuronforge gc --keep-compilers N`: prune what older compiler versions published, by policy.

Nothing is deleted by the recompile schedule itself: after an SDK upgrade, servers still running the
old SDK need the old artifacts. `collect` keeps, per compiler, the N newest versions that published
artifacts, plus every (model, compiler version) a catalog entry pins, and deletes the rest:
- an artifact: its index entry first, then its manifest (from then on no reader trusts it), then
  its files — the reverse of publishing;
- a compile-cache version directory (`neuron-cache/<compiler>-<full version>/`, e.g.
  `neuronxcc-2.21.33363.0+82129205` with the compiler's local label, which LMI artifacts point
  at through `option.compiled_graph_path`) only when every artifact that version published was
  deleted; a version that published nothing yet (a new SDK's first builds) is never touched;
- never a build a release channel points to or keeps in its history (`channel_holds`: one listing
  of `channels/`, read before anything is decided), so a rollback never finds its build gone; a
  deleted artifact's review record (`reviews/<key>.json`) and attestations (`attestations/<key>.json`)
  go with it. A channel record that does not read keeps every build of its model (its folder
  `channels/<org>/<name>` says which): gc cannot know what that channel needs, and deleting a build
  is the one step it cannot undo;
- the temporary objects of uploads that were killed midway (a file store's `.nf-tmp-*` files,
  which no listing shows) once they are older than `TMP_GRACE_S`: an upload still running keeps
  its temporary file's modification time fresh. The `.nf-tmp-cas-*` lock files are kept (a
  compare-and-swap may hold one; removing it would let two writers in at once).
"""

from __future__ import annotations

import logging
import os
import time
from dataclasses import dataclass, field
from typing import Any

from packaging.version import InvalidVersion, Version

from neuronforge.artifacts import layout
from neuronforge.common.errors import InvalidInput
from neuronforge.compilation.compile_cache import StoredEntry
from neuronforge.farm.catalog import CatalogReport
from neuronforge.spec.source import ModelSource
from neuronforge.stores.base import ArtifactStore

log = logging.getLogger(__name__)

TMP_PREFIX = ".nf-tmp-"  # what FileStore names an upload before its atomic rename
TMP_LOCK_PREFIX = ".nf-tmp-cas-"  # FileStore's compare-and-swap lock files: never removed
TMP_GRACE_S = 3600.0  # a temporary object this much older than now belongs to a dead upload
EVERY_MODEL = "channels"  # an unreadable channel record outside any model's folder: it blocks every model


@dataclass(frozen=True)
class Published:
    key: str
    index_key: str
    manifest_key: str
    prefix: str
    location: str  # the model source's location (Hub id, s3:// prefix, folder)
    compiler: str
    compiler_version: str


@dataclass(frozen=True)
class ChannelHolds:
    """What the release channels keep, as gc reads them (`channel_holds`)."""

    kept: dict[str, list[str]] = field(default_factory=dict)  # key -> the channels keeping it
    # `channels/<org>/<name>` -> the record that does not read and why: every build of that model is kept
    unreadable: dict[str, str] = field(default_factory=dict)

    def blocks(self, location: str) -> str | None:
        """The channel folder whose unreadable record keeps the builds of the model `location` (a
        farm-index row's model); None when they may be deleted. A model whose channel folder cannot be
        told is kept by any unreadable record: gc does not guess which channels it has."""
        if not self.unreadable:
            return None
        if EVERY_MODEL in self.unreadable:
            return EVERY_MODEL
        try:
            folder = layout.model_channels(ModelSource.parse(location))
        except InvalidInput:
            return next(iter(self.unreadable))
        return folder if folder in self.unreadable else None


@dataclass
class GcReport:
    keep: dict[str, list[str]] = field(default_factory=dict)  # compiler -> versions kept by age
    pinned: list[dict[str, str]] = field(default_factory=list)  # kept only because a catalog pin names them
    deleted: list[dict[str, str]] = field(default_factory=list)
    kept: int = 0
    cache_dirs_deleted: list[str] = field(default_factory=list)
    tmp_deleted: list[dict[str, Any]] = field(default_factory=list)  # leftovers of killed uploads
    # Due for deletion by the index, left alone: the manifest unreadable or not what the index says
    # (`unconfirmed_reason`). Counted in `kept`; the summary never reads as done over them.
    unconfirmed: list[dict[str, str]] = field(default_factory=list)
    # Kept only because a release channel points to them or keeps them in its history.
    channel_kept: list[dict[str, Any]] = field(default_factory=list)
    # Channel records that do not read ({"channels", "why"}): every build of their model is kept,
    # those due for deletion listed in `blocked`. Like `unconfirmed`, never reported as done.
    unreadable_channels: list[dict[str, str]] = field(default_factory=list)
    blocked: list[dict[str, str]] = field(default_factory=list)
    # Deleted while a channel moved onto it (a promote that passed its checks before gc deleted):
    # found by reading the channels again after deleting. Empty unless that race happened.
    lost_by_channels: list[dict[str, Any]] = field(default_factory=list)
    dry_run: bool = False

    def to_json(self) -> dict[str, Any]:
        return {
            "dry_run": self.dry_run,
            "keep": self.keep,
            "kept_artifacts": self.kept,
            "pinned": self.pinned,
            "deleted": self.deleted,
            "cache_dirs_deleted": self.cache_dirs_deleted,
            "tmp_deleted": self.tmp_deleted,
            "unconfirmed": self.unconfirmed,
            "channel_kept": self.channel_kept,
            "unreadable_channels": self.unreadable_channels,
            "blocked": self.blocked,
            "lost_by_channels": self.lost_by_channels,
        }

    @property
    def undecided(self) -> bool:
        """Something gc could not decide or lost: the command must not report done (exit 1)."""
        return bool(self.unconfirmed or self.blocked or self.lost_by_channels)


def _order(version: str) -> tuple[int, Any]:
    try:
        return (1, Version(version))
    except InvalidVersion:
        return (0, version)


def published(store: ArtifactStore) -> list[Published]:
    """What the farm index says is published (its pages and tail; not a scan of the manifests):
    `collect` plans from this and confirms against the manifest only what it would delete."""
    from neuronforge.artifacts.farm_index import FarmIndex

    out = []
    for e in FarmIndex.open(store).all_entries():
        p = e.published
        if p is None or not p.get("compiler") or not p.get("manifest"):
            continue
        out.append(
            Published(
                e.key,
                layout.index_entry(e.key),
                str(p["manifest"]),
                str(p.get("prefix") or str(p["manifest"]).rpartition("/")[0]),
                e.model,
                str(p["compiler"]),
                str(p.get("compiler_version", "")),
            )
        )
    return out


def confirmed(store: ArtifactStore, a: Published) -> bool:
    """The manifest still says what the index said (same key and compiler version): one read, for
    each artifact `collect` would delete. A manifest that is gone or says otherwise is left alone."""
    return unconfirmed_reason(store, a) is None


def unconfirmed_reason(store: ArtifactStore, a: Published) -> str | None:
    """Why the manifest does not confirm what the index says of `a` (None: it does)."""
    from neuronforge.artifacts.published import read_manifest, why_not_artifact
    from neuronforge.common.errors import StoreError
    from neuronforge.records.base import RecordError
    from neuronforge.stores import NotFound

    try:
        m = read_manifest(store, a.manifest_key)
    except RecordError as exc:
        return f"its manifest is not a complete one: {why_not_artifact(exc)}"
    except (NotFound, StoreError) as exc:
        log.warning("gc: %s: the index names %s, which cannot be read; left alone", a.key[:12], a.manifest_key)
        return f"its manifest cannot be read ({type(exc).__name__})"
    if m.cache_key != a.key:
        return f"its manifest is of another cache key ({m.cache_key[:12]})"
    tc = m.toolchain
    if (tc.compiler, tc.compiler_version) != (a.compiler, a.compiler_version):
        return (
            f"its manifest says {tc.compiler} {tc.compiler_version}, the farm index {a.compiler} {a.compiler_version}"
        )
    return None


def _unreadable(store: ArtifactStore, key: str, why: str, unreadable: dict[str, str]) -> None:
    """The channel record at `key` does not read: every build of its model is kept."""
    parts = key.split("/")
    # channels/<org>/<name>/<line>/<channel>/channel.json; a record elsewhere names no model: all kept
    folder = "/".join(parts[:3]) if len(parts) == 6 else EVERY_MODEL
    unreadable.setdefault(folder, why)
    log.warning("gc: %s does not read (%s): the builds of %s are kept", store.uri(key), why, folder)


def channel_holds(store: ArtifactStore) -> ChannelHolds:
    """Every build a release channel points to or keeps in its history, and the channel records that do
    not read: one listing of `channels/` (a few objects per channel, nothing else) and one GET per
    channel. A record that does not read keeps every build of its model (gc goes on with the others)."""
    from neuronforge.records.base import RecordError
    from neuronforge.records.channel import ChannelRecord
    from neuronforge.stores import NotFound

    kept: dict[str, list[str]] = {}
    unreadable: dict[str, str] = {}
    for obj in store.list(layout.CHANNELS):
        record_key, inside, _ = obj.key.partition(f"/{layout.CHANNEL_RECORD}/")
        if inside:  # a folder where a channel record belongs (a file store): a record that does not read
            record_key += f"/{layout.CHANNEL_RECORD}"
            _unreadable(store, record_key, f"{store.uri(record_key)} is a folder, not a file", unreadable)
            continue
        if not obj.key.endswith(f"/{layout.CHANNEL_RECORD}"):
            continue  # the channel's launch files
        try:
            record = ChannelRecord.read(store, obj.key)
        except NotFound:  # deleted between the listing and the read: it keeps nothing
            continue
        except RecordError as exc:
            _unreadable(store, obj.key, str(exc), unreadable)
            continue
        name = f"{record.model} · {record.profile_line} · {record.channel}"
        kept.setdefault(record.current.build.key, []).append(name)
        for move in record.history:
            holders = kept.setdefault(move.build.key, [])
            if name not in holders and f"{name} (history)" not in holders:
                holders.append(f"{name} (history)")
    return ChannelHolds(kept, unreadable)


def pin_matches(pin: str, version: str) -> bool:
    """A catalog pin keeps `version` when equal, or when the pin has no local label and `version`
    is that public version with one (PEP 440 `==`): the compiler reports `2.21.33363.0+82129205`
    while a catalog may pin what pip pins, `2.21.33363.0` — missing that would delete a pinned artifact."""
    return version == pin or ("+" not in pin and version.startswith(f"{pin}+"))


def _pinned(pins: set[tuple[str, str]], location: str, version: str) -> bool:
    return any(loc == location and pin_matches(pin, version) for loc, pin in pins)


def catalog_pins(catalog: CatalogReport | None) -> set[tuple[str, str]]:
    """(model location, compiler version) pairs the catalog's `pin: {compilers: [...]}` keep."""
    pins: set[tuple[str, str]] = set()
    for entry in catalog.entries if catalog else ():
        location = ModelSource.parse(entry.source).location
        pins.update((location, v) for v in entry.pinned_compilers)
    return pins


def collect(
    store: ArtifactStore, keep_compilers: int, catalog: CatalogReport | None = None, dry_run: bool = False
) -> GcReport:
    if keep_compilers < 1:
        raise InvalidInput("--keep-compilers must be at least 1 (0 would delete what current servers load)")
    if catalog is not None and not catalog.ok:
        raise InvalidInput("the catalog has problems; fix them before collecting (its pins decide what is kept)")
    pins = catalog_pins(catalog)
    artifacts = published(store)
    report = GcReport(dry_run=dry_run)
    by_compiler: dict[str, set[str]] = {}
    for a in artifacts:
        by_compiler.setdefault(a.compiler, set()).add(a.compiler_version)
    for compiler, versions in by_compiler.items():
        report.keep[compiler] = sorted(versions, key=_order, reverse=True)[:keep_compilers]
    kept_versions: set[tuple[str, str]] = {(c, v) for c, vs in report.keep.items() for v in vs}
    in_use = set(kept_versions)  # versions whose compile cache a kept artifact may point at
    # Read before anything is decided: a listing that fails stops gc before it deletes anything.
    holds = channel_holds(store)
    report.unreadable_channels = [{"channels": f, "why": why} for f, why in sorted(holds.unreadable.items())]
    doomed_artifacts: list[Published] = []
    for a in artifacts:
        if (a.compiler, a.compiler_version) in kept_versions:
            report.kept += 1
            continue
        held_by = holds.kept.get(a.key)
        if held_by:
            report.kept += 1
            report.channel_kept.append(
                {"key": a.key, "prefix": a.prefix, "compiler_version": a.compiler_version, "channels": held_by}
            )
            in_use.add((a.compiler, a.compiler_version))  # the channel's build may point into its cache
            continue
        if _pinned(pins, a.location, a.compiler_version):
            report.kept += 1
            report.pinned.append({"manifest": a.manifest_key, "compiler_version": a.compiler_version})
            in_use.add((a.compiler, a.compiler_version))  # its compile cache stays too
            continue
        folder = holds.blocks(a.location)
        if folder is not None:
            report.kept += 1
            report.blocked.append(
                {
                    "key": a.key,
                    "prefix": a.prefix,
                    "compiler_version": a.compiler_version,
                    "channels": folder,
                    "why": holds.unreadable[folder],
                }
            )
            in_use.add((a.compiler, a.compiler_version))
            continue
        why = unconfirmed_reason(store, a)
        if why is not None:
            report.kept += 1
            report.unconfirmed.append(
                {"key": a.key, "manifest": a.manifest_key, "compiler_version": a.compiler_version, "why": why}
            )
            in_use.add((a.compiler, a.compiler_version))
            continue
        report.deleted.append({"key": a.key, "prefix": a.prefix, "compiler_version": a.compiler_version})
        doomed_artifacts.append(a)
    if not dry_run:
        for a in doomed_artifacts:
            store.delete_prefix(a.index_key)
            store.delete_prefix(a.manifest_key)
            store.delete_prefix(layout.review_entry(a.key))  # a review of a build that is gone means nothing
            store.delete_prefix(layout.attestation_entry(a.key))  # nor do its attestations
            store.delete_prefix(a.prefix)
            log.info("gc: deleted %s (%s %s)", a.prefix, a.compiler, a.compiler_version)
    if report.deleted and not dry_run:
        from neuronforge.artifacts import farm_index

        farm_index.append(store, [farm_index.deleted_record(d["key"]) for d in report.deleted])
        report.lost_by_channels = _moved_onto_deleted(store, report.deleted)
    doomed = {(c, v) for c, vs in by_compiler.items() for v in vs} - in_use
    report.cache_dirs_deleted = _collect_cache_dirs(store, doomed, dry_run)
    report.tmp_deleted = collect_tmp_objects(store, dry_run=dry_run)
    return report


def _moved_onto_deleted(store: ArtifactStore, deleted: list[dict[str, str]]) -> list[dict[str, Any]]:
    """The deleted builds a channel holds now: a promote whose checks passed before gc deleted the build
    and whose write came after (gc read the channels before deciding). One more listing of `channels/`;
    each one found is logged as an error: that channel points to a build that is gone."""
    holds = channel_holds(store)
    out = []
    for d in deleted:
        held_by = holds.kept.get(d["key"])
        if held_by:
            log.error("gc: %s was deleted while %s moved onto it; move that channel again", d["key"][:12], held_by)
            out.append({**d, "channels": held_by})
    return out


def collect_tmp_objects(
    store: ArtifactStore, grace_s: float = TMP_GRACE_S, dry_run: bool = False, now: float | None = None
) -> list[dict[str, Any]]:
    """Delete the `.nf-tmp-*` files of a file store not modified for `grace_s` seconds (uploads
    killed before their rename); returns what was (or, dry, would be) deleted. Other stores write
    no temporary objects (S3 uploads are single requests or multipart uploads, which the bucket's
    lifecycle rule for incomplete multipart uploads expires)."""
    from neuronforge.stores.file import FileStore

    if not isinstance(store, FileStore):
        return []
    now = time.time() if now is None else now
    out: list[dict[str, Any]] = []
    for path in sorted(store.root.rglob(f"{TMP_PREFIX}*")):
        if path.name.startswith(TMP_LOCK_PREFIX):
            continue
        try:
            st = path.stat()
        except FileNotFoundError:  # renamed into place or removed meanwhile
            continue
        if not path.is_file() or now - st.st_mtime < grace_s:
            continue
        key = path.relative_to(store.root).as_posix()
        age_h = (now - st.st_mtime) / 3600
        out.append({"key": key, "bytes": st.st_size, "age_hours": round(age_h, 1)})
        if not dry_run:
            try:
                os.unlink(path)
            except FileNotFoundError:
                continue
        log.warning(
            "gc: %s leftover of a killed upload %s (%d bytes, %.1f h old)",
            "would delete" if dry_run else "deleted",
            store.uri(key),
            st.st_size,
            age_h,
        )
    return out


def _collect_cache_dirs(store: ArtifactStore, doomed: set[tuple[str, str]], dry_run: bool) -> list[str]:
    """The compile-cache directories of versions whose every artifact was deleted. A version that
    published nothing (e.g. a new SDK's first builds still running) is never touched."""
    from neuronforge.compilation.compile_cache import prune_store

    out = []
    for compiler, version in sorted(doomed):
        try:
            cdir = layout.compiler_dir(compiler, version)  # the full version: neuronxcc-2.21.33363.0+82129205
        except InvalidInput:
            log.warning("gc: %s %r cannot name a compile-cache folder; none to delete", compiler, version)
            continue
        # One listing of that version's folder (not of the whole cache); exact: `2.21.0.0` doomed
        # must not take a kept `2.21.0.0+<label>` sibling with it.
        if prune_store(store, cdir, dry_run=dry_run, exact=True):
            out.append(cdir)
    return out


def referenced_cache_entries(store: ArtifactStore, entries: list[StoredEntry]) -> dict[tuple[str, str], str]:
    """Of `entries` (what `cache prune` selected), those a published artifact's NEFFs are in:
    (compiler folder, entry) -> that artifact's manifest. An `lmi-neuronx` artifact names them in
    `launch/neff-cache.json` (LMI's compiled_graph_path is the cache root: its NEFFs are these
    entries, and `verify` names the missing ones). The artifacts come from the farm index, as
    `collect` plans (no scan of the store); only those of the selected compiler folders are read,
    once each. One whose record cannot be read keeps its whole folder."""
    from neuronforge.common.errors import StoreError
    from neuronforge.profiles.base import LAUNCH_DIR
    from neuronforge.profiles.lmi_neuronx import CACHE_FILE
    from neuronforge.records.neff_cache import NeffCacheRecord
    from neuronforge.stores import NotFound

    selected = {(e.compiler_dir, e.name) for e in entries}
    folders = {e.compiler_dir for e in entries}
    out: dict[tuple[str, str], str] = {}
    for a in published(store) if selected else ():
        try:
            cdir = layout.compiler_dir(a.compiler, a.compiler_version)
        except InvalidInput:
            continue
        if cdir not in folders:
            continue
        try:
            record = NeffCacheRecord.read(store, f"{a.prefix}/{LAUNCH_DIR}/{CACHE_FILE}")
        except NotFound:
            continue  # an artifact that does not point into the compile cache
        except StoreError as exc:  # unreachable, or a record that is not one (RecordError): keep all it may name
            log.warning("cache prune: %s/%s: %s; %s is kept whole", a.prefix, CACHE_FILE, exc, cdir)
            out.update({k: a.manifest_key for k in selected if k[0] == cdir})
            continue
        folder = record.compiler_dir or cdir
        for name in record.entries:
            if (folder, name) in selected:
                out[(folder, name)] = a.manifest_key
    return out
