"""One row of the farm index: what the store knows of one cache key, small enough that thousands fit
in a page object — the published artifact's summary (from its manifest), the last failure, and a
build in progress.

Built by the same functions whether the row comes from a publish that has the manifest in hand or
from `rebuild` reading the manifests back, so the index and the manifests cannot describe an
artifact differently.
"""

from __future__ import annotations

import hashlib
from dataclasses import asdict, dataclass, field
from typing import Any

from neuronforge.errors import NeuronforgeError
from neuronforge.records.artifact_manifest import ArtifactManifest
from neuronforge.records.index_entry import IndexEntry
from neuronforge.source import model_name
from neuronforge.target import TargetSpec

KINDS = ("published", "failed", "building", "deleted")


@dataclass
class Entry:
    key: str
    model: str = ""
    profile: str = ""  # ref, name@version
    target: str = ""  # slug
    instance: str = ""
    # The published artifact's summary (None: not published, or deleted since).
    published: dict[str, Any] | None = None
    # The last failed build of the key (`failures/<key>.json`), kept even once published: the
    # manifest wins, as `failures` says.
    failure: dict[str, Any] | None = None
    # A build took the key's lease (holder, started); readers confirm it against `locks/<key>`.
    building: dict[str, Any] | None = None

    @property
    def sort_key(self) -> tuple[str, str, str, str]:
        return (self.model, self.profile, self.target, self.key)

    @property
    def status_class(self) -> str:
        """published, smoke-failed, failed or building (stale is decided by the reader)."""
        if self.published is not None:
            return "published"
        if self.failure is not None and (self.building is None or self.failure["at"] >= self.building["at"]):
            return "smoke-failed" if self.failure.get("stage") == "smoke" else "failed"
        if self.building is not None:
            return "building"
        return "failed" if self.failure is not None else "deleted"

    @property
    def empty(self) -> bool:
        return self.published is None and self.failure is None and self.building is None

    def to_json(self) -> dict[str, Any]:
        return {k: v for k, v in asdict(self).items() if v not in (None, "")}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Entry:
        """A row as stored; a field of the wrong type is a ValueError (the page is then corrupt and
        rebuilt), so a forged page whose checksum was recomputed cannot carry a number where the
        readers sort, filter and render text, or a list where they read a record."""
        known = {f: data[f] for f in cls.__dataclass_fields__ if f in data}
        if not isinstance(known.get("key"), str):
            raise ValueError("an index entry without a key")
        for name in ("model", "profile", "target", "instance"):
            if not isinstance(known.get(name, ""), str):
                raise ValueError(f"index entry {known['key'][:12]}: {name} is not text")
        for name in ("published", "failure", "building"):
            value = known.get(name)
            if value is not None and not (isinstance(value, dict) and isinstance(value.get("at", ""), str)):
                raise ValueError(f"index entry {known['key'][:12]}: {name} is not a record")
        return cls(**known)

    def apply(self, record: dict[str, Any]) -> None:
        """Fold one log record (`kind` + fields) into this row."""
        kind = record["kind"]
        for name in ("model", "profile", "target", "instance"):
            if record.get(name) and (kind == "published" or not getattr(self, name)):
                setattr(self, name, str(record[name]))
        if kind == "published":
            self.published, self.building = dict(record["published"]), None
        elif kind == "failed":
            self.failure, self.building = dict(record["failure"]), None
        elif kind == "building":
            self.building = dict(record["building"])
        elif kind == "deleted":
            self.published = None


def target_variant(target: Any) -> str:
    """What a target is apart from its profile's version, hashed: two builds of one revision with
    the same variant are the same target for two SDK releases (`catalog stale`'s `published_for`)."""
    spec = target.normalized().model_copy(update={"profile": ""})
    return hashlib.sha256(spec.model_dump_json().encode()).hexdigest()[:16]


def build_target(manifest: ArtifactManifest) -> TargetSpec | None:
    """The normalized target a manifest was built for (its profile as the `name@version` it was
    built for, registered or not), or None for an older key schema without a serving profile."""
    try:
        return TargetSpec.from_key_material(manifest.request).normalized()
    except (KeyError, TypeError, ValueError, NeuronforgeError):
        return None


def _variant(manifest: ArtifactManifest) -> str:
    target = build_target(manifest)
    return target_variant(target) if target is not None else ""


def _number(value: Any, scale: float = 1.0, digits: int = 3) -> float | None:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return round(float(value) * scale, digits)
    return None


def published_record(index: IndexEntry, manifest: ArtifactManifest) -> dict[str, Any]:
    """The log record of a published artifact (its index pointer and manifest, as `publish` wrote them)."""
    target = manifest.request.get("target")
    toolchain = manifest.toolchain
    summary = {
        "revision": manifest.source.revision,
        "compiler": toolchain.compiler,
        "compiler_version": toolchain.compiler_version,
        "files": len(manifest.files),
        "size_bytes": manifest.size_bytes,
        "ttft_ms": _number(manifest.smoke.get("time_to_first_token_s"), 1e3, 2),
        "per_token_ms": _number(manifest.smoke.get("per_token_s"), 1e3, 2),
        "cpu_seconds": _number(manifest.hosts.get("cpu_seconds")),
        "neuron_seconds": _number(manifest.hosts.get("neuron_seconds")),
        "at": manifest.published_at,
        "run_id": manifest.run_id,
        "prefix": index.artifact_prefix,
        "manifest": index.manifest,
        "formats": dict(manifest.formats),
        "launch": manifest.launch_files(),
        "variant": _variant(manifest),
    }
    return {
        "kind": "published",
        "key": manifest.cache_key,
        "model": model_name(manifest.source.model_dump()),
        "profile": manifest.profile.ref if manifest.profile is not None else "",
        "target": manifest.target_slug,
        "instance": str(target.get("instance_type") or "") if isinstance(target, dict) else "",
        "published": summary,
    }


def failure_record(failure: Any) -> dict[str, Any]:
    """The log record of a `failures.BuildFailure`."""
    return {
        "kind": "failed",
        "key": failure.key,
        "model": failure.model,
        "profile": failure.profile,
        "target": failure.target,
        "instance": failure.instance,
        "failure": {"stage": failure.stage, "error": failure.error, "run_id": failure.run_id, "at": failure.at},
    }


def building_record(key: str, holder: str, at: str, state: Any = None) -> dict[str, Any]:
    what: dict[str, Any] = {}
    if state is not None:
        target = state.target
        what = {
            "model": model_name(state.model),
            "profile": target.profile,
            "target": target.slug,
            "instance": target.instance.name,
        }
    return {"kind": "building", "key": key, **what, "building": {"holder": holder, "at": at}}


def deleted_record(key: str) -> dict[str, Any]:
    return {"kind": "deleted", "key": key}


@dataclass
class Aggregates:
    """What the page's summary and filter choices need without reading any page."""

    rows: int = 0
    statuses: dict[str, dict[str, int]] = field(default_factory=dict)  # status class -> profile ref -> n
    instances: set[str] = field(default_factory=set)
    models: int = 0

    def add(self, e: Entry) -> None:
        self.rows += 1
        by_profile = self.statuses.setdefault(e.status_class, {})
        by_profile[e.profile] = by_profile.get(e.profile, 0) + 1
        if e.instance:
            self.instances.add(e.instance)

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "instances": sorted(self.instances)}
