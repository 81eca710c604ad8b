"""The farm index's log records of one cache key — an artifact published (its summary, from its
manifest), a build failed, a build claimed, an artifact deleted or found damaged — and the
aggregates of its rows.
The row (`Entry`) and the record (`LogRecord`) are typed in `neuronforge.records.farm_index`.

Built by the same functions whether the record comes from a publish that has the manifest in hand or
from `rebuild` reading the manifests back, so the index and the manifests cannot describe an
artifact differently.
"""

from __future__ import annotations

import hashlib
from dataclasses import asdict, dataclass, field
from typing import Any

from neuronforge.artifacts.failures import names_of
from neuronforge.common.errors import NeuronforgeError
from neuronforge.records.artifact_manifest import ArtifactManifest
from neuronforge.records.damage import DamageRecord
from neuronforge.records.farm_index import Entry, LogRecord
from neuronforge.records.index_entry import IndexEntry
from neuronforge.records.smoke import PER_TOKEN, TTFT_SHORT, SmokeRecord
from neuronforge.spec.source import model_name
from neuronforge.spec.target import TargetSpec

__all__ = [
    "Aggregates",
    "Entry",
    "LogRecord",
    "attestation_record",
    "building_record",
    "channel_records",
    "damaged_record",
    "deleted_record",
    "failure_record",
    "manifest_names",
    "published_record",
    "review_record",
    "target_variant",
]


def target_variant(target: Any) -> str:
    """What a target is apart from its profile's version, hashed: two builds of one revision with
    the same variant are the same target for two SDK releases (`catalog stale`'s `published_for`)."""
    spec = target.normalized().model_copy(update={"profile": ""})
    return hashlib.sha256(spec.model_dump_json().encode()).hexdigest()[:16]


def build_target(manifest: ArtifactManifest) -> TargetSpec | None:
    """The normalized target a manifest was built for (its profile as the `name@version` it was
    built for, registered or not), or None for an older key schema without a serving profile."""
    try:
        return manifest.target_spec().normalized()
    except (KeyError, TypeError, ValueError, NeuronforgeError):
        return None


def _variant(manifest: ArtifactManifest) -> str:
    target = build_target(manifest)
    return target_variant(target) if target is not None else ""


def _number(value: Any, scale: float = 1.0, digits: int = 3) -> float | None:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return round(float(value) * scale, digits)
    return None


# The figures a model's chart draws (the catalog's channels page), kept in its builds' rows so the chart
# reads no manifest: median, p10 and p90 of each, in seconds.
CHARTED: tuple[str, ...] = (TTFT_SHORT, PER_TOKEN)


def measured_summary(smoke: SmokeRecord) -> dict[str, Any] | None:
    """The part of a build's measurement its farm-index row keeps (`CHARTED`, whether it is synthetic,
    the host it ran on); None for a build published before the protocol. A row written before this part
    existed has none either: its build shows in the chart as one without a measurement until the index is
    rebuilt from the manifests (`neuronforge index rebuild`), which writes it."""
    m = smoke.measurement
    if m is None:
        return None
    figures = {name: [f.median, f.p10, f.p90] for name in CHARTED if (f := m.figures.get(name)) is not None}
    host = {"instance_type": m.host.instance_type, "runtime_line": m.host.runtime_line}
    return {"synthetic": m.synthetic, "protocol": m.protocol, **host, "figures": figures}


def manifest_names(manifest: ArtifactManifest) -> dict[str, str]:
    """What a manifest's build is called in the index: model, profile ref, target slug, instance."""
    target = manifest.hashed_target
    return {
        "model": model_name(manifest.source.model_dump()),
        "profile": manifest.profile.ref if manifest.profile is not None else "",
        "target": manifest.target_slug,
        "instance": str(target.get("instance_type") or ""),
    }


def published_record(index: IndexEntry, manifest: ArtifactManifest) -> LogRecord:
    """The log record of a published artifact (its index pointer and manifest, as `publish` wrote them)."""
    toolchain = manifest.toolchain
    summary = {
        "revision": manifest.source.revision,
        "compiler": toolchain.compiler,
        "compiler_version": toolchain.compiler_version,
        "files": len(manifest.files),
        "size_bytes": manifest.size_bytes,
        "ttft_ms": _number(manifest.smoke.time_to_first_token_s, 1e3, 2),
        "per_token_ms": _number(manifest.smoke.per_token_s, 1e3, 2),
        **({"measured": measured} if (measured := measured_summary(manifest.smoke)) is not None else {}),
        "cpu_seconds": _number(manifest.hosts.cpu_seconds),
        "neuron_seconds": _number(manifest.hosts.neuron_seconds),
        "at": manifest.published_at,
        "run_id": manifest.run_id,
        "prefix": index.artifact_prefix,
        "manifest": index.manifest,
        "formats": dict(manifest.formats),
        "launch": manifest.launch_files(),
        "variant": _variant(manifest),
        # where optimum-neuron's lookup finds it (a catalog row names it without reading the manifest)
        **({"hub_registry": _registry(manifest)} if manifest.hub_registry is not None else {}),
    }
    return LogRecord(kind="published", key=manifest.cache_key, published=summary, **manifest_names(manifest))


def _registry(manifest: ArtifactManifest) -> dict[str, Any]:
    r = manifest.hub_registry
    assert r is not None
    return {"repo": r.repo_id, "endpoint": r.endpoint, "found": r.lookup.found}


def failure_record(failure: Any) -> LogRecord:
    """The log record of a `FailureRecord`."""
    return LogRecord(
        kind="failed",
        key=failure.key,
        model=failure.model,
        profile=failure.profile,
        target=failure.target,
        instance=failure.instance,
        failure={"stage": failure.stage, "error": failure.error, "run_id": failure.run_id, "at": failure.at},
    )


def building_record(key: str, holder: str, at: str, state: Any = None) -> LogRecord:
    return LogRecord(kind="building", key=key, **names_of(state), building={"holder": holder, "at": at})


def deleted_record(key: str) -> LogRecord:
    return LogRecord(kind="deleted", key=key)


def damaged_record(record: DamageRecord) -> LogRecord:
    """The log record of a `DamageRecord`: the row turns damaged, named as the record names it."""
    names = {n: getattr(record, n) for n in ("model", "profile", "target", "instance") if getattr(record, n)}
    return LogRecord(kind="damaged", key=record.key, damage=record.summary(), **names)


def channel_records(record: Any) -> list[LogRecord]:
    """A channel's latest move (a `ChannelRecord`) as the rows see it: on its build, off the previous one."""
    move = record.current
    stamp = {"channel": record.channel, "by": move.by, "at": move.at, "action": move.action}
    out = [LogRecord(kind="channel", key=move.build.key, channel={**stamp, "on": True})]
    if move.previous and move.previous != move.build.key:
        out.append(LogRecord(kind="channel", key=move.previous, channel={**stamp, "on": False}))
    return out


def review_record(record: Any) -> LogRecord:
    """A build's review decision (a `ReviewRecord`)."""
    d = record.current
    review = {"state": d.state, "by": d.by, "at": d.at, "reason": d.reason}
    return LogRecord(kind="review", key=record.key, review=review)


def attestation_record(record: Any) -> LogRecord:
    """A build's attestations (an `AttestationRecord`) as its row keeps them: the releases it is attested
    for now, and when the newest was made."""
    at = record.attestations[0].at if record.attestations else ""
    return LogRecord(kind="attested", key=record.key, attested={"releases": record.passing(), "at": at})


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
