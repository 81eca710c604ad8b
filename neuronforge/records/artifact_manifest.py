"""The artifact manifest: `artifacts/<org>/<name>/<revision>/<target-slug>/<key12>/manifest.json`.

Written last by the publish stage (`neuronforge.pipeline.stages.publish`): from then on the artifact exists.
It names the cache key and what the key hashed (`request`), the model's source, the serving profile
and toolchain it was built with, every file with its size and sha256, the outputs (`formats`, paths
relative to the artifact's folder — older manifests held URIs), the smoke result, the compile record,
where each stage ran (`hosts`) and every transfer the build made with its bytes and MB/s (`transfers`).

Its core — cache key, source, toolchain, files — is strict: a manifest whose files are not
path/size/sha256 entries is not an artifact (readers skip it, the catalog answers 404), never a
traceback. The parts it only shows are tolerant (`parts`): a forged `smoke` or `formats` costs that
part. Manifests of every earlier release read (`tests/data/records/`); schema 1 is the only one so far.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any, ClassVar, Self

from pydantic import Field, PrivateAttr, StrictStr

from neuronforge.records.base import StoredRecord
from neuronforge.records.hosts import HostsPart, HostsReport
from neuronforge.records.hub_registry import HubRegistration
from neuronforge.records.parts import AnyObject, FileEntry, Part, Text, or_default
from neuronforge.records.smoke import SmokePart, SmokeRecord
from neuronforge.records.transfers import Transfers

if TYPE_CHECKING:
    from neuronforge.spec.target import TargetSpec


class SourceRef(Part):
    """Where the model came from: `kind` (hub, local, builtin), `location`, the resolved `revision`."""

    kind: Text = ""
    location: Text = ""
    revision: Text = ""


class ToolchainRef(Part):
    """The toolchain the artifact was compiled with (`request.Toolchain.to_json`: also its packages,
    flags and the worker's runtime versions, kept as written)."""

    backend: Text = ""
    backend_version: Text = ""
    compiler: Text = ""
    compiler_version: Text = ""


class ProfileRef(Part):
    """The serving profile the artifact was built for (`ServingProfile.describe`), as far as readers
    use it; the rest of the description is kept as written."""

    ref: Text = ""  # name@version
    name: Text = ""
    title: Text = ""
    sdk_release: Text = ""

    @property
    def serving_image(self) -> str | None:
        """The image its builds serve in (`ServingProfile.serving_image`, written only when there is one,
        so a manifest reads back key for key); None: none named, a manifest written before profiles
        said, or a value that is no text."""
        value = (self.model_extra or {}).get("serving_image")
        return value if isinstance(value, str) and value else None

    @property
    def instance_families(self) -> tuple[str, ...]:
        """The Neuron instance families its builds run on (`describe`); () for a CPU profile, a manifest
        without profile data or a value that is no list of text."""
        value = (self.model_extra or {}).get("instance_families")
        ok = isinstance(value, list) and all(isinstance(v, str) for v in value)
        return tuple(value) if ok else ()


LAUNCH_TEXT_LIMIT = 64 * 1024  # bytes of one launch file recorded in the manifest (`launch_text`)


class ArtifactManifest(StoredRecord):
    KIND: ClassVar[str] = "artifact manifest"
    SCHEMA: ClassVar[int] = 1
    UNVERSIONED: ClassVar[int | None] = 1  # its readers never required the field: hand-made ones read
    # Grows with the files and launch files it lists: a build of thousands of files and every launch file
    # at LAUNCH_TEXT_LIMIT is a few MiB; the largest real ones are tens of KiB.
    MAX_BYTES: ClassVar[int] = 64 * 1024 * 1024

    # -- the core: a manifest without it is not an artifact
    cache_key: StrictStr
    source: SourceRef
    toolchain: ToolchainRef
    files: list[FileEntry]
    # -- what it shows: a part of the wrong type reads as its default
    request: AnyObject = Field(default_factory=dict)  # the cache key's material (`cache_key_material`)
    target_slug: Text = ""
    # None: written before serving profiles (an older key schema)
    profile: Annotated[ProfileRef | None, or_default(lambda: None)] = None
    compiler_flags: Annotated[list[Text], or_default(list)] = Field(default_factory=list)
    formats: Annotated[dict[str, Text], or_default(dict)] = Field(default_factory=dict)  # output -> path
    smoke: SmokePart = Field(default_factory=SmokeRecord)  # the smoke test, its measurement and numerics
    compile: AnyObject = Field(default_factory=dict)  # the compile stage's record (graphs, cache sync)
    hosts: HostsPart = Field(default_factory=HostsReport)  # where each stage ran (`hosts.host_report`)
    # the optimum-neuron cache repository it was registered in, and optimum's lookup of it; None: not asked
    hub_registry: Annotated[HubRegistration | None, or_default(lambda: None)] = None
    # The launch files' text as published (`launch/<name>` -> its text; one larger than
    # LAUNCH_TEXT_LIMIT or not UTF-8 is not in it), each checked against its file's sha256 when written:
    # the catalog shows the deploy snippets from the manifest it reads anyway, not a request per file.
    # None: published before manifests recorded it (the catalog then reads the files).
    launch_text: Annotated[dict[str, Text] | None, or_default(lambda: None)] = None
    # every transfer the build made, stage by stage, as measured (`records.transfers`); [] before they were
    transfers: Transfers = Field(default_factory=list)
    neuronforge_version: Text = ""
    run_id: Text = ""  # the Airflow run that built it ("" from the CLI)
    published_at: Text = ""

    # The JSON as it was read (`as_stored`): `show --json` and the catalog's API print a manifest as
    # the store holds it, forged parts included, not as this release reads it.
    _stored: dict[str, Any] | None = PrivateAttr(default=None)

    @classmethod
    def from_json(cls, data: Any, where: str = "") -> Self:
        record = super().from_json(data, where)
        record._stored = dict(data)
        return record

    def __eq__(self, other: object) -> bool:
        """Equal when they say the same, whether built here or read (the JSON as read is not compared)."""
        if not isinstance(other, ArtifactManifest):
            return NotImplemented
        return self.to_json() == other.to_json()

    __hash__ = None  # type: ignore[assignment]  # mutable parts (dicts): never a set member or dict key

    def to_json(self) -> dict[str, Any]:
        """As stored; without `hub_registry` when the build was registered nowhere, nor `launch_text` or
        `transfers` when none was recorded (manifests of builds that were not read as before, key for key)."""
        out = super().to_json()
        for name in ("hub_registry", "launch_text"):  # not written when there is none: as before, key for key
            if out.get(name) is None:
                out.pop(name, None)
        if not out.get("transfers"):
            out.pop("transfers", None)
        return out

    def as_stored(self) -> dict[str, Any]:
        """The manifest as the store holds it (as it will be written, for one built here)."""
        return dict(self._stored) if self._stored is not None else self.to_json()

    @property
    def size_bytes(self) -> int:
        return sum(f.size for f in self.files)

    # -- the request (the cache key's material), read through these: its shape is the key schema's
    @property
    def hashed_target(self) -> dict[str, Any]:
        """The target's fields as the cache key hashed them (`request.target`): shown, never trusted, so
        {} when the manifest holds none or holds another type."""
        target = self.request.get("target")
        return target if isinstance(target, dict) else {}

    def target_spec(self) -> TargetSpec:
        """The target the cache key was computed for, as the key's material names it (quantization,
        profile and backend options beside the target's fields): `KeyError`, `TypeError`, `ValueError`
        or `InvalidInput` when the material is not of the key schema that knows serving profiles."""
        from neuronforge.spec.target import TargetSpec

        return TargetSpec.from_key_material(self.request)

    @property
    def consumer_versions(self) -> dict[str, str] | None:
        """For a build of a profile whose consumer looks builds up in a Hub registry (optimum-neuron): the
        (optimum-neuron, neuronx-cc, transformers) that built it — the only consumer versions that load it
        and find its registry entry. None for other profiles."""
        profile = self.profile
        if profile is None or not (profile.model_extra or {}).get("hub_registry"):
            return None
        packages = (self.toolchain.model_extra or {}).get("packages")
        packages = packages if isinstance(packages, dict) else {}
        return {
            "optimum-neuron": str(packages.get("optimum-neuron", "?")),
            "neuronx-cc": self.toolchain.compiler_version or "?",
            "transformers": str(packages.get("transformers", "?")),
        }

    def launch_files(self) -> list[str]:
        """The names of the artifact's launch files (`launch/<name>`)."""
        return sorted(f.path.removeprefix("launch/") for f in self.files if f.path.startswith("launch/"))
