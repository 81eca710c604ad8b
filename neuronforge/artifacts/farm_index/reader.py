"""Reading the farm index: a view costs the head, the tail and the pages it shows — not the store.

An unfiltered window (`ls`'s first page, the catalog page) reads the one or two pages that hold its
rows; a filtered one reads only the pages whose summary (profiles, instances, statuses, models) can
match. Tail records are merged by sequence number. Counts and positions are exact as of the last
compaction; a page boundary can move by the few rows published since.

An index that is absent while the store holds published artifacts (a store written before the index
existed, or by hand) or that is corrupt is rebuilt from the manifests; on a store this host cannot
write, the rebuilt rows are used in memory for this read only.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from neuronforge.artifacts.farm_index.entry import Entry
from neuronforge.artifacts.farm_index.log import IndexCorrupt, read_tail
from neuronforge.artifacts.farm_index.snapshot import Head, PageRef, after, merge, read_head, read_page, rebuild, scan
from neuronforge.common.errors import StoreError
from neuronforge.records.farm_index import LogRecord
from neuronforge.stores import ArtifactStore, NotFound

log = logging.getLogger(__name__)


@dataclass
class Window:
    entries: list[Entry]
    # Rows matching in the whole index (unfiltered: approximate by the tail's new rows); None when a
    # filtered view stopped reading pages once it had its rows.
    total: int | None
    pages_read: int = 0
    counts: dict[str, dict[str, int]] = field(default_factory=dict)  # status class -> profile -> n
    instances: list[str] = field(default_factory=list)


@dataclass
class FarmIndex:
    store: ArtifactStore
    head: Head | None
    records: list[LogRecord]  # tail records after the head's sequence number
    memory: dict[str, Entry] | None = None  # rebuilt in memory (the store could not be written)

    @classmethod
    def open(cls, store: ArtifactStore) -> FarmIndex:
        for _ in range(3):
            try:
                head, _ = read_head(store)
                tail, _ = read_tail(store)
            except IndexCorrupt as exc:
                log.warning("farm index: %s; rebuilding it from the manifests", exc)
                if not cls._rebuild(store):
                    return cls._in_memory(store)
                continue
            if head is None and tail is None and store.list_page("index", limit=1):
                log.warning("farm index: %s has published artifacts but no index; building it", store.root_uri)
                if not cls._rebuild(store):
                    return cls._in_memory(store)
                continue
            return cls(store, head, after(tail, head.seq if head else 0))
        raise StoreError(f"{store.uri('farm-index')} keeps changing under this reader; try again")

    @staticmethod
    def _rebuild(store: ArtifactStore) -> bool:
        try:
            rebuild(store)
            return True
        except (StoreError, OSError) as exc:
            log.warning("farm index: cannot write the rebuilt index (%s); using it for this read only", exc)
            return False

    @classmethod
    def _in_memory(cls, store: ArtifactStore) -> FarmIndex:
        entries, _ = scan(store)
        return cls(store, None, [], memory=entries)

    def _read(self, ref: PageRef) -> list[Entry]:
        try:
            return read_page(self.store, ref)
        except NotFound:  # compacted away after the head was read: the caller reopens
            raise _Moved(ref.key) from None

    def window(
        self,
        match: Callable[[Entry], bool] | None = None,
        page_may_match: Callable[[PageRef], bool] | None = None,
        offset: int = 0,
        limit: int | None = None,
    ) -> Window:
        """Entries `offset`..`offset+limit` (sorted by model, profile, target, key) that `match`."""
        if self.memory is not None:
            rows = sorted(
                (e for e in self.memory.values() if not e.empty and (match is None or match(e))),
                key=lambda e: e.sort_key,
            )
            return self._finish(rows[offset : None if limit is None else offset + limit], len(rows), 0)
        pages = self.head.pages if self.head else []
        if match is None:
            return self._unfiltered(pages, offset, limit)
        end = None if limit is None else offset + limit
        entries: dict[str, Entry] = {}
        chosen: list[int] = []
        matched = 0
        stopped = False
        for i, ref in enumerate(pages):
            if page_may_match is not None and not page_may_match(ref):
                continue
            if end is not None and matched >= end:
                stopped = True
                break
            page = self._read(ref)
            chosen.append(i)
            matched += sum(1 for e in page if match(e))
            entries.update((e.key, e) for e in page)
        hi = tuple(pages[chosen[-1]].last) if stopped and chosen else None
        self._merge_tail(entries, lo=None, hi=hi)
        rows = sorted((e for e in entries.values() if not e.empty and match(e)), key=lambda e: e.sort_key)
        return self._finish(rows[offset:end], None if stopped else len(rows), len(chosen))

    def _unfiltered(self, pages: list[PageRef], offset: int, limit: int | None) -> Window:
        """Rows `offset`.. of the whole index: the pages holding them by the head's counts, widened by
        a page where the tail moved the boundaries (so positions stay exact while the tail holds
        fewer rows than a page)."""
        starts, seen = [], 0
        for ref in pages:
            starts.append(seen)
            seen += ref.rows
        end = None if limit is None else offset + limit
        if pages:
            first = max([i for i, s in enumerate(starts) if s <= offset] or [0])
            last = len(pages) - 1 if end is None else max([i for i, s in enumerate(starts) if s < end] or [0])
            fresh = self._tail_entries.values()
            # A new row sorting before the window pulls the previous page's last rows into it; a
            # row deleted since pulls the next page's first rows in.
            left = any(not e.empty and e.sort_key < tuple(pages[first].first) for e in fresh)
            right = any(e.empty for e in fresh)
            chosen = list(range(max(first - left, 0), min(max(last, first) + right, len(pages) - 1) + 1))
        else:
            chosen = []
        entries = {e.key: e for i in chosen for e in self._read(pages[i])}
        lo = tuple(pages[chosen[0]].first) if chosen and chosen[0] > 0 else None
        hi = tuple(pages[chosen[-1]].last) if chosen and chosen[-1] < len(pages) - 1 else None
        before, added, removed = self._merge_tail(entries, lo, hi)
        base = (starts[chosen[0]] if chosen else 0) + before
        rows = sorted((e for e in entries.values() if not e.empty), key=lambda e: e.sort_key)
        start = max(offset - base, 0)
        total = (self.head.rows if self.head else 0) + added - removed
        return self._finish(rows[start : None if limit is None else start + limit], total, len(chosen))

    def _merge_tail(
        self, entries: dict[str, Entry], lo: tuple[str, ...] | None, hi: tuple[str, ...] | None
    ) -> tuple[int, int, int]:
        """Fold the tail into the loaded `entries`; a key not loaded is taken as new and kept when
        it sorts between `lo` and `hi`. Returns (new rows before `lo`, new rows, loaded rows removed)."""
        known = set(entries)
        before = added = removed = 0
        for key, e in self._tail_entries.items():
            if key in known:
                was_empty = entries[key].empty
                merge(entries, [r for r in self.records if r.key == key])
                removed += entries[key].empty and not was_empty
                continue
            if e.empty:
                continue
            added += 1
            if lo is not None and e.sort_key < lo:
                before += 1
            elif hi is None or e.sort_key <= hi:
                entries[key] = e
        return before, added, removed

    @functools.cached_property
    def _tail_entries(self) -> dict[str, Entry]:
        """The tail's records folded per key, once per opened index (a window uses them three times)."""
        out: dict[str, Entry] = {}
        merge(out, self.records)
        return out

    def _finish(self, rows: list[Entry], total: int | None, pages_read: int) -> Window:
        counts: dict[str, dict[str, int]] = {}
        instances: set[str] = set()
        if self.memory is not None:
            for e in self.memory.values():
                if not e.empty:
                    by = counts.setdefault(e.status_class, {})
                    by[e.profile] = by.get(e.profile, 0) + 1
                    instances.add(e.instance)
        else:
            aggregates = self.head.aggregates if self.head else {}
            for status, by in (aggregates.get("statuses") or {}).items():
                counts[status] = dict(by)
            instances.update(aggregates.get("instances") or ())
            for e in self._tail_entries.values():  # approximate: a tail row is counted as new
                if not e.empty:
                    by = counts.setdefault(e.status_class, {})
                    by[e.profile] = by.get(e.profile, 0) + 1
                    instances.add(e.instance)
        return Window(rows, total, pages_read, counts, sorted(i for i in instances if i))

    def all_entries(self) -> list[Entry]:
        """Every entry (reads every page): for `gc`'s plan and `catalog stale`'s published builds."""
        return self.window().entries


class _Moved(Exception):
    """A page named by the head was replaced by a compaction while this reader held the head."""


def read_window(store: ArtifactStore, **kwargs: Any) -> Window:
    """`FarmIndex.open(store).window(**kwargs)`, reopened when a compaction moved the pages meanwhile."""
    missing: set[str] = set()
    for _ in range(5):
        try:
            try:
                return FarmIndex.open(store).window(**kwargs)
            except _Moved as moved:
                if moved.args[0] not in missing:  # a compaction replaced it: read the new head
                    missing.add(moved.args[0])
                    continue
                raise IndexCorrupt(f"{moved.args[0]} is named by the head but gone") from None
        except IndexCorrupt as exc:
            log.warning("farm index: %s; rebuilding it from the manifests", exc)
            if not FarmIndex._rebuild(store):
                return FarmIndex._in_memory(store).window(**kwargs)
    raise StoreError(f"{store.uri('farm-index')} keeps changing under this reader; try again")
