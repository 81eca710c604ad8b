"""The farm index's snapshot: pages of entries sorted as the catalog shows them, and a head that
names them, with what the summary and the filters need (counts, instances, each page's range).

    farm-index/head.json                          {"schema", "seq", "pages": [...], "aggregates", "built_at"}
    farm-index/pages/<seq>-<token>-<n>.jsonl.gz   up to PAGE_ROWS entries, one JSON object per line

Pages are immutable and written before the head that names them (data first, head last); the head
is replaced with compare-and-swap, so of two compactions one wins and the other deletes its pages.
Each page's sha256 is in the head: a page that does not match, or a head that is not one, is never
trusted — readers rebuild from the manifests (`rebuild`), which stay the truth.

Compaction folds the tail into new pages, and reconciles with the store's own markers, which cost
one listing per thousand objects: an `index/<key>.json` pointer without an entry (a publisher killed
between its manifest and its record) is read and added; an entry whose pointer is gone (deleted by
hand) is dropped; likewise for `failures/`, for `damaged/` (an artifact found damaged, until its key
is published again), and a build whose lease is no longer live.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import logging
import re
import time
import uuid
import zlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from neuronforge.artifacts import layout
from neuronforge.artifacts.farm_index.entry import (
    Aggregates,
    Entry,
    attestation_record,
    channel_records,
    damaged_record,
    failure_record,
    published_record,
    review_record,
)
from neuronforge.artifacts.farm_index.log import ROOT, IndexCorrupt, read_tail, reset, trim
from neuronforge.common import advice, stored_json
from neuronforge.common.errors import StoreError
from neuronforge.common.stored_text import nul_in, original_json, shown
from neuronforge.records.attestation import AttestationRecord
from neuronforge.records.base import RecordError
from neuronforge.records.channel import ChannelRecord
from neuronforge.records.damage import DamageRecord
from neuronforge.records.farm_index import PAGES, FarmIndexTail, LogRecord, PageRef
from neuronforge.records.farm_index import FarmIndexHead as Head
from neuronforge.records.index_entry import IndexEntry
from neuronforge.records.review import ReviewRecord
from neuronforge.stores import ArtifactStore, NotAFile, NotFound

CACHE_KEY = re.compile(r"[0-9a-f]{64}")  # what `locks/<key>` names when a worker wrote it

log = logging.getLogger(__name__)

HEAD = f"{ROOT}/head.json"
PAGE_ROWS = 2000
# A page's bounds as read (`common.stored_json`): its lines (a row is ~1 KiB), and all of them inflated.
LINE_MAX_BYTES = stored_json.DEFAULT_MAX_BYTES
PAGE_MAX_BYTES = 64 * 1024 * 1024  # 2000 rows: a few MiB as written
MODELS_PER_PAGE = 200  # a page naming more distinct models than this is not skipped by a model filter


def parse_head(data: bytes) -> Head:
    try:
        return Head.from_bytes(data, HEAD)
    except RecordError as exc:  # not JSON, another schema, wrong types: rebuilt from the manifests
        raise IndexCorrupt(f"{HEAD} cannot be read as a farm-index head: {exc}") from None


def read_head(store: ArtifactStore) -> tuple[Head | None, str]:
    try:
        data, version = Head.read_raw(store, HEAD)
    except NotFound:
        return None, ""
    except RecordError as exc:  # a folder where the head belongs
        raise IndexCorrupt(str(exc)) from None
    return parse_head(data), version


def head_seq(store: ArtifactStore) -> int:
    """The head's sequence number, for a tail started afresh (0 without a readable head)."""
    try:
        head, _ = read_head(store)
    except IndexCorrupt:
        return 0
    return head.seq if head else 0


def read_page(store: ArtifactStore, ref: PageRef) -> list[Entry]:
    """The rows of one page. A page that is not what its head says (checksum, not gzip) is corrupt
    and rebuilt; one line of it that is not a row costs that row only (`page_row`)."""
    try:
        data, _ = store.read_capped(ref.key, PAGE_MAX_BYTES)
    except NotAFile as exc:
        raise IndexCorrupt(str(exc)) from None
    if hashlib.sha256(data).hexdigest() != ref.sha256:
        raise IndexCorrupt(f"{ref.key} does not match the sha256 its head records")
    try:
        lines = _gunzipped(data, ref.key).splitlines()
    except (ValueError, OSError, EOFError, zlib.error) as exc:
        raise IndexCorrupt(f"{ref.key} cannot be read: {exc}") from None
    return [page_row(line, f"{ref.key} line {n}") for n, line in enumerate(lines, 1) if line]


def _gunzipped(data: bytes, key: str) -> bytes:
    """A page's lines, decompressed no further than PAGE_MAX_BYTES (a page whose checksum a forger
    recomputed may be a gzip bomb: a few KiB that inflate to gigabytes)."""
    inflate = zlib.decompressobj(wbits=31)  # gzip framing
    out = inflate.decompress(data, PAGE_MAX_BYTES + 1)
    if len(out) > PAGE_MAX_BYTES:
        raise IndexCorrupt(f"{key} inflates to more than the {stored_json.size(PAGE_MAX_BYTES)} a page may hold")
    if not inflate.eof:
        raise EOFError("the gzip stream ends early")
    return out


_KEY_IN = re.compile(rb'"key"\s*:\s*"([0-9a-f]{64})"')


def page_row(line: bytes, where: str) -> Entry:
    """One line of a page as its row; a line that is not one (not UTF-8, not JSON, a field of the
    wrong type, a NUL: what only a damaged or forged page holds) as a row marked `unreadable` with
    the reason and whatever of its key and names could be read, so a page shows every other row."""
    reason = ""
    try:
        data = stored_json.loads(line, LINE_MAX_BYTES)
    except stored_json.NotText as exc:
        reason = f"{where}: {exc}"
        data = _loose(line.decode("utf-8", "surrogateescape"))
    except stored_json.Unreadable as exc:  # too large, nested too deep, a number out of range
        reason, data = f"{where} is damaged: {exc}", None
    except ValueError as exc:
        reason, data = f"{where} is not JSON ({exc})", None
    # A line without a backslash holds no JSON escape: no NUL (strict JSON has none unescaped) and no
    # `storable` escape to undo, so the walks over every value are skipped (most rows of a page).
    escaped = b"\\" in line
    nul = nul_in(data) if not reason and escaped else None
    if nul is not None:  # the writers store none (`stored_text.storable`)
        reason = f"{where}: its {nul} holds a NUL character"
    data = original_json(data) if escaped else data
    if not reason:
        try:
            return Entry.from_json(data)
        except ValidationError as exc:
            first = exc.errors()[0]
            field = ".".join(str(p) for p in first["loc"]) or "row"
            reason = f"{where}: {field}: {first['msg']}"
    names = data if isinstance(data, dict) else {}
    key = names.get("key")
    if not isinstance(key, str) or not key:
        found = _KEY_IN.search(line)
        key = found[1].decode() if found else f"({where})"
    text = {n: shown(v) for n in ("model", "profile", "target", "instance") if isinstance(v := names.get(n), str)}
    return Entry(key=shown(key), unreadable=reason, **text)


def _loose(text: str) -> Any:
    """What a line that is not UTF-8 still says (its key and names, shown escaped), within the bounds."""
    if stored_json.too_deep(text) is not None:
        return None
    try:
        return json.loads(text)
    except ValueError:
        return None


def _page_ref(key: str, data: bytes, entries: list[Entry]) -> PageRef:
    models = sorted({e.model for e in entries})
    return PageRef(
        key=key,
        rows=len(entries),
        sha256=hashlib.sha256(data).hexdigest(),
        first=list(entries[0].sort_key),
        last=list(entries[-1].sort_key),
        profiles=sorted({e.profile for e in entries}),
        instances=sorted({e.instance for e in entries}),
        statuses=sorted({e.status_class for e in entries}),
        models=models if len(models) <= MODELS_PER_PAGE else None,
    )


def write_snapshot(store: ArtifactStore, entries: Iterable[Entry], seq: int, version: str | None) -> Head | None:
    """Write pages, then the head (compare-and-swap against `version`; None: there was no head).
    Returns the new head, or None when another writer replaced the head first."""
    rows = sorted((e for e in entries if not e.empty and not e.unreadable), key=lambda e: e.sort_key)
    token = uuid.uuid4().hex[:8]
    refs, aggregates = [], Aggregates()
    for n in range(0, len(rows), PAGE_ROWS):
        chunk = rows[n : n + PAGE_ROWS]
        data = gzip.compress(b"".join(e.to_line() + b"\n" for e in chunk), mtime=0)
        key = f"{PAGES}/{seq:012d}-{token}-{n // PAGE_ROWS:04d}.jsonl.gz"
        store.put_bytes(data, key)
        refs.append(_page_ref(key, data, chunk))
    for e in rows:
        aggregates.add(e)
    built_at = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    head = Head(seq=seq, pages=refs, aggregates=aggregates.to_json(), built_at=built_at)
    data = head.to_bytes()
    done = store.put_if_absent(data, HEAD) if version is None else store.replace_if_version(data, HEAD, version)
    if not done:
        for ref in refs:
            store.delete_prefix(ref.key)
        return None
    return head


def after(tail: FarmIndexTail | None, floor: int) -> list[LogRecord]:
    """The tail's records after sequence number `floor` (those a head at `floor` has not folded in)."""
    return [r for r in tail.records if (r.seq or 0) > floor] if tail is not None else []


def _drop_pages(store: ArtifactStore, old: Head | None, new: Head) -> None:
    keep = {p.key for p in new.pages}
    for ref in old.pages if old else ():
        if ref.key not in keep:
            store.delete_prefix(ref.key)


def merge(entries: dict[str, Entry], records: Iterable[LogRecord]) -> None:
    for record in sorted(records, key=lambda r: r.seq or 0):
        entries.setdefault(record.key, Entry(record.key)).apply(record)


def compact(store: ArtifactStore, reconcile: bool = True) -> Head | None:
    """Fold the tail into a new snapshot (see the module docstring). None if another writer did it
    first; a corrupt head or page makes it a `rebuild`."""
    try:
        head, version = read_head(store)
        tail, _ = read_tail(store)
        rows = [e for ref in (head.pages if head else ()) for e in read_page(store, ref)]
    except IndexCorrupt as exc:
        log.warning("farm index: %s; rebuilding it from the manifests", exc)
        return rebuild(store)
    for e in rows:  # dropped: what the store's markers say of their keys is recovered below
        if e.unreadable:
            log.warning("farm index: dropped a row that could not be read: %s", e.unreadable)
    entries = {e.key: e for e in rows if not e.unreadable}
    floor = head.seq if head else 0
    records = after(tail, floor)
    merge(entries, records)
    if reconcile:
        _reconcile(store, entries)
    seq = max([floor, *(r.seq or 0 for r in records)])
    new = write_snapshot(store, entries.values(), seq, version if head else None)
    if new is None:
        log.info("farm index: another writer compacted first")
        return None
    _drop_pages(store, head, new)
    trim(store, seq)
    return new


def _listed_keys(store: ArtifactStore, prefix: str, suffix: str) -> set[str]:
    return {
        o.key[len(prefix) + 1 :].removesuffix(suffix)
        for o in store.list(prefix)
        if o.key.endswith(suffix) and "/" not in o.key[len(prefix) + 1 :]
    }


def _reconcile(store: ArtifactStore, entries: dict[str, Entry]) -> None:
    from neuronforge.artifacts import leases
    from neuronforge.artifacts.failures import read_failure

    pointers = _listed_keys(store, "index", ".json")
    gone = [key for key, e in entries.items() if e.published is not None and key not in pointers]
    for key in gone:
        entries[key].published = None
    for key, e in entries.items():
        if e.damage is not None and key not in pointers:  # no artifact any more: nothing is damaged
            e.damage = None
    if gone:
        log.warning(
            "farm index: %d artifact row(s) had no index pointer any more (e.g. %s); dropped", len(gone), gone[0][:12]
        )
    recovered = []
    for key in sorted(pointers - {k for k, e in entries.items() if e.published is not None}):
        record = _pointer_record(store, f"index/{key}.json")
        if record is not None:
            recovered.append(key)
            merge(entries, [record.numbered(0)])
    if recovered:
        log.warning(
            "farm index: %d artifact(s) were published without their index record (e.g. %s); recovered",
            len(recovered),
            recovered[0][:12],
        )
    failures = _listed_keys(store, "failures", ".json")
    for key, e in entries.items():
        if e.failure is not None and key not in failures:
            e.failure = None
    for key in sorted(failures - {k for k, e in entries.items() if e.failure is not None}):
        failure = read_failure(store, key)
        if failure is not None:
            merge(entries, [failure_record(failure).numbered(0)])
    for key, e in entries.items():
        if e.building is not None and not leases.held(_lease(store, key)):
            e.building = None
    _damage(store, entries, pointers, drop_unmarked=True)


def _damage(store: ArtifactStore, entries: dict[str, Entry], pointers: set[str], drop_unmarked: bool) -> None:
    """The damage records (`damaged/<key>.json`, one listing) into the rows: each of a key whose index
    pointer is still there and that was not published again since. With `drop_unmarked`, a row's
    damage whose record is gone (a publish or a scrub cleared it) is dropped too."""
    marked = _listed_keys(store, layout.DAMAGED, ".json")
    if drop_unmarked:
        for key, e in entries.items():
            if e.damage is not None and key not in marked:
                e.damage = None
    for key in sorted(marked & pointers):
        e = entries.get(key)
        if e is not None and e.damage is not None:
            continue
        try:
            record = DamageRecord.read(store, layout.damage_entry(key))
        except (NotFound, RecordError) as exc:
            log.warning("farm index: skipped the damage record of %s: %s", key[:12], exc)
            continue
        if e is not None and e.published is not None and str(e.published.get("at", "")) > record.at:
            continue  # published again after it was found (a publish that could not drop the record)
        merge(entries, [damaged_record(record).numbered(0)])


def _lease(store: ArtifactStore, key: str) -> Any:
    """The lease of `key` as the index sees it: None for what `locks/` holds that is no cache key (a
    file store's compare-and-swap sidecar copied to S3, a hostile key) or does not read as a lease,
    so one such object never stops a rebuild, a scrub or `gc` (`lease ls` shows it as unreadable)."""
    from neuronforge.artifacts import leases

    if not CACHE_KEY.fullmatch(key):
        return None
    try:
        return leases.current(store, key)
    except StoreError as exc:  # RecordError included
        log.warning("farm index: skipped lease %s: %s", store.uri(layout.lock_entry(key)), exc)
        return None


def _pointer_record(store: ArtifactStore, index_key: str) -> dict[str, Any] | None:
    """The published record of one index pointer, or None when it publishes nothing."""
    from neuronforge.artifacts.published import read_manifest

    try:
        index = IndexEntry.read(store, index_key)
        manifest = read_manifest(store, index.manifest)
    except StoreError:  # unreadable, or not an index entry / artifact manifest (RecordError)
        return None
    if f"index/{manifest.cache_key}.json" != index_key:
        return None
    return published_record(index, manifest)


@dataclass
class Skipped:
    index_key: str
    problem: str


def scan(store: ArtifactStore) -> tuple[dict[str, Entry], list[Skipped]]:
    """Every entry as the manifests, failure records and live leases say (a full scan: what
    `rebuild` and `verify --store` cost, never a reader)."""
    from neuronforge.artifacts import leases
    from neuronforge.artifacts.failures import read_failure
    from neuronforge.artifacts.published import scan_index

    entries: dict[str, Entry] = {}
    skipped: list[Skipped] = []
    pointers: set[str] = set()
    for found in scan_index(store):
        pointers.add(found.index_key.removeprefix("index/").removesuffix(".json"))
        if found.problem is not None or found.index is None or found.manifest is None:
            skipped.append(Skipped(found.index_key, found.problem or "unreadable"))
            continue
        if f"index/{found.manifest.cache_key}.json" != found.index_key:
            skipped.append(Skipped(found.index_key, "its manifest is for another cache key"))
            continue
        merge(entries, [published_record(found.index, found.manifest).numbered(0)])
    for key in sorted(_listed_keys(store, "failures", ".json")):
        failure = read_failure(store, key)
        if failure is not None:
            merge(entries, [failure_record(failure).numbered(0)])
    _damage(store, entries, pointers, drop_unmarked=False)
    _scan_releases(store, entries)
    for key in sorted(_listed_keys(store, "locks", "")):
        lease = _lease(store, key)
        if leases.held(lease):
            e = entries.get(key)
            if e is None or e.published is None:
                at = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(lease.started))
                building = {"holder": lease.holder, "at": at}
                merge(entries, [LogRecord(kind="building", key=key, building=building, seq=0)])
    return entries, skipped


def _scan_releases(store: ArtifactStore, entries: dict[str, Entry]) -> None:
    """The channels' current builds, the review decisions and the attestations, into the rows of
    published builds."""
    for obj in store.list(layout.CHANNELS):
        if not obj.key.endswith(f"/{layout.CHANNEL_RECORD}"):
            continue
        try:
            record = ChannelRecord.read(store, obj.key)
        except (RecordError, NotFound) as exc:
            log.warning("farm index: skipped channel %s: %s", store.uri(obj.key), exc)
            continue
        if record.current.build.key in entries:
            merge(entries, [r.numbered(0) for r in channel_records(record)[:1]])
    beside = (
        ("reviews", ReviewRecord, layout.review_entry, review_record),
        ("attestations", AttestationRecord, layout.attestation_entry, attestation_record),
    )
    for folder, kind, path, as_logged in beside:  # the records kept beside a published build
        for key in sorted(_listed_keys(store, folder, ".json")):
            if key not in entries:
                continue
            try:
                record = kind.read(store, path(key))
            except (RecordError, NotFound) as exc:
                log.warning("farm index: skipped the %s of %s: %s", kind.KIND, key[:12], exc)
                continue
            merge(entries, [as_logged(record).numbered(0)])


def rebuild(store: ArtifactStore, skipped_out: list[Skipped] | None = None) -> Head:
    """Write the index afresh from the manifests. The tail is read first: the records it holds were
    written after their manifests, so the scan that follows sees them and they are folded in; records
    appended during the scan stay in the tail, after the new head's sequence number."""
    try:
        tail, _ = read_tail(store)
    except IndexCorrupt:
        tail = None
        reset(store, head_seq(store) + 1_000_000)  # far past anything the lost tail numbered
        tail, _ = read_tail(store)
    seq = max((r.seq or 0 for r in tail.records), default=tail.next_seq - 1) if tail is not None else 0
    seq = max(seq, head_seq(store))
    entries, skipped = scan(store)
    if skipped_out is not None:
        skipped_out.extend(skipped)
    else:
        for s in skipped:
            log.warning("farm index: skipped %s: %s", store.uri(s.index_key), s.problem)
    try:
        old, version = read_head(store)
    except IndexCorrupt:
        old, version = None, ""
        store.delete_prefix(HEAD)
    new = write_snapshot(store, entries.values(), seq, version if old else None)
    if new is None:  # a compaction replaced the head meanwhile: it is at least as new
        head, _ = read_head(store)
        assert head is not None
        return head
    _drop_pages(store, old, new)
    trim(store, seq)
    return new


def iter_all(store: ArtifactStore, head: Head | None, records: list[LogRecord]) -> Iterator[Entry]:
    """Every entry of the index (all pages and the tail): `verify --store`, `gc`, `catalog stale`."""
    entries = {e.key: e for ref in (head.pages if head else ()) for e in read_page(store, ref)}
    merge(entries, records)
    yield from sorted((e for e in entries.values() if not e.empty), key=lambda e: e.sort_key)


def check(store: ArtifactStore) -> list[str]:
    """`verify --store`: the index against the manifests, both ways (a full scan). Each problem is
    one line naming the key and what to do; `index rebuild` of the store fixes every one of them but a
    manifest gone, which `verify --repair` marks damaged."""
    fix = f"run {advice.command('index rebuild', store=store.root_uri)}"
    truth, _ = scan(store)
    try:
        head, _ = read_head(store)
        tail, _ = read_tail(store)
        indexed = {e.key: e for e in iter_all(store, head, after(tail, head.seq if head else 0))}
    except (IndexCorrupt, NotFound) as exc:
        return [f"the farm index cannot be read ({exc}); {fix}"]
    published = {k: e for k, e in truth.items() if e.published is not None}
    if head is None and tail is None:
        return [f"the store has no farm index; {fix}"] if published else []
    problems = []
    for key, e in sorted(published.items()):
        mine = indexed.get(key)
        if mine is not None and mine.damage is not None:
            continue  # said below
        if mine is None or mine.published is None:
            problems.append(
                f"{key[:12]} is published ({e.published['manifest']}) but missing from the farm index; {fix}"
            )
        elif mine.published.get("manifest") != e.published["manifest"] or mine.published.get(
            "compiler_version"
        ) != e.published.get("compiler_version"):
            problems.append(f"{key[:12]}: the farm index describes it otherwise than its manifest; {fix}")
    for key, e in sorted(indexed.items()):
        if e.damage is not None:
            d = e.damage
            problems.append(
                f"{key[:12]} is damaged ({d.get('reason', '?')}; found by {d.get('by', '?')} at {d.get('at', '?')}): "
                "run its build again to publish it afresh"
            )
        elif e.published is not None and key not in published:
            problems.append(
                f"{key[:12]} is in the farm index but has no complete manifest; "
                f"run {advice.command('verify', repair=True, store=store.root_uri)} to mark it damaged"
            )
    return problems
