"""The farm index's records (`neuronforge.artifacts.farm_index`): the log records writers append, the tail that
holds them, a row of the pages, and the head that names the pages.

    farm-index/tail.json                          `FarmIndexTail`: {"schema", "next_seq", "records": [LogRecord]}
    farm-index/head.json                          `FarmIndexHead`: {"schema", "seq", "pages": [PageRef], ...}
    farm-index/pages/<seq>-<token>-<n>.jsonl.gz   one `Entry` per line (versioned by the head naming them)

The tail and the head have always stored their version under `schema`. What does not validate is
never trusted: the farm index turns a `RecordError` of the tail or the head into `IndexCorrupt` and
rebuilds from the manifests; a line of a page that is not a row (a forged page whose checksum was
recomputed: a number where the readers sort, filter and render text, a list where they read a
record) is read as one row marked `unreadable`, shown damaged, the rest of the page as it is. The summary of a published
artifact inside a row stays free-form: its numbers are read with `stored_numbers` one by one (a
forged one costs that number, not the row).
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Annotated, Any, ClassVar

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, StrictInt, StrictStr

from neuronforge.common.stored_text import storable_json
from neuronforge.records.base import StoredRecord, compact_json
from neuronforge.records.parts import AnyObject, Text

KINDS = ("published", "failed", "building", "deleted", "channel", "review", "damaged", "attested")


def _stamped(value: dict[str, Any]) -> dict[str, Any]:
    if not isinstance(value.get("at", ""), str):
        raise ValueError("its `at` is not text")
    return value


# A part of a row (the published summary, the last failure, a build in progress): an object whose
# `at`, when present, is text (readers compare and show it).
Stamped = Annotated[dict[str, Any], AfterValidator(_stamped)]


class LogRecord(BaseModel):
    """One change to one cache key, as appended to the tail (`farm_index.notes`): `kind` says which
    part of the row it sets. Fields a builder did not set are not stored (`to_json`)."""

    model_config = ConfigDict(frozen=True, extra="allow")

    kind: StrictStr  # one of KINDS (another folds into nothing)
    key: StrictStr
    seq: StrictInt | None = None  # given by the append
    model: Text = ""
    profile: Text = ""  # ref, name@version
    target: Text = ""  # slug
    instance: Text = ""
    published: Stamped | None = None
    failure: Stamped | None = None
    building: Stamped | None = None
    # A release channel moved onto (`on`: true) or off this key: {"channel", "on", "by", "at", "action"}
    channel: Stamped | None = None
    # The build's review decision: {"state", "by", "at", "reason"}
    review: Stamped | None = None
    # The published artifact was found damaged: {"reason", "at", "by", "manifest"} (`DamageRecord.summary`)
    damage: Stamped | None = None
    # The build's attestations changed: {"releases": [the releases it is attested for now], "at"}
    attested: Stamped | None = None

    def to_json(self) -> dict[str, Any]:
        return self.model_dump(mode="json", exclude_unset=True)

    def numbered(self, seq: int) -> LogRecord:
        return self.model_copy(update={"seq": seq})


def _numbered(records: list[LogRecord]) -> list[LogRecord]:
    if any(r.seq is None for r in records):
        raise ValueError("a record without its sequence number")
    return records


class FarmIndexTail(StoredRecord):
    """The records written since the last compaction (`farm_index.log`)."""

    KIND: ClassVar[str] = "farm-index tail"
    SCHEMA: ClassVar[int] = 1
    VERSION_FIELD: ClassVar[str] = "schema"
    MAX_BYTES: ClassVar[int] = 16 * 1024 * 1024  # COMPACT_AT records of ~300 bytes; far more when compaction fails

    next_seq: StrictInt
    records: Annotated[list[LogRecord], AfterValidator(_numbered)] = Field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        records = [r.to_json() for r in self.records]
        return {self.VERSION_FIELD: self.SCHEMA, "next_seq": self.next_seq, "records": records}

    def to_bytes(self) -> bytes:
        """Compact: the tail is rewritten on every publish, failure and lease of the store."""
        return compact_json(self.stored_json())


class Entry(BaseModel):
    """One row of the farm index: what the store knows of one cache key — the published artifact's
    summary (from its manifest), the last failure, and a build in progress. Rows are folded from log
    records (`apply`) and stored as lines of a page; a field of the wrong type in a page is a
    ValidationError (a ValueError: the page is corrupt and rebuilt)."""

    model_config = ConfigDict(strict=True, extra="ignore", validate_assignment=False)

    key: StrictStr
    model: StrictStr = ""
    profile: StrictStr = ""  # ref, name@version
    target: StrictStr = ""  # slug
    instance: StrictStr = ""
    # The published artifact's summary (None: not published, or deleted since).
    published: Stamped | None = None
    # The last failed build of the key (`failures/<key>.json`), kept even once published: the
    # manifest wins, as `failures` says.
    failure: Stamped | None = None
    # A build took the key's lease (holder, started); readers confirm it against `locks/<key>`.
    building: Stamped | None = None
    # The release channels (of this row's model and profile line) that point to this build now.
    channels: list[StrictStr] = Field(default_factory=list)
    # The build's review decision (None: pending).
    review: Stamped | None = None
    # The published artifact was found damaged since it was published (its manifest gone, a file
    # missing or of another size): {"reason", "at", "by", "manifest"}. Cleared by the key's next publish.
    damage: Stamped | None = None
    # The newer Neuron SDK releases the build is attested for without a rebuild (`records.attestation`:
    # the newest attestation of each passed), sorted.
    attested: list[StrictStr] = Field(default_factory=list)
    # Never stored: set by the reader (`snapshot.read_page`) for a line of a page that is not a row
    # (not JSON, not UTF-8, a field of the wrong type, a NUL): why, in one line. The row shows as
    # damaged with it (`farm.rows.damaged_row`) and the rest of the page as usual; the next
    # compaction drops it and recovers what the store's markers say.
    unreadable: StrictStr = ""

    def __init__(self, *args: Any, **data: Any) -> None:
        """Fields by position (key first) or by name, as the dataclass it replaces took them."""
        data.update(zip(type(self).model_fields, args, strict=False))
        super().__init__(**data)

    @classmethod
    def from_json(cls, data: Any) -> Entry:
        """A row as stored; a field of the wrong type is a ValueError (pydantic's ValidationError)."""
        return cls.model_validate(data)

    def to_json(self) -> dict[str, Any]:
        return {k: v for k, v in self.model_dump(exclude={"unreadable"}).items() if v not in (None, "", [])}

    def to_line(self) -> bytes:
        """The row as a line of its page (without the newline): compact, every string `storable`, as
        every record is written (`StoredRecord.stored_json`)."""
        return compact_json(storable_json(self.to_json()))

    @property
    def sort_key(self) -> tuple[str, str, str, str]:
        return (self.model, self.profile, self.target, self.key)

    @property
    def status_class(self) -> str:
        """damaged, published, smoke-failed, failed or building (stale is decided by the reader): a row
        that could not be read, or an artifact found damaged since it was published — which stays
        damaged until a build of its key starts or fails after it was found."""
        if self.unreadable:
            return "damaged"
        if self.damage is not None:
            found = str(self.damage.get("at", ""))
            if not any(p is not None and str(p.get("at", "")) > found for p in (self.failure, self.building)):
                return "damaged"
        if self.published is not None and self.damage is None:
            return "published"
        if self.failure is not None and (self.building is None or self.failure["at"] >= self.building["at"]):
            return "smoke-failed" if self.failure.get("stage") == "smoke" else "failed"
        if self.building is not None:
            return "building"
        return "failed" if self.failure is not None else "deleted"

    @property
    def empty(self) -> bool:
        return (
            self.published is None
            and self.failure is None
            and self.building is None
            and self.damage is None
            and not self.unreadable
        )

    def apply(self, record: LogRecord) -> None:
        """Fold one log record into this row."""
        kind = record.kind
        for name in ("model", "profile", "target", "instance"):
            value = getattr(record, name)
            if value and (kind == "published" or not getattr(self, name)):
                setattr(self, name, value)
        if kind == "published" and record.published is not None:
            self.published, self.building, self.damage = dict(record.published), None, None
        elif kind == "failed" and record.failure is not None:
            self.failure, self.building = dict(record.failure), None
        elif kind == "building" and record.building is not None:
            self.building = dict(record.building)
        elif kind == "deleted":
            self.published, self.channels, self.review, self.damage, self.attested = None, [], None, None, []
        elif kind == "damaged" and record.damage is not None:
            self.damage = dict(record.damage)
        elif kind == "channel" and record.channel is not None:
            name = str(record.channel.get("channel") or "")
            kept = [c for c in self.channels if c != name]
            self.channels = sorted([*kept, name]) if record.channel.get("on") is True and name else kept
        elif kind == "review" and record.review is not None:
            self.review = dict(record.review)
        elif kind == "attested" and record.attested is not None:
            releases = record.attested.get("releases")
            self.attested = sorted(str(r) for r in releases) if isinstance(releases, list) else []


PAGES = "farm-index/pages"  # the folder of every page (`farm_index.snapshot` writes them there)


def _page_key(key: str) -> str:
    """A page's key as its head names it: a file of `farm-index/pages/` (a forged head names another)."""
    name = key.removeprefix(f"{PAGES}/")
    if name == key or not name or "/" in name or name in (".", "..") or "\x00" in name:
        raise ValueError(f"{key[:100]!r} is not a page of {PAGES}")
    return key


class PageRef(BaseModel):
    """One page as its head names it: where, how many rows, its sha256, and what it holds (the sort
    keys of its first and last rows, its profiles, instances, statuses, models) so a filtered read
    skips the pages that cannot match."""

    model_config = ConfigDict(frozen=True, strict=True, extra="forbid")

    key: Annotated[str, AfterValidator(_page_key)]
    rows: int
    sha256: str
    first: list[str]  # sort key of the first entry
    last: list[str]
    profiles: list[str]
    instances: list[str]
    statuses: list[str]
    models: list[str] | None = None  # None: too many to list

    def may_hold(self, models: Collection[str]) -> bool:
        """Whether a row of one of `models` can be on this page. Rows are sorted by model first, so a
        page holds only models from its first row's to its last row's (`first[0]`..`last[0]`): a reader
        picks the pages of a few models by range however many models each page holds — every head
        ever written records them, so no stored head needs another form. Where the page lists its
        models, only those."""
        if self.models is not None:
            return any(m in self.models for m in models)
        if not self.first or not self.last:  # no range to go by (a forged head): it may
            return True
        return any(self.first[0] <= m <= self.last[0] for m in models)


class FarmIndexHead(StoredRecord):
    """The snapshot's head (`farm_index.snapshot`): the last tail record folded in (`seq`), the pages,
    and what the summary and the filters need without reading a page (`aggregates`)."""

    KIND: ClassVar[str] = "farm-index head"
    SCHEMA: ClassVar[int] = 1
    VERSION_FIELD: ClassVar[str] = "schema"
    MAX_BYTES: ClassVar[int] = 64 * 1024 * 1024  # ~10 KiB per page of 2000 rows: 10 million rows

    seq: StrictInt = 0
    pages: list[PageRef] = Field(default_factory=list)
    aggregates: AnyObject = Field(default_factory=dict)
    built_at: Text = ""

    def to_bytes(self) -> bytes:
        """Compact, as the tail (`FarmIndexTail.to_bytes`)."""
        return compact_json(self.stored_json())

    @property
    def rows(self) -> int:
        return sum(p.rows for p in self.pages)
