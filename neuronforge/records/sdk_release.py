"""One Neuron SDK release as neuronforge knows it: an entry of the release table
(`neuronforge/profiles/releases/<version>.toml`, loaded by `neuronforge.profiles.release_table`).

Facts about the outside world are data, each written once with the source it was read from: the
release's date, its package versions (public version, local label, the manifest's supported
instances), the images that carry them, and per serving line what the release ships for it, its
status per instance family and — for the releases neuronforge builds for — the packages the profile
pins. Every view (the SDK releases the upgrade knows, each line's lifecycle, the profiles' pins, the
worker images' pins files and `images.json`, the docs' tables) is derived from these entries.

Where two sources disagree the entry records both (`Reading`: what the other source says, and where)
beside the value it uses — for a package, the one the images actually carry — as a typed field, not a
comment, so the disagreement is visible to every reader and to the next release's diff.

A `StoredRecord` kind: the same model is read from the TOML file in the package and, as JSON, from a
store (a proposed entry, not yet in the package: `records.proposed_release`), and its JSON form
round-trips. Sources are cited by id (`neuronforge/profiles/releases/sources.toml`); an entry held in a
store carries the pages only it cites with it (`own_sources`: the release manifest it was read from),
since the package's `sources.toml` cannot name them. The table's loader checks every id, line and family
named here resolves.
"""

from __future__ import annotations

import re
from typing import Annotated, ClassVar, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, StrictBool, StrictStr, model_validator

from neuronforge.records.base import StoredRecord

VERSION = re.compile(r"[0-9]{1,6}\.[0-9]{1,6}(\.[0-9]{1,6})?")  # ASCII digits: `\d` takes ٣, `isdigit` ³ too
DATE = re.compile(r"\d{4}-\d{2}-\d{2}")
STATUSES = ("active", "maintenance", "frozen", "end-of-support", "not-served")


def _release_version(value: str) -> str:
    if not VERSION.fullmatch(value):
        raise ValueError(f"{value!r} is not an SDK release (2.33 or 2.33.1)")
    return value


def _date(value: str) -> str:
    if value and not DATE.fullmatch(value):
        raise ValueError(f"{value!r} is not a date (YYYY-MM-DD, or empty with date_note saying why)")
    return value


ReleaseVersion = Annotated[StrictStr, AfterValidator(_release_version)]
Date = Annotated[StrictStr, AfterValidator(_date)]
SourceId = Annotated[StrictStr, Field(min_length=1)]


class Fact(BaseModel):
    """A part of an entry: strict, so a misspelt key in a hand-written file is an error, not a default."""

    model_config = ConfigDict(frozen=True, extra="forbid")


class SourcePage(Fact):
    """A page an entry cites that the package's `sources.toml` does not hold: where a store-held entry
    was read (the release manifest: its https:// address or the store URI of its mirror)."""

    title: StrictStr
    url: Annotated[StrictStr, Field(pattern=r"^(https?|s3|file)://")]
    quote: StrictStr = ""


class Reading(Fact):
    """What another source says where the entry's value is disputed."""

    value: StrictStr
    source: SourceId
    note: StrictStr = ""


class Package(Fact):
    """One package of the release: its public version, its local label where a source gives it (the
    wheel then reports `version+label`), and where it was read."""

    name: StrictStr  # unique in the entry; the pip name unless `pip` says otherwise
    version: StrictStr
    source: SourceId
    label: StrictStr = ""
    pip: StrictStr = ""  # the distribution's name where two packages of the release share it
    instances: tuple[StrictStr, ...] = ()  # the manifest's `supported_instances`, where read
    note: StrictStr = ""  # shown beside its pin in the worker's pins file
    # Other sources giving another version; `version` is the one the images carry.
    disputed: tuple[Reading, ...] = ()

    @property
    def distribution(self) -> str:
        return self.pip or self.name

    @property
    def full(self) -> str:
        """The version as the installed wheel reports it (`2.27.5334.0+f702b353`)."""
        return f"{self.version}+{self.label}" if self.label else self.version


class Image(Fact):
    """A container image of the release (a DLC): the lines it serves and, for the one neuronforge's
    worker image of this release is built FROM (`worker`), the layout facts the worker relies on."""

    name: StrictStr  # repository:tag
    source: SourceId
    lines: tuple[StrictStr, ...] = ()
    worker: StrictBool = False
    python: StrictStr = ""  # the version of the Python that holds the SDK
    interpreters: tuple[StrictStr, ...] = ()
    toolchain_python: StrictStr = ""
    verified: StrictBool = True  # False: the layout is inferred, not read from this image's Dockerfile
    evidence: StrictStr = ""  # how the layout was read (images.json's `source`)

    @model_validator(mode="after")
    def _worker_layout(self) -> Image:
        if self.worker and not (self.python and self.interpreters and self.toolchain_python and self.evidence):
            raise ValueError("a worker image needs python, interpreters, toolchain_python and evidence")
        if self.toolchain_python and self.toolchain_python not in self.interpreters:
            raise ValueError(f"toolchain_python {self.toolchain_python!r} is not one of its interpreters")
        return self


class FamilyStatus(Fact):
    """A line's status for an instance family (or a group of them: `trn1/trn1n`) at this release."""

    status: Literal["active", "maintenance", "frozen", "end-of-support", "not-served"]
    source: SourceId
    note: StrictStr = ""
    # AWS statements that read otherwise: the user may choose the other reading, with its consequence.
    disputed: tuple[Reading, ...] = ()


class LineRelease(Fact):
    """What the release is for one serving line."""

    ships: tuple[StrictStr, ...] = ()  # the packages (names in `packages`) the line's release is spoken of by
    source: StrictStr = ""  # where the line's release was read (required with `ships`)
    status: dict[StrictStr, FamilyStatus] = Field(default_factory=dict)  # family group -> status
    # A registered profile version: the packages (names in `packages`) its pins and launch files read.
    profile: tuple[StrictStr, ...] | None = None

    @model_validator(mode="after")
    def _cited(self) -> LineRelease:
        if self.ships and not self.source:
            raise ValueError("ships needs source: where the line's release was read")
        return self


class WorkerPins(Fact):
    """The pins file of the worker image (`docker/neuron-sdk/<release>.txt`)."""

    about: StrictStr  # what the image is for and how it is built (the file's header)
    pins: tuple[StrictStr, ...]  # package names, an extra allowed (`optimum-neuron[neuronx]`)


# What a serving line does with a package of a release, from the cheapest change to the dearest: read
# by nothing of the line; read only when a built artifact is loaded (runtime, driver); possibly hashed
# into the consumer's cache key (a re-trace against the published cache decides); read by the build
# (the compiler and every library that shapes the graphs). `neuronforge.farm.upgrade_decisions`.
ROLES = ("unread", "load", "key", "build")


class PackageReads(Fact):
    """One role of a serving line's packages (`lines.<line>.reads` in `releases/lines.toml`): which
    packages (their pip names) the line reads that way, why, and where that was read."""

    role: Literal["unread", "load", "key", "build"]
    packages: tuple[StrictStr, ...] = Field(min_length=1)
    source: SourceId
    why: StrictStr = Field(min_length=1)
    # False: a reading, not a fact (a `key` package: whether the consumer hashes it is decided by the
    # re-trace against the published cache, never by its version number).
    verified: StrictBool = True


class SdkReleaseEntry(StoredRecord):
    KIND: ClassVar[str] = "SDK release entry"
    SCHEMA: ClassVar[int] = 1
    model_config = ConfigDict(frozen=True, extra="forbid")

    version: ReleaseVersion
    date: Date = ""
    date_note: StrictStr = ""  # why there is no date
    released: StrictBool = True  # False: only announced (`notes` is all that is known)
    sources: tuple[SourceId, ...] = ()
    notes: tuple[StrictStr, ...] = ()
    packages: tuple[Package, ...] = ()
    images: tuple[Image, ...] = ()
    lines: dict[StrictStr, LineRelease] = Field(default_factory=dict)
    worker: WorkerPins | None = None
    # Sources only this entry cites, by id (a store-held entry: the manifest it came from).
    own_sources: dict[SourceId, SourcePage] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _consistent(self) -> SdkReleaseEntry:
        if self.released and not self.date and not self.date_note:
            raise ValueError("date is empty: give the date, or date_note saying why there is none")
        names = [p.name for p in self.packages]
        twice = sorted({n for n in names if names.count(n) > 1})
        if twice:
            raise ValueError(f"packages: {', '.join(twice)} listed twice (give one a distinct name and its pip)")
        for line, entry in self.lines.items():
            for name in (*entry.ships, *(entry.profile or ())):
                if name not in names:
                    raise ValueError(f"lines.{line}: package {name!r} is not in packages")
        workers = [i for i in self.images if i.worker]
        if len(workers) > 1:
            raise ValueError("images: more than one worker image")
        if self.worker is not None:
            if not workers:
                raise ValueError("worker: no image is marked worker = true")
            for pin in self.worker.pins:
                if pin.split("[", 1)[0] not in names:
                    raise ValueError(f"worker.pins: {pin!r} is not in packages")
        return self

    def package(self, name: str) -> Package | None:
        return next((p for p in self.packages if p.name == name), None)

    @property
    def worker_image(self) -> Image | None:
        return next((i for i in self.images if i.worker), None)
