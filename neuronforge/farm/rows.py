"""What a store holds, as a compile farm's users ask: for each model and (serving profile, target),
is it published, stale for the toolchain the workers have now, damaged since it was published (its
manifest gone, a file missing or of another size: with the reason), failed its smoke test, failed at
another stage, or being built — with the compiler, sizes, smoke latencies, when, and which run.

Read through the farm index (`neuronforge.artifacts.farm_index`), so a page of the farm costs the pages it
shows, and one artifact's detail (`farm_row`) is drawn from that artifact's manifest alone; the
artifact catalog page, its JSON endpoints and `ls` all read through here. Airflow-free: the UI
plugin renders what `farm_page` and `farm_row` return.

Stale: an artifact built for `name@version` while the registry's newest version of `name` (what a
catalog target naming the bare profile follows; a new Neuron SDK release) is another one.

Every store is read as hostile: each row's text is `stored_text.shown` (a name that is not UTF-8
as its `\\xNN` escape, never an encoding error on a page or in a terminal), and a record that
cannot be read as what it should be (a page's line that is no row, a manifest or failure record of
the wrong types, a NUL) is one damaged row (`damaged_row`, with the reason), never a failed page.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, fields, replace
from typing import Any

from neuronforge.artifacts import layout
from neuronforge.artifacts.farm_index import Entry, PageRef
from neuronforge.common.errors import InvalidInput, StoreError
from neuronforge.common.stored_numbers import finite, whole
from neuronforge.common.stored_text import shown_json
from neuronforge.records.artifact_manifest import ArtifactManifest
from neuronforge.stores import ArtifactStore

STATUSES = ("published", "stale", "smoke-failed", "failed", "building", "damaged")
LISTED = ("published", "stale", "damaged")  # what a listing of published artifacts shows (`ls`)


@dataclass
class FarmRow:
    key: str
    status: str  # one of STATUSES
    model: str
    revision: str = ""
    profile: str = ""  # ref, name@version
    target: str = ""  # slug
    instance: str = ""
    compiler_version: str = ""
    stage: str = ""  # where a failure happened
    message: str = ""  # the failure, or why stale
    size_bytes: int | None = None
    ttft_ms: float | None = None
    per_token_ms: float | None = None
    cpu_seconds: float | None = None  # the build's stages on CPU hosts (`neuronforge.common.hosts`)
    neuron_seconds: float | None = None  # ... and on Neuron hosts
    at: str = ""  # published_at, the failure's time, or the lease's start (UTC ISO 8601)
    run_id: str = ""
    artifact_uri: str = ""
    manifest_uri: str = ""
    uris: dict[str, str] = field(default_factory=dict)  # published formats
    launch: dict[str, str] = field(default_factory=dict)  # deploy snippet files: name -> URI
    # Files the store lacks or holds at another size; None: not checked (a listing per artifact is
    # what a page of the farm cannot afford: `farm_row` and `ls --check` check it).
    incomplete: list[str] | None = None
    # The release channels pointing to this build now, and its review state (pending, approved, rejected).
    channels: list[str] = field(default_factory=list)
    review: str = "pending"
    review_reason: str = ""
    # The newer Neuron SDK releases it is attested for without a rebuild (`records.attestation`), sorted.
    attested: list[str] = field(default_factory=list)
    # Why a damaged artifact is damaged: {"reason", "at", "by", "manifest"} (empty: not damaged).
    damage: dict[str, str] = field(default_factory=dict)
    # The optimum-neuron cache repository it is registered in ("": none) and whether optimum's own
    # lookup returned it right after (None: not registered).
    hub_registry: str = ""
    hub_registry_found: bool | None = None
    # The charted part of its smoke measurement (`farm_index.entry.measured_summary`, read by `measured`):
    # {"synthetic", "instance_type", "runtime_line", "figures": {name: {"median", "p10", "p90"}}}; None: none.
    measured: dict[str, Any] | None = None

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @property
    def profile_name(self) -> str:
        return self.profile.partition("@")[0]

    def shown(self) -> FarmRow:
        """This row with every text `shown` (what pages, JSON answers and terminals can always encode)."""
        return FarmRow(**{f.name: shown_json(getattr(self, f.name)) for f in fields(self)})


def damaged_row(key: str, reason: str, row: FarmRow | None = None) -> FarmRow:
    """The row of a build whose records cannot be read as what they should be: status `damaged`, the
    reason (one line: which record, what is wrong) as its message, and whatever else `row` could
    read (else only the key). Pages, JSON answers and `ls` show it as one row among the others."""
    base = row if row is not None else FarmRow(key=key, status="damaged", model="(unknown model)")
    return FarmRow(**{**asdict(base), "key": key, "status": "damaged", "message": reason}).shown()


def _newest_refs() -> dict[str, str]:
    from neuronforge.profiles import all_profiles, get_profile

    return {p.name: get_profile(p.name).ref for p in all_profiles()}


def _stale(profile: str, newest: dict[str, str]) -> bool:
    name = profile.partition("@")[0]
    return bool(profile) and name in newest and newest[name] != profile


def entry_status(e: Entry, newest: dict[str, str]) -> str:
    """The status `row_of` gives the entry's row (published turns stale for a superseded profile)."""
    status = e.status_class
    return "stale" if status == "published" and _stale(e.profile, newest) else status


def row_of(store: ArtifactStore, e: Entry, newest: dict[str, str]) -> FarmRow:
    """A farm-index entry as a row, with URIs of the store being read (no request); a row that could not
    be read from its page is a damaged one."""
    if e.unreadable:
        named = FarmRow(e.key, "damaged", e.model or "(unknown model)", profile=e.profile, target=e.target)
        return damaged_row(e.key, e.unreadable, replace(named, instance=e.instance))
    return _row_of(store, e, newest).shown()


def _row_of(store: ArtifactStore, e: Entry, newest: dict[str, str]) -> FarmRow:
    from neuronforge.artifacts.published import format_uris

    row = FarmRow(
        key=e.key,
        status=e.status_class,
        model=e.model or "(unknown model)",
        profile=e.profile,
        target=e.target,
        instance=e.instance,
        channels=list(e.channels),
        attested=list(e.attested),
    )
    if e.review is not None and e.review.get("state") in ("approved", "rejected"):
        row.review, row.review_reason = str(e.review["state"]), str(e.review.get("reason", ""))
    if e.published is not None:
        p = e.published
        prefix = str(p.get("prefix", ""))
        if row.status == "published":  # not damaged since, nor being built again
            stale = _stale(e.profile, newest)
            row.status = "stale" if stale else "published"
            now = newest.get(e.profile.partition("@")[0], "")
            row.message = f"built for {e.profile}; the workers' toolchain is now {now}" if stale else ""
        row.revision = str(p.get("revision", ""))
        row.compiler_version = str(p.get("compiler_version", ""))
        # a record that is not what the writer writes (a string, NaN, a boolean) shows without that value
        row.size_bytes = whole(p.get("size_bytes"))
        row.ttft_ms, row.per_token_ms = finite(p.get("ttft_ms")), finite(p.get("per_token_ms"))
        row.cpu_seconds, row.neuron_seconds = finite(p.get("cpu_seconds")), finite(p.get("neuron_seconds"))
        row.at, row.run_id = str(p.get("at", "")), str(p.get("run_id", ""))
        row.artifact_uri, row.manifest_uri = store.uri(prefix), store.uri(str(p.get("manifest", "")))
        formats, launch = p.get("formats"), p.get("launch")
        formats = {str(k): str(v) for k, v in formats.items()} if isinstance(formats, dict) else {}
        row.uris = format_uris(store, prefix, formats)
        names = [str(n) for n in launch] if isinstance(launch, list) else []
        row.launch = {name: store.uri(f"{prefix}/launch/{name}") for name in names}
        row.measured = measured(p.get("measured"))
        registry = p.get("hub_registry")
        if isinstance(registry, dict) and isinstance(registry.get("repo"), str):
            row.hub_registry = registry["repo"]
            row.hub_registry_found = registry.get("found") is True
    if row.status == "damaged" and e.damage is not None:
        d = {k: str(e.damage.get(k, "")) for k in ("reason", "at", "by", "manifest")}
        row.status, row.damage = "damaged", d
        row.message = damage_message(d)
        row.at = row.at or d["at"]
        if not row.manifest_uri and d["manifest"]:
            row.manifest_uri = store.uri(d["manifest"])
    elif row.status in ("failed", "smoke-failed") and e.failure is not None:
        f = e.failure
        row.stage, row.message, row.at, row.run_id = (
            str(f.get("stage", "")),
            str(f.get("error", "")),
            str(f.get("at", "")),
            str(f.get("run_id", "")),
        )
    elif row.status == "building" and e.building is not None:
        row.message, row.at = f"lease held by {e.building.get('holder', '?')}", str(e.building.get("at", ""))
    return row


def measured(summary: Any) -> dict[str, Any] | None:
    """A row's `measured` from its stored summary, number by number: a figure whose median, p10 or p90 is
    not a finite non-negative number (a forged row) is left out, never the row."""
    if not isinstance(summary, dict) or not isinstance(summary.get("figures"), dict):
        return None
    figures = {}
    for name, values in summary["figures"].items():
        numbers = [finite(v, 0.0) for v in values] if isinstance(values, list) and len(values) == 3 else [None]
        if isinstance(name, str) and None not in numbers:
            figures[name] = dict(zip(("median", "p10", "p90"), numbers, strict=True))
    return {
        "synthetic": summary.get("synthetic") is True,
        "instance_type": str(summary.get("instance_type", "")),
        "runtime_line": str(summary.get("runtime_line", "")),
        "figures": figures,
    }


@dataclass
class FarmQuery:
    """The filters of `ls`, the catalog page and its JSON API: model (substring, any case), profile
    (name or name@version), instance, status (one of STATUSES)."""

    model: str | None = None
    profile: str | None = None
    instance: str | None = None
    status: str | None = None
    published_only: bool = False  # published, stale or damaged (what `ls` lists unless given a status)

    def __post_init__(self) -> None:
        if self.status and self.status not in STATUSES:
            raise InvalidInput(f"status {self.status!r} is not one of {', '.join(STATUSES)}")

    @property
    def empty(self) -> bool:
        return not (self.model or self.profile or self.instance or self.status or self.published_only)

    def matches(self, row: FarmRow) -> bool:
        if self.published_only and row.status not in LISTED:
            return False
        wanted = {k: v for k, v in asdict(self).items() if k != "published_only"}
        return bool(filter_rows([row], **wanted))

    def entry_matcher(self, store: ArtifactStore, newest: dict[str, str]) -> Callable[[Entry], bool]:
        """`matches` for a farm-index entry. A query of status alone (`ls`'s default: published, stale or
        damaged) is decided from the entry's status, without rendering its row (what a page of 2 000
        rows would otherwise cost, twice); a name filter matches the row as shown."""
        if self.model or self.profile or self.instance:
            return lambda e: self.matches(row_of(store, e, newest))

        def match(e: Entry) -> bool:
            status = entry_status(e, newest)
            return (not self.published_only or status in LISTED) and (not self.status or status == self.status)

        return match

    def page_may_match(self, ref: PageRef, newest: dict[str, str]) -> bool:
        """False only when no entry of the page can match (from the head's summary of it)."""
        if self.published_only and not {"published", "damaged"} & set(ref.statuses):
            return False
        if self.instance and self.instance not in ref.instances:
            return False
        if self.profile and not any(self.profile in (p, p.partition("@")[0]) for p in ref.profiles):
            return False
        if self.model and ref.models is not None and not any(self.model.lower() in m.lower() for m in ref.models):
            return False
        if self.status in ("published", "stale"):
            if "published" not in ref.statuses:
                return False
            return any(_stale(p, newest) == (self.status == "stale") for p in ref.profiles)
        return not self.status or self.status in ref.statuses


@dataclass
class FarmPage:
    rows: list[FarmRow]
    # Rows matching the query (see `farm_index.reader` for how exact); None: unknown without reading
    # every page (a model, profile or instance filter that found its page of rows early).
    total: int | None
    offset: int
    counts: dict[str, int]  # status -> rows, all of the farm
    instances: list[str]


def farm_page(
    store: ArtifactStore, query: FarmQuery | None = None, offset: int = 0, limit: int | None = None
) -> FarmPage:
    """One page of the farm view, read from the farm index: the head, the tail and the pages it
    shows. A building row is confirmed against its lease (one read per building row shown)."""
    from neuronforge.artifacts import leases
    from neuronforge.artifacts.farm_index import read_window

    query = query or FarmQuery()
    newest = _newest_refs()
    if query.empty:
        window = read_window(store, offset=offset, limit=limit)
    else:
        window = read_window(
            store,
            match=query.entry_matcher(store, newest),
            page_may_match=lambda ref: query.page_may_match(ref, newest),
            offset=offset,
            limit=limit,
        )
    rows = []
    for e in window.entries:
        row = row_of(store, e, newest)
        if row.status == "building":
            lease = leases.current(store, e.key)
            if not leases.held(lease):
                continue
        rows.append(row)
    counts: dict[str, int] = {s: 0 for s in STATUSES}
    for status, by_profile in window.counts.items():
        for profile, n in by_profile.items():
            shown = "stale" if status == "published" and _stale(profile, newest) else status
            if shown in counts:
                counts[shown] += n
    total = window.total
    if total is None and not (query.model or query.profile or query.instance):
        total = sum(counts[s] for s in (LISTED if query.published_only else (query.status or "",)))
    return FarmPage(rows, total, offset, counts, window.instances)


def damage_message(damage: dict[str, str]) -> str:
    """A damaged row's message: the reason, who found it and when (a damage record's `summary`)."""
    return f"{damage['reason']} (found by {damage['by'] or '?'} at {damage['at'] or '?'})"


def farm_rows(store: ArtifactStore) -> list[FarmRow]:
    """Every row of the farm index (published or stale, smoke-failed or failed, building): reads
    every page; views that show a part of the farm use `farm_page`."""
    return farm_page(store).rows


KEY_MIN, KEY_MAX = 12, 64  # hex characters of a key prefix (`ls` prints 12) and of a whole key


def is_key(key: str) -> bool:
    """A cache key or a prefix `resolve_key` looks up: KEY_MIN to KEY_MAX lower-case hex characters
    (nothing else reaches a store path)."""
    return KEY_MIN <= len(key) <= KEY_MAX and all(c in "0123456789abcdef" for c in key)


def resolve_key(store: ArtifactStore, key: str) -> str | None:
    """The full cache key a key or a prefix of at least KEY_MIN characters names, from one listing
    of `index/` (then `failures/`, `locks/`), never a scan; None when none or several match, or when
    `key` is not one (`is_key`)."""
    if not is_key(key):
        return None
    if len(key) == KEY_MAX:
        return key
    for folder, suffix in (("index", ".json"), ("failures", ".json"), ("locks", "")):
        found = [
            o.key[len(folder) + 1 :].removesuffix(suffix)
            for o in store.list_page(folder, start_after=f"{folder}/{key}", limit=2)
        ]
        found = [k for k in found if k.startswith(key)]
        if len(found) == 1:
            return found[0]
        if len(found) > 1:
            return None
    return None


def farm_row(store: ArtifactStore, key: str) -> tuple[FarmRow, ArtifactManifest | None] | None:
    """One build's row and its manifest, drawn from that artifact's own files (its index pointer,
    manifest and folder listing: three requests for a whole key; a prefix of one adds the listing that
    finds it; the damage record is read only when a file was written after the manifest), else its
    failure record or lease. The artifact is opened as every reader opens it (`opening.open_published`):
    found damaged here (its manifest gone or unreadable, a file missing or of another size) it is
    recorded so, and every listing shows it damaged from then on. A failure record that cannot be read
    as one makes the row a damaged one with the reason; it never fails."""
    from neuronforge.artifacts import leases
    from neuronforge.artifacts.farm_index.entry import (
        building_record,
        damaged_record,
        failure_record,
        published_record,
    )
    from neuronforge.artifacts.opening import open_published
    from neuronforge.artifacts.published import Damage
    from neuronforge.records.base import RecordError
    from neuronforge.records.failure import FailureRecord
    from neuronforge.records.index_entry import IndexEntry
    from neuronforge.stores import NotFound

    full = resolve_key(store, key)
    if full is None:
        return None
    damage = ""
    try:
        opened = open_published(store, full, by="catalog")
    except StoreError:  # a newer neuronforge's manifest: not shown as this one's
        opened = None
    newest = _newest_refs()
    if opened is not None:
        e = Entry(full)
        manifest = opened.manifest
        if manifest is not None:
            index = IndexEntry(cache_key=full, manifest=opened.manifest_key, prefix=opened.prefix)
            e.apply(published_record(index, manifest))
        if opened.record is not None:  # found damaged here, or by a deeper check before (verify's sha256)
            e.apply(damaged_record(opened.record))
        row = row_of(store, e, newest)
        missing = opened.found.missing if isinstance(opened.found, Damage) else ()
        row.incomplete = [f"{path}: missing or wrong size" for path in missing]
        return row.shown(), manifest
    try:
        failure: FailureRecord | None = FailureRecord.read(store, layout.failure_entry(full))
    except NotFound:
        failure = None
    except RecordError as exc:
        failure, damage = None, damage or str(exc)
    if damage:
        return damaged_row(full, damage), None
    lease = None if failure is not None else leases.current(store, full)
    if failure is None and not leases.held(lease):
        return None
    e = Entry(full)
    if failure is not None:
        e.apply(failure_record(failure))
    else:
        at = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(lease.started))
        e.apply(building_record(full, lease.holder, at))
    return row_of(store, e, newest), None


def filter_rows(rows: list[FarmRow], **wanted: str | None) -> list[FarmRow]:
    """Rows matching every given filter: model (substring), profile (name or ref), instance, status."""
    out = rows
    if wanted.get("model"):
        out = [r for r in out if wanted["model"].lower() in r.model.lower()]
    if wanted.get("profile"):
        out = [r for r in out if wanted["profile"] in (r.profile, r.profile_name)]
    if wanted.get("instance"):
        out = [r for r in out if r.instance == wanted["instance"]]
    if wanted.get("status"):
        out = [r for r in out if r.status == wanted["status"]]
    return out
