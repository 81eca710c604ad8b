"""What a store holds, as a compile farm's users ask: for each model and (serving profile, target),
is it published, stale for the toolchain the workers have now, failed its smoke test, failed at
another stage, or being built — with the compiler, sizes, smoke latencies, when, and which run.

Read through the core's own readers only (`stages.publish.scan_index` for manifests,
`failures.read_failure`, `leases.current`), so the artifact catalog page, its JSON endpoints and the
CLI agree with `ls` and `verify`. Airflow-free: the UI plugin renders what `farm_rows` returns.

Stale: an artifact built for `name@version` while the registry's newest version of `name` (what a
catalog target naming the bare profile follows; a new Neuron SDK release) is another one.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field
from typing import Any

from neuronforge.stores import ArtifactStore

STATUSES = ("published", "stale", "smoke-failed", "failed", "building")


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
    cpu_seconds: float | None = None  # the build's stages on CPU hosts (`neuronforge.hosts`)
    neuron_seconds: float | None = None  # ... and on Neuron hosts
    at: str = ""  # published_at, the failure's time, or the lease's start (UTC ISO 8601)
    run_id: str = ""
    artifact_uri: str = ""
    manifest_uri: str = ""
    uris: dict[str, str] = field(default_factory=dict)  # published formats
    launch: dict[str, str] = field(default_factory=dict)  # deploy snippet files: name -> URI
    incomplete: list[str] = field(default_factory=list)  # files the store lacks or holds at another size

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @property
    def profile_name(self) -> str:
        return self.profile.partition("@")[0]


def _newest_refs() -> dict[str, str]:
    from neuronforge.profiles import all_profiles, get_profile

    return {p.name: get_profile(p.name).ref for p in all_profiles()}


def _instance(manifest: dict[str, Any]) -> str:
    request = manifest.get("request")
    target = request.get("target") if isinstance(request, dict) else None
    return str(target.get("instance_type") or "") if isinstance(target, dict) else ""


def _published(store: ArtifactStore, newest: dict[str, str]) -> dict[str, FarmRow]:
    from neuronforge.stages.publish import format_uris, incomplete_files, scan_index

    rows: dict[str, FarmRow] = {}
    for entry in scan_index(store):
        if entry.problem is not None or entry.index is None or entry.manifest is None:
            continue
        m, index = entry.manifest, entry.index
        prefix = str(index.get("prefix") or index["manifest"].rpartition("/")[0])
        profile = m.get("profile", {}).get("ref", "") if isinstance(m.get("profile"), dict) else ""
        smoke = m.get("smoke") if isinstance(m.get("smoke"), dict) else {}
        name = profile.partition("@")[0]
        stale = bool(profile) and name in newest and newest[name] != profile
        formats = m.get("formats") if isinstance(m.get("formats"), dict) else {}
        launch = [f["path"] for f in m["files"] if str(f["path"]).startswith("launch/")]
        hosts = m.get("hosts") if isinstance(m.get("hosts"), dict) else {}
        rows[m["cache_key"]] = FarmRow(
            key=m["cache_key"],
            status="stale" if stale else "published",
            model=str(m["source"].get("location", "")),
            revision=str(m["source"].get("revision", "")),
            profile=profile,
            target=str(m.get("target_slug", "")),
            instance=_instance(m),
            compiler_version=str(m["toolchain"].get("compiler_version", "")),
            message=f"built for {profile}; the workers' toolchain is now {newest[name]}" if stale else "",
            size_bytes=sum(int(f.get("size", 0)) for f in m["files"]),
            ttft_ms=_ms(smoke.get("time_to_first_token_s")),
            per_token_ms=_ms(smoke.get("per_token_s")),
            cpu_seconds=_seconds(hosts.get("cpu_seconds")),
            neuron_seconds=_seconds(hosts.get("neuron_seconds")),
            at=str(m.get("published_at", "")),
            run_id=str(m.get("run_id", "")),
            artifact_uri=store.uri(prefix),
            manifest_uri=store.uri(index["manifest"]),
            uris=format_uris(store, prefix, {k: str(v) for k, v in formats.items()}),
            launch={path.removeprefix("launch/"): store.uri(f"{prefix}/{path}") for path in launch},
            incomplete=incomplete_files(store, index, m),
        )
    return rows


def _seconds(value: Any) -> float | None:
    return round(float(value), 3) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _ms(seconds: Any) -> float | None:
    return round(float(seconds) * 1e3, 2) if isinstance(seconds, (int, float)) else None


def farm_rows(store: ArtifactStore) -> list[FarmRow]:
    """Every build the store knows of, one row per cache key: published (or stale), else the last
    failure (smoke-failed or failed, with stage and message), else a live lease (building)."""
    from neuronforge import leases
    from neuronforge.failures import read_failure

    rows = _published(store, _newest_refs())
    for obj in store.list("failures"):
        key = obj.key.rsplit("/", 1)[-1].removesuffix(".json")
        failure = read_failure(store, key)
        if failure is None or key in rows:
            continue
        rows[key] = FarmRow(
            key=key,
            status="smoke-failed" if failure.stage == "smoke" else "failed",
            model=failure.model or "(unknown model)",
            profile=failure.profile,
            target=failure.target,
            instance=failure.instance,
            stage=failure.stage,
            message=failure.error,
            at=failure.at,
            run_id=failure.run_id,
        )
    for obj in store.list("locks"):
        key = obj.key.rsplit("/", 1)[-1]
        lease = leases.current(store, key)
        if lease is None or not lease.live or (key in rows and rows[key].status in ("published", "stale")):
            continue
        row = rows.get(key) or FarmRow(key=key, status="building", model="(unknown model)")
        row.status, row.message = "building", f"lease held by {lease.holder}"
        row.at = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(lease.started))
        rows[key] = row
    return sorted(rows.values(), key=lambda r: (r.model, r.profile, r.target, r.key))


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
