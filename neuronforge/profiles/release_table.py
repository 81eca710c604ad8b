"""The release table: every Neuron SDK release neuronforge knows, one data file per release
(`releases/<version>.toml`, a `records.sdk_release.SdkReleaseEntry`), the pages they cite
(`releases/sources.toml`) and what each serving line is beyond its releases (`releases/lines.toml`).

Every view of those facts is derived here, so each fact is written once: the SDK releases an upgrade
knows (`sdk_releases`), each line's lifecycle per instance family (`lifecycle`: consecutive releases
with the same status and note collapse into one phase; a release that says nothing of a family keeps
its status), and the releases a profile line is registered for with the packages they pin
(`profile_releases`). The profile modules keep the behaviour (loader rules, preflight, launch files),
keyed by plugin version where it varies; the worker images' files and the docs' tables are rendered
from the same table (`neuronforge.interfaces.release_files`, `neuronforge.interfaces.lifecycle_table`).

Adding a release whose behaviour is known is one data file. A bad entry is one line naming the file
and the field (`ReleaseTableError`).
"""

from __future__ import annotations

import tomllib
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from functools import cache
from itertools import pairwise
from pathlib import Path
from typing import Any

from neuronforge.common.errors import InvalidInput
from neuronforge.profiles.lifecycle import (
    Dispute,
    FamilyLifecycle,
    Lifecycle,
    LineRelease,
    Phase,
    SdkRelease,
    Source,
    Status,
    release_key,
    series,
)
from neuronforge.records.base import RecordError
from neuronforge.records.sdk_release import Package, PackageReads, SdkReleaseEntry

TABLE = Path(__file__).resolve().parent / "releases"
SOURCES_FILE = "sources.toml"
LINES_FILE = "lines.toml"
SERVING = (Status.ACTIVE, Status.MAINTENANCE)
ENDED = (Status.FROZEN, Status.END_OF_SUPPORT)


class ReleaseTableError(InvalidInput):
    """A file of the release table that does not read: `<file>: <field>: <why>`, one line."""


@dataclass(frozen=True)
class LineFacts:
    """What a serving line is beyond its releases (`lines.toml`)."""

    summary: str
    families: tuple[str, ...]  # family groups in table order: "inf2", "trn1/trn1n"
    moves_to: dict[str, str] = field(default_factory=dict)
    reads: tuple[PackageReads, ...] = ()  # which packages its builds, keys and loads read

    def role_of(self, package: str) -> PackageReads | None:
        """The role `package` (a pip name) has for the line; None: not classified."""
        return next((r for r in self.reads if package in r.packages), None)


@dataclass(frozen=True)
class Table:
    entries: tuple[SdkReleaseEntry, ...]  # oldest first
    sources: dict[str, Source]
    lines: dict[str, LineFacts]
    display: dict[str, str]  # package name -> how it is spoken of
    folder: Path

    def entry(self, version: str) -> SdkReleaseEntry | None:
        return next((e for e in self.entries if e.version == version), None)


@dataclass(frozen=True)
class ProfileRelease:
    """A release a profile line is registered for: what its profile version reads from the table."""

    sdk: str
    packages: dict[str, Package]  # the packages its line entry names (`profile`), by name
    image: str | None  # the release's image serving the line (None: no image ships it)
    source: Source  # where the line's release was read
    families: frozenset[str]  # the instance families the line serves at this release

    def version(self, name: str) -> str:
        """The package's version as its wheel reports it (local label included)."""
        return self.packages[name].full


def _read_toml(path: Path) -> dict[str, Any]:
    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise ReleaseTableError(f"{path}: not readable TOML: {exc}") from None


def _text(path: Path, where: str, value: Any) -> str:
    if not isinstance(value, str):
        raise ReleaseTableError(f"{path}: {where}: text expected, found {type(value).__name__}")
    return value


def _sources(path: Path) -> dict[str, Source]:
    out = {}
    for sid, raw in _read_toml(path).items():
        if not isinstance(raw, dict) or set(raw) - {"title", "url", "quote"} or not {"title", "url"} <= set(raw):
            raise ReleaseTableError(f"{path}: {sid}: a source is a table of title, url and (optionally) quote")
        url = _text(path, f"{sid}.url", raw["url"])
        if not url.startswith("https://"):
            raise ReleaseTableError(f"{path}: {sid}.url: {url!r} is not an https:// address")
        title = _text(path, f"{sid}.title", raw["title"])
        out[sid] = Source(title, url, _text(path, f"{sid}.quote", raw.get("quote", "")))
    return out


def _lines(path: Path) -> tuple[dict[str, LineFacts], dict[str, str]]:
    raw = _read_toml(path)
    unknown = set(raw) - {"display", "lines"}
    if unknown:
        raise ReleaseTableError(f"{path}: {sorted(unknown)[0]}: unknown table (display, lines)")
    display = {k: _text(path, f"display.{k}", v) for k, v in raw.get("display", {}).items()}
    lines = {}
    for name, facts in raw.get("lines", {}).items():
        at = f"lines.{name}"
        if not isinstance(facts, dict) or set(facts) - {"summary", "families", "moves_to", "reads"}:
            raise ReleaseTableError(f"{path}: {at}: a line has summary, families and (optionally) moves_to, reads")
        families = facts.get("families")
        if not isinstance(families, list) or not families:
            raise ReleaseTableError(f"{path}: {at}.families: a list of instance families (groups as trn1/trn1n)")
        groups = tuple(_text(path, f"{at}.families", f) for f in families)
        moves = {k: _text(path, f"{at}.moves_to.{k}", v) for k, v in facts.get("moves_to", {}).items()}
        for group in moves:
            if group not in groups:
                raise ReleaseTableError(f"{path}: {at}.moves_to.{group}: not one of the line's families")
        reads = _reads(path, at, facts.get("reads", []))
        lines[name] = LineFacts(_text(path, f"{at}.summary", facts.get("summary", "")), groups, moves, reads)
    return lines, display


def _reads(path: Path, at: str, raw: Any) -> tuple[PackageReads, ...]:
    """A line's package roles: each a `PackageReads`; a package in one role only."""
    from pydantic import ValidationError

    if not isinstance(raw, list):
        raise ReleaseTableError(f"{path}: {at}.reads: a list of tables (role, packages, source, why)")
    out = []
    for i, item in enumerate(raw):
        try:
            out.append(PackageReads.model_validate(item))
        except ValidationError as exc:
            err = exc.errors()[0]
            where = ".".join(str(x) for x in err["loc"])
            raise ReleaseTableError(f"{path}: {at}.reads.{i}.{where}: {err['msg']}") from None
    seen: dict[str, str] = {}
    for r in out:
        for name in r.packages:
            if name in seen:
                raise ReleaseTableError(f"{path}: {at}.reads: {name!r} is both {seen[name]} and {r.role}")
            seen[name] = r.role
    return tuple(out)


def read_entry(path: Path) -> SdkReleaseEntry:
    """One release file as its record (the same model a store holds as JSON)."""
    data = _read_toml(path)
    data.setdefault("schema_version", SdkReleaseEntry.SCHEMA)
    try:
        entry = SdkReleaseEntry.from_json(data, str(path))
    except RecordError as exc:
        raise ReleaseTableError(str(exc)) from None
    if f"{entry.version}.toml" != path.name:
        raise ReleaseTableError(f"{path}: version: {entry.version!r} is not the file's name")
    return entry


def _check_refs(
    path: Path | str, entry: SdkReleaseEntry, sources: dict[str, Source], lines: dict[str, LineFacts]
) -> None:
    """Every source id, line and family group the entry names exists (a source: in `sources.toml` or
    among the entry's own), and no source of its own takes an id of `sources.toml`."""
    for sid in entry.own_sources:
        if sid in sources:
            raise ReleaseTableError(f"{path}: own_sources.{sid}: the id of a source in {SOURCES_FILE}")

    def cited(where: str, sid: str) -> None:
        if sid and sid not in sources and sid not in entry.own_sources:
            raise ReleaseTableError(f"{path}: {where}: unknown source {sid!r} (not in {SOURCES_FILE})")

    for i, sid in enumerate(entry.sources):
        cited(f"sources.{i}", sid)
    for i, p in enumerate(entry.packages):
        cited(f"packages.{i}.source", p.source)
        for j, r in enumerate(p.disputed):
            cited(f"packages.{i}.disputed.{j}.source", r.source)
    for i, image in enumerate(entry.images):
        cited(f"images.{i}.source", image.source)
        for line in image.lines:
            if line not in lines:
                raise ReleaseTableError(f"{path}: images.{i}.lines: unknown line {line!r} (not in {LINES_FILE})")
    for line, le in entry.lines.items():
        if line not in lines:
            raise ReleaseTableError(f"{path}: lines.{line}: unknown line (not in {LINES_FILE})")
        cited(f"lines.{line}.source", le.source)
        for group, st in le.status.items():
            if group not in lines[line].families:
                raise ReleaseTableError(
                    f"{path}: lines.{line}.status.{group}: not one of the line's families "
                    f"({', '.join(lines[line].families)})"
                )
            cited(f"lines.{line}.status.{group}.source", st.source)
            for j, r in enumerate(st.disputed):
                cited(f"lines.{line}.status.{group}.disputed.{j}.source", r.source)


def load(folder: Path | None = None) -> Table:
    """The table in `folder` (the package's own when None), read and checked once per folder."""
    return _load(Path(folder or TABLE).resolve())


@cache
def _load(folder: Path) -> Table:
    sources = _sources(folder / SOURCES_FILE)
    lines, display = _lines(folder / LINES_FILE)
    entries = []
    for path in sorted(folder.glob("*.toml")):
        if path.name in (SOURCES_FILE, LINES_FILE):
            continue
        entry = read_entry(path)
        _check_refs(path, entry, sources, lines)
        entries.append(entry)
    entries.sort(key=lambda e: release_key(e.version))
    for a, b in pairwise(entries):
        if release_key(a.version) == release_key(b.version):
            raise ReleaseTableError(f"{folder}: {a.version} and {b.version} name the same release")
    cited = {sid for e in entries for sid in _cited(e)} | {r.source for f in lines.values() for r in f.reads}
    for name, facts in lines.items():
        for r in facts.reads:
            if r.source not in sources:
                raise ReleaseTableError(f"{folder / LINES_FILE}: lines.{name}.reads: unknown source {r.source!r}")
    known = {n for e in entries for p in e.packages for n in (p.name, p.distribution)}
    for name, facts in lines.items():
        for r in facts.reads:
            for package in r.packages:
                if package not in known:
                    raise ReleaseTableError(
                        f"{folder / LINES_FILE}: lines.{name}.reads: {package!r} is in no release's packages"
                    )
    unused = sorted(set(sources) - cited)
    if unused:
        raise ReleaseTableError(f"{folder / SOURCES_FILE}: {unused[0]}: cited by no release")
    table = Table(tuple(entries), sources, lines, display, folder)
    for name in lines:
        for group in lines[name].families:
            if not any(group in (e.lines.get(name).status if e.lines.get(name) else {}) for e in entries):
                raise ReleaseTableError(f"{folder / LINES_FILE}: lines.{name}.families: no release states {group}")
    return table


_IN_EFFECT: ContextVar[Table | None] = ContextVar("release_table", default=None)


def current() -> Table:
    """The table decisions read: the package's own, or the one an edge put in effect (`in_effect`: the
    table plus a store's accepted releases), so no decision reads a store by itself."""
    return _IN_EFFECT.get() or load()


@contextmanager
def in_effect(table: Table) -> Iterator[None]:
    """`table` answers `current()` until the block ends (`profiles.sdk_releases.in_effect` sets it)."""
    token = _IN_EFFECT.set(table)
    try:
        yield
    finally:
        _IN_EFFECT.reset(token)


def extended(table: Table, entries: Iterable[SdkReleaseEntry], where: str) -> Table:
    """`table` plus entries held elsewhere (a store's accepted releases, read at the edge:
    `farm.release_feed.known_table`), each checked as a file of the table is, its own sources added
    under their ids. A release the table knows as released stays the table's (what neuronforge ships is
    reviewed data); one it knows only as announced takes the entry, keeping what the announcement said
    of the lines. No entry adds or changes a profile version: that needs a data file and known behaviour."""
    by_key = {release_key(e.version): e for e in table.entries}
    sources = dict(table.sources)
    for entry in entries:
        _check_refs(f"{where}: {entry.version}", entry, table.sources, table.lines)
        if any(le.profile is not None for le in entry.lines.values()):
            raise ReleaseTableError(f"{where}: {entry.version}: lines: a profile version is registered in a data file")
        known = by_key.get(release_key(entry.version))
        if known is not None and known.released:
            continue
        if known is not None:
            entry = entry.model_copy(
                update={"lines": {**known.lines, **entry.lines}, "notes": (*entry.notes, *known.notes)}
            )
        sources.update({sid: Source(p.title, p.url, p.quote) for sid, p in entry.own_sources.items()})
        by_key[release_key(entry.version)] = entry
    entries_ = tuple(by_key[k] for k in sorted(by_key))
    return Table(entries_, sources, table.lines, table.display, table.folder)


def _cited(entry: SdkReleaseEntry) -> list[str]:
    out = [*entry.sources]
    for p in entry.packages:
        out += [p.source, *(r.source for r in p.disputed)]
    out += [i.source for i in entry.images]
    for le in entry.lines.values():
        out.append(le.source)
        for st in le.status.values():
            out += [st.source, *(r.source for r in st.disputed)]
    return out


# -- the views ----------------------------------------------------------------------------------
def sdk_releases(table: Table | None = None) -> tuple[SdkRelease, ...]:
    """Each release as the upgrade knows it (`profiles.sdk_releases.RELEASES`)."""
    t = table or load()
    out = []
    for e in t.entries:
        cc = e.package("neuronx-cc")
        out.append(
            SdkRelease(
                e.version,
                e.date,
                cc.version if cc else "",
                released=e.released,
                notes=e.notes,
                sources=tuple(t.sources[s] for s in e.sources),
            )
        )
    return tuple(out)


def lifecycle(line: str, table: Table | None = None) -> Lifecycle:
    """Line `line`'s lifecycle per family, derived from the releases' statuses."""
    t = table or load()
    facts = t.lines[line]
    families = tuple(_family(t, line, group, facts.moves_to.get(group) or None) for group in facts.families)
    releases = []
    for e in t.entries:
        le = e.lines.get(line)
        if le is not None and le.ships:
            ships = ", ".join(f"{t.display.get(n, n)} {e.package(n).version}" for n in le.ships)  # type: ignore[union-attr]
            releases.append(LineRelease(e.version, e.date, ships, t.sources[le.source]))
    return Lifecycle(line=line, families=families, releases=tuple(releases), summary=facts.summary)


def _family(t: Table, line: str, group: str, moves_to: str | None) -> FamilyLifecycle:
    phases: list[Phase] = []
    stated_series: set[str] = set()
    current: Status | None = None
    last_served: str | None = None
    ended = False
    for e in t.entries:
        le = e.lines.get(line)
        st = le.status.get(group) if le else None
        if st is not None:
            status = Status(st.status)
            disputed = tuple(Dispute(r.value, t.sources[r.source], r.note) for r in st.disputed)
            last = phases[-1] if phases else None
            if not (last and last.status is status and last.note == st.note and last.disputed == disputed):
                since = e.version if series(e.version) in stated_series else series(e.version)
                phases.append(Phase(since, status, t.sources[st.source], st.note, disputed))
            stated_series.add(series(e.version))
            current = status
        if not e.released:
            continue
        if current in SERVING:
            last_served, ended = series(e.version), False
        elif current in ENDED and last_served is not None:
            ended = True
    return FamilyLifecycle(tuple(group.split("/")), tuple(phases), last_served if ended else None, moves_to)


def profile_releases(line: str, table: Table | None = None) -> tuple[ProfileRelease, ...]:
    """The releases line `line` is registered for (its entries with `profile`), oldest first."""
    t = table or load()
    lc = lifecycle(line, t)
    out = []
    for e in t.entries:
        le = e.lines.get(line)
        if le is None or le.profile is None:
            continue
        families = frozenset(f for fam in lc.families if fam.serves(e.version) for f in fam.families)
        image = next((i.name for i in e.images if line in i.lines), None)
        packages = {n: p for n in le.profile if (p := e.package(n)) is not None}
        out.append(ProfileRelease(e.version, packages, image, t.sources[le.source], families))
    return tuple(out)


def profile_release(line: str, sdk: str, table: Table | None = None) -> ProfileRelease:
    found = next((r for r in profile_releases(line, table) if r.sdk == sdk), None)
    if found is None:
        raise ReleaseTableError(f"{line}: the release table registers no profile version for SDK {sdk}")
    return found
