"""The integrity scrub: the store's index pointers walked a page at a time, each artifact checked as the
pipeline's lookup checks it (`published.examine`: its pointer, manifest and folder listing — three
requests, no download), and the farm index repaired — what is damaged recorded damaged (as every reader
records it), what is published but missing from the index (or described otherwise) indexed again, and a
recorded damage whose artifact checks whole again cleared (unless a deeper check, `verify`'s sha256,
found it).

Resumable and bounded: a call checks at most `pages` × `page_size` pointers, in key order after its
cursor, and stores where it stopped (`scrub/state.json`), so the daily DAG (`dags/neuronforge_scrub.py`)
and `neuronforge verify --store URI --repair` continue each other's pass. Each call also reads the farm
index once (its head, tail and pages: one request per 2000 rows) to compare what it checked with what
the index says; the index's own writes are batched, one compare-and-swap per page.

Its own state is a stored record like any other, read under the same bounds and checked as its input
is: a cursor the command line would refuse (`cursor_problem`: not a cache key) is refused from the file
too, as is a state that does not read (nested too deep, not UTF-8, a folder where the file belongs).
Then the scrub starts a new pass, says in its line that the stored state was damaged and why, and
rewrites it (a folder there removed first) — never "checked 0 … pass complete" over a store it did not
check.
"""

from __future__ import annotations

import logging
import time
from dataclasses import asdict, dataclass, field
from typing import Any

from neuronforge.artifacts import layout
from neuronforge.artifacts.farm_index import Entry, FarmIndex, append, note_damaged, read_damage
from neuronforge.artifacts.farm_index.damage import SHA256
from neuronforge.artifacts.farm_index.entry import damaged_record, published_record
from neuronforge.artifacts.published import Damage, examine
from neuronforge.common.errors import InvalidInput, NeuronforgeError
from neuronforge.records.base import RecordError
from neuronforge.records.farm_index import LogRecord
from neuronforge.records.index_entry import IndexEntry
from neuronforge.records.scrub import ScrubState
from neuronforge.stores import ArtifactStore, NotAFile, NotFound

log = logging.getLogger(__name__)

PAGE_SIZE = 200  # index pointers per page: about 600 requests of checks
MAX_PAGE_SIZE = 1000  # one listing request of the store
MAX_PAGES = 1000
KEPT_KEYS = 1000  # damaged keys the stored state keeps of a call (`damaged` counts them all): ~70 KB


@dataclass
class ScrubReport:
    """What one scrub call checked and did, as one line (`line`) and as JSON (`to_json`)."""

    store: str
    cursor: str  # where it started (after this key; "": a new pass)
    next_cursor: str  # where the next call starts ("": the pass is complete)
    page_size: int
    pages: int = 0
    checked: int = 0
    ok: int = 0
    damaged: int = 0  # found damaged (newly recorded or recorded before)
    marked: int = 0  # of those, recorded by this call
    re_indexed: int = 0  # whole, but missing from the farm index or described otherwise: indexed again
    cleared: int = 0  # recorded damaged before, whole again: cleared
    unreadable: int = 0  # the store did not answer for it: nothing concluded, checked again next pass
    damaged_keys: list[str] = field(default_factory=list)
    state_damaged: str = ""  # why the stored state was not used ("": it was, or a cursor was given)

    @property
    def done(self) -> bool:
        return not self.next_cursor

    def line(self) -> str:
        where = "pass complete" if self.done else f"next page: --cursor {self.next_cursor}"
        more = f", {self.unreadable} unreadable (checked again next pass)" if self.unreadable else ""
        state = (
            f"; the stored state was damaged ({self.state_damaged}): started a new pass" if self.state_damaged else ""
        )
        return (
            f"scrub of {self.store}: checked {self.checked}, ok {self.ok}, damaged {self.damaged} "
            f"({self.marked} newly marked), re-indexed {self.re_indexed}, cleared {self.cleared}{more}; {where}{state}"
        )

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "done": self.done}


def cursor_problem(cursor: str) -> str | None:
    """Why `cursor` is not where a scrub can start (None: it is): a cache key or a start of one (up
    to 64 lowercase hex characters), or "" for a new pass. The one check of `--cursor` and of the
    stored state's cursor alike."""
    if cursor and not (len(cursor) <= 64 and all(c in "0123456789abcdef" for c in cursor)):
        return f"{cursor[:80]!r} is not a cache key"
    return None


def read_state(store: ArtifactStore) -> tuple[ScrubState | None, str]:
    """The stored state (None: none yet) and why it is damaged ("" : it is not): a record that does not
    read, or a cursor `cursor_problem` refuses."""
    try:
        state = ScrubState.read(store, layout.SCRUB_STATE)
    except NotFound:
        return None, ""
    except RecordError as exc:
        return None, str(exc)
    problem = cursor_problem(state.cursor)
    if problem is not None:
        return None, f"{store.uri(layout.SCRUB_STATE)}: its cursor {problem}"
    return state, ""


def _start(store: ArtifactStore, cursor: str | None) -> tuple[str, str]:
    """Where this scrub starts, and why the stored state was not used ("" : it was, or `cursor` given)."""
    if cursor is None:
        state, damaged = read_state(store)
        return (state.cursor if state is not None else ""), damaged
    cursor = cursor.strip().lower()
    problem = cursor_problem(cursor)
    if problem is not None:
        raise InvalidInput(f"--cursor {problem}: give the one the last scrub printed, or none")
    return cursor, ""


def _write_state(store: ArtifactStore, state: ScrubState) -> None:
    """`state` over the stored one; a folder where its file belongs (a damaged state) is removed first."""
    try:
        state.write(store, layout.SCRUB_STATE)
    except NotAFile:
        store.delete_prefix(layout.SCRUB_STATE)
        state.write(store, layout.SCRUB_STATE)


def scrub(store: ArtifactStore, cursor: str | None = None, page_size: int = PAGE_SIZE, pages: int = 1) -> ScrubReport:
    """Check and repair up to `pages` pages of `page_size` index pointers after `cursor` (None: where
    the last scrub stopped), then store where this one stopped."""
    if not 1 <= page_size <= MAX_PAGE_SIZE:
        raise InvalidInput(f"--page-size {page_size}: give 1 to {MAX_PAGE_SIZE} (index pointers per page)")
    if not 1 <= pages <= MAX_PAGES:
        raise InvalidInput(f"--pages {pages}: give 1 to {MAX_PAGES}")
    start, damaged = _start(store, cursor)
    report = ScrubReport(store.root_uri, start, start, page_size, state_damaged=damaged)
    rows = {e.key: e for e in FarmIndex.open(store).all_entries()}
    for _ in range(pages):
        after = layout.index_entry(report.next_cursor) if report.next_cursor else ""
        listed = store.list_page("index", start_after=after, limit=page_size)
        keys = [o.key.removeprefix("index/").removesuffix(".json") for o in listed if o.key.endswith(".json")]
        _page(store, keys, rows, report)
        report.pages += 1
        report.next_cursor = keys[-1] if len(listed) == page_size and keys else ""
        if not report.next_cursor:
            break
    at = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    last = {**report.to_json(), "damaged_keys": report.damaged_keys[:KEPT_KEYS]}  # within ScrubState.MAX_BYTES
    _write_state(store, ScrubState(cursor=report.next_cursor, at=at, last=last))
    return report


def _page(store: ArtifactStore, keys: list[str], rows: dict[str, Entry], report: ScrubReport) -> None:
    """Check one page of pointers; the index's records for it appended in one compare-and-swap."""
    marked = _marked(store, keys)
    records: list[LogRecord] = []
    for key in keys:
        report.checked += 1
        try:
            found = examine(store, key)
        except NeuronforgeError as exc:  # a newer neuronforge's record: not this one's to judge
            log.warning("scrub: %s not checked: %s", key[:12], exc)
            report.unreadable += 1
            continue
        row = rows.get(key)
        if found is None:
            report.unreadable += 1  # gone since the listing, or the store did not answer
        elif isinstance(found, Damage):
            report.damaged += 1
            report.damaged_keys.append(key)
            record, written = note_damaged(store, found, "scrub")
            report.marked += written
            if not written and (row is None or (row.damage or {}).get("reason") != record.reason):
                records.append(damaged_record(record))  # recorded before, but the index lost it
        else:
            report.ok += 1
            assert found.manifest is not None
            index = IndexEntry(cache_key=key, manifest=found.manifest_key, prefix=found.prefix)
            if key in marked:
                old = read_damage(store, key)
                if old is not None and old.checked == SHA256:  # a listing cannot clear what a download found
                    report.ok -= 1
                    report.damaged += 1
                    report.damaged_keys.append(key)
                    continue
                store.delete_prefix(layout.damage_entry(key))
                records.append(published_record(index, found.manifest))
                report.cleared += 1
            elif row is None or row.damage is not None or _described_otherwise(row, found.manifest_key):
                records.append(published_record(index, found.manifest))
                report.re_indexed += 1
    if records:
        append(store, records)


def _marked(store: ArtifactStore, keys: list[str]) -> set[str]:
    """The page's keys that have a damage record: one listing of `damaged/` over the page's key range."""
    if not keys:
        return set()
    first = layout.damage_entry(keys[0])
    listed = store.list_page(layout.DAMAGED, start_after=first[: -len(".json")], limit=len(keys) + 1)
    found = {o.key.removeprefix(f"{layout.DAMAGED}/").removesuffix(".json") for o in listed}
    return found & set(keys)


def _described_otherwise(row: Entry, manifest_key: str) -> bool:
    return row.published is None or row.published.get("manifest") != manifest_key
