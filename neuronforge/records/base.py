"""What every stored record is: a typed model, its kind, its schema version, one way in and out.

A record is anything the pipeline writes to a store and reads back (the artifact manifest, an index
entry, a lease, a failure record, ...). Each one is a `StoredRecord` subclass in this package, so the
shape of a record lives in one module and nobody else indexes it by string key.

The version rule, the same for every kind:
- a record carries its schema version under `VERSION_FIELD` (`schema_version` unless the kind has
  always stored it under another name); one without it is refused, unless its kind's readers never
  required it (`UNVERSIONED`: the version such a record is read as);
- a version newer than `SCHEMA` is refused with the upgrade to make (`RecordTooNew`): a reader
  never guesses at fields a later neuronforge added;
- a version older than `SCHEMA` is lifted one step at a time by the class's `UPGRADES` (a function
  per version `v` turning a `v` record into a `v + 1` one), so what earlier releases wrote still
  reads; a version below `OLDEST` (or without an upgrade) is refused as unreadable;
- anything that does not validate is a `RecordError` naming where it was read: a forged or truncated
  record is a store problem, never a traceback.

The bounds, the same for every kind (`read`, `read_versioned`, `from_bytes`; `common.stored_json`):
a record is at most `MAX_BYTES` (a store read asks for no more, `ArtifactStore.read_capped`), strict
UTF-8, nested at most `MAX_DEPTH` deep, its numbers finite and within 64 bits, and each field within
its own bounds (`parts`: `Timestamp`, `Pid`, `Size`, `Seconds`); a folder where its file belongs is
damaged too. Whatever breaks one is a `RecordError` with the reason — the one exception meaning "this
record is damaged", which every reader shows as a damaged row or one line.

Text in and out (`neuronforge.common.stored_text`): every string a record writes goes through
`storable` here (`to_bytes`), so a name that is not UTF-8 (a lone surrogate) is stored as its
`\\xNN` escape (a NUL as `\\x00`) and never makes the stored JSON, or a page showing it,
unencodable; `from_bytes` gives the original back (`original`), so what a record read holds is what
its writer was given, and refuses a record holding a NUL (no writer stores one: it is damaged).

Unlike optimum-neuron's `CacheEntry` (whose base class dispatches to subclasses by a type string), the
base here knows no subclass: a reader names the class it expects.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, ClassVar, Self

from pydantic import BaseModel, ConfigDict, ValidationError

from neuronforge.common import stored_json
from neuronforge.common.errors import StoreError
from neuronforge.common.stored_text import nul_in, original_json, storable_json
from neuronforge.stores.base import NotAFile

if TYPE_CHECKING:
    from neuronforge.stores import ArtifactStore


def compact_json(value: Any) -> bytes:
    """`value` (JSON already `storable`) on one line without spaces: records rewritten often (the farm
    index's tail and head, a page's rows)."""
    return json.dumps(value, sort_keys=True, separators=(",", ":")).encode()


class RecordError(StoreError):
    """A stored record that cannot be read as its kind — not JSON, outside the bounds every record is
    read under (its size, nesting, numbers, encoding; a folder where its file belongs), wrong types, an
    unknown version: damaged, shown as such by every reader (a damaged row, one line), never a traceback.
    `loc` is the path of the first field that did not validate (empty when the whole record failed),
    for readers that say which part of a record is wrong in their own words."""

    def __init__(self, message: str, loc: tuple[str | int, ...] = ()) -> None:
        super().__init__(message)
        self.loc = loc


def invalid(exc: ValidationError, at: str, what: str, whole: str) -> RecordError:
    """`exc`'s first problem as one line: where, what it is not, the field (`whole` when the problem is
    the object itself) and pydantic's words; the field's path kept in `loc`."""
    first = exc.errors()[0]
    field = ".".join(str(p) for p in first["loc"]) or whole
    return RecordError(f"{at}{what}: {field}: {first['msg']}", tuple(first["loc"]))


class RecordTooNew(RecordError):
    """A record written by a newer neuronforge than this one."""


class StoredRecord(BaseModel):
    """Base of every stored record. Subclasses set `KIND` and `SCHEMA` and declare their fields."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    KIND: ClassVar[str]  # what the record is, in messages and the docs ("artifact manifest")
    SCHEMA: ClassVar[int]  # the version this release writes
    OLDEST: ClassVar[int] = 1  # the oldest version this release still reads
    # None: a kind that has never stored its version (the lease, the failure record); every record
    # of it reads as `SCHEMA` and is written without one, as it always was
    VERSION_FIELD: ClassVar[str | None] = "schema_version"
    # The version a record without `VERSION_FIELD` is read as, for a kind whose readers never required
    # the field (records made by hand or by other tools read before, and still do); None: refused.
    UNVERSIONED: ClassVar[int | None] = None
    # v -> a function lifting a version-v record (as a dict) to version v + 1
    UPGRADES: ClassVar[dict[int, Callable[[dict[str, Any]], dict[str, Any]]]] = {}
    # The bounds of a stored record of this kind (module docstring): its size in bytes, and how deep
    # its lists and objects nest. A kind whose records grow with what they list says its own size.
    MAX_BYTES: ClassVar[int] = stored_json.DEFAULT_MAX_BYTES
    MAX_DEPTH: ClassVar[int] = stored_json.MAX_DEPTH

    # -- in ------------------------------------------------------------------------------------
    @classmethod
    def from_json(cls, data: Any, where: str = "") -> Self:
        """`data` (parsed JSON) as this kind, lifted to the current schema; `where` names it in errors."""
        at = f"{where}: " if where else ""
        if not isinstance(data, dict):
            article = "an" if cls.KIND[:1] in "aeiou" else "a"
            raise RecordError(f"{at}not {article} {cls.KIND} (a JSON object was expected, found {type(data).__name__})")
        if cls.VERSION_FIELD is None:
            return cls._validated(dict(data), at)
        version = data.get(cls.VERSION_FIELD, cls.UNVERSIONED)
        if not isinstance(version, int) or isinstance(version, bool):
            raise RecordError(f"{at}{cls.KIND} has no readable {cls.VERSION_FIELD} ({version!r})")
        if version > cls.SCHEMA:
            raise RecordTooNew(
                f"{at}{cls.KIND} has schema {version}, this neuronforge reads up to {cls.SCHEMA}; "
                "upgrade neuronforge on this host to read it"
            )
        if version < cls.OLDEST:
            raise RecordError(f"{at}{cls.KIND} has schema {version}, older than {cls.OLDEST}, the oldest still read")
        data = dict(data)
        while version < cls.SCHEMA:
            lift = cls.UPGRADES.get(version)
            if lift is None:
                raise RecordError(f"{at}{cls.KIND} has schema {version}, which this neuronforge cannot read")
            data = lift(data)
            version += 1
        data.pop(cls.VERSION_FIELD, None)
        return cls._validated(data, at)

    @classmethod
    def _validated(cls, data: dict[str, Any], at: str) -> Self:
        try:
            return cls.model_validate(data)
        except ValidationError as exc:
            raise invalid(exc, at, f"not a valid {cls.KIND}", "(record)") from None

    @classmethod
    def from_bytes(cls, raw: bytes, where: str = "") -> Self:
        """The record in `raw`, read under this kind's bounds (module docstring)."""
        at = f"{where}: " if where else ""
        try:
            data = stored_json.loads(raw, cls.MAX_BYTES, cls.MAX_DEPTH)
        except (stored_json.NotText, json.JSONDecodeError) as exc:
            raise RecordError(f"{at}{cls.KIND} is not valid JSON: {exc}") from None
        except ValueError as exc:  # outside the bounds (`Unreadable`): damaged, whatever it holds
            raise RecordError(f"{at}{cls.KIND} is damaged: {exc}") from None
        nul = nul_in(data)
        if nul is not None:  # `to_bytes` writes none: not a record a writer wrote
            raise RecordError(f"{at}{cls.KIND} holds a NUL character in {nul}", (nul,))
        return cls.from_json(original_json(data), where)

    @classmethod
    def read(cls, store: ArtifactStore, key: str) -> Self:
        """The record at `key` (a missing key raises the store's own NotFound, a store that cannot be
        read its StoreError; anything there that is not such a record, a `RecordError`)."""
        return cls.read_versioned(store, key)[0]

    @classmethod
    def read_versioned(cls, store: ArtifactStore, key: str) -> tuple[Self, str]:
        """The record at `key` and the store's version of it (for a compare-and-swap that rewrites it),
        reading no more than `MAX_BYTES + 1` bytes; raises as `read`."""
        raw, version = cls.read_raw(store, key)
        return cls.from_bytes(raw, store.uri(key)), version

    @classmethod
    def read_raw(cls, store: ArtifactStore, key: str) -> tuple[bytes, str]:
        """The bytes at `key` as this kind reads them (at most `MAX_BYTES + 1`) and their version; a
        folder where the record's file belongs is a damaged record (`RecordError`)."""
        try:
            return store.read_capped(key, cls.MAX_BYTES)
        except NotAFile as exc:
            raise RecordError(f"{exc.uri}: {cls.KIND} is damaged: it is a folder, not a file") from None

    # -- out -----------------------------------------------------------------------------------
    def to_json(self) -> dict[str, Any]:
        """The record as stored: its fields plus the schema version."""
        fields = self.model_dump(mode="json", by_alias=True)
        return fields if self.VERSION_FIELD is None else {self.VERSION_FIELD: self.SCHEMA, **fields}

    def stored_json(self) -> dict[str, Any]:
        """`to_json` as written: every string `storable` (see the module docstring). A kind that
        writes its own bytes (`to_bytes`) dumps this."""
        return storable_json(self.to_json())

    def to_bytes(self) -> bytes:
        """The record as stored: the one writer of its kind (`write`, `write_if_absent`, a tree's
        `localcache.publish_tree`, `local.write_local` all write these bytes). A kind stored in another
        layout overrides it, dumping `stored_json` (tests/records/test_record_writers.py checks both)."""
        return json.dumps(self.stored_json(), indent=2, sort_keys=True).encode() + b"\n"

    def write(self, store: ArtifactStore, key: str) -> None:
        store.put_bytes(self.to_bytes(), key)

    def write_if_absent(self, store: ArtifactStore, key: str) -> bool:
        """Create the record unless `key` exists (True when this call created it)."""
        return store.put_if_absent(self.to_bytes(), key)
