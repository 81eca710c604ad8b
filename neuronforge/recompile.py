"""Keeping the catalog compiled across Neuron SDK upgrades: the stale set, the runs that rebuild it,
and the report of what happened.

A published artifact is addressed by a cache key that includes the toolchain's versions, so after an
SDK upgrade every catalog target's key changes and nothing is published under the new keys: the
target is *stale*. `find_stale` computes, for every catalog entry × target, its key under the
toolchain the workers have now and whether a complete manifest exists for it. `run_requests` turns
the stale targets into one `neuronforge_compile_publish` run per model (catalog order = the order
the runs are created in, which is the order the scheduler starts them in). `settle` looks in the
store for how each rebuild ended (published, failed and why, still running, not started), and
`Report` renders all of it as JSON and Markdown.

Airflow-free: the `neuronforge_recompile_on_upgrade` DAG and `neuronforge catalog stale` both call
these functions.
"""

from __future__ import annotations

import datetime
import json
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from packaging.version import InvalidVersion, Version

from neuronforge import layout
from neuronforge.catalog import CatalogEntry, CatalogReport
from neuronforge.errors import NeuronforgeError
from neuronforge.request import CompileRequest, Toolchain, cache_key
from neuronforge.stores.base import ArtifactStore, NotFound, StoreError
from neuronforge.target import TargetSpec

COMPILE_DAG = "neuronforge_compile_publish"
REPORT_SCHEMA = 1

# Status of a catalog target under the current toolchain.
FRESH, STALE, UNAVAILABLE, UNRESOLVED = "fresh", "stale", "unavailable", "unresolved"
# How a stale target's rebuild ended, as far as the store tells.
REBUILT, FAILED, RUNNING, QUEUED = "rebuilt", "failed", "running", "queued"


@dataclass
class TargetState:
    order: int  # position in the catalog (entry, then target): the rebuild priority
    source: str  # as written in the catalog
    line: int
    slug: str
    target: dict[str, Any]  # the trigger form's spelling (see `form_target`)
    status: str  # fresh | stale | unavailable | unresolved
    key: str = ""
    pinned: str = ""  # the source pinned to the revision the key was computed for
    detail: str = ""  # fresh: the manifest URI; unavailable / unresolved: why
    run_id: str = ""  # the compile run triggered for it
    outcome: str = ""  # stale ones, after `settle`: rebuilt | failed | running | queued
    outcome_detail: str = ""  # rebuilt: manifest URI; failed: stage and error; running: lease holder

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> TargetState:
        return cls(**data)


def form_target(spec: TargetSpec, formats: tuple[str, ...] | list[str]) -> dict[str, Any]:
    """A target as the compile DAG's trigger form spells it (its `targets` items)."""
    q = spec.quantization
    out: dict[str, Any] = {
        "instance_type": spec.instance_type,
        "tp_degree": spec.tp_degree,
        "batch_size": spec.batch_size,
        "sequence_length": spec.sequence_length,
        "dtype": spec.dtype,
        "quantization": f"{q.dtype}:{q.method}" if q.enabled else "none",
        "backend": spec.backend,
        "publish_formats": list(formats),
    }
    optional = {
        "max_context_length": spec.max_context_length,
        "logical_nc_config": spec.logical_nc_config,
        "context_encoding_buckets": list(spec.context_encoding_buckets or ()) or None,
        "token_generation_buckets": list(spec.token_generation_buckets or ()) or None,
        "backend_options": dict(spec.backend_options) or None,
    }
    return {**out, **{k: v for k, v in optional.items() if v is not None}}


def backends_of(catalog: CatalogReport) -> list[str]:
    return sorted({t.spec.backend for e in catalog.entries for t in e.targets})


def _resolve(entry: CatalogEntry, work_dir: Path):
    from neuronforge.stages.resolve import resolve_source

    return resolve_source(entry.source, work_dir=work_dir)


def find_stale(
    catalog: CatalogReport,
    toolchains: dict[str, Toolchain | str],
    store: ArtifactStore,
    work_dir: Path,
) -> list[TargetState]:
    """Every catalog entry × target with its key under `toolchains` (backend → the toolchain the
    workers have, or why there is none) and whether a complete manifest is published for it."""
    from neuronforge.stages.publish import lookup

    states: list[TargetState] = []
    order = 0
    for entry in catalog.entries:
        try:
            pinned = _resolve(entry, work_dir)
            unresolved = ""
        except (NeuronforgeError, OSError) as exc:
            pinned, unresolved = None, f"cannot resolve the source: {exc}"
        for t in entry.targets:
            state = TargetState(
                order, entry.source, t.line, t.spec.slug, form_target(t.spec, t.formats), UNRESOLVED, detail=unresolved
            )
            order += 1
            states.append(state)
            if pinned is None:
                continue
            state.pinned = str(pinned)
            toolchain = toolchains.get(t.spec.backend, f"no worker reported a {t.spec.backend} toolchain")
            if isinstance(toolchain, str):
                state.status, state.detail = UNAVAILABLE, toolchain
                continue
            state.key = cache_key(CompileRequest(pinned, t.spec), toolchain)
            hit = lookup(store, state.key)
            if hit is None:
                state.status = STALE
            else:
                state.status, state.detail = FRESH, hit.manifest_uri
    return states


def run_requests(states: list[TargetState], store_uri: str, run_prefix: str) -> list[dict[str, Any]]:
    """One compile run per model with its stale targets, in catalog order: the arguments of a
    `TriggerDagRunOperator` (`trigger_run_id`, `conf`) each. Marks the states with their run id.
    The model is given pinned to the revision the key was computed for, so the run rebuilds
    exactly what was found stale."""
    runs: dict[str, dict[str, Any]] = {}
    for s in sorted((s for s in states if s.status == STALE), key=lambda s: s.order):
        run = runs.get(s.pinned)
        if run is None:
            run_id = f"{run_prefix}__{len(runs):02d}"
            run = runs[s.pinned] = {
                "trigger_run_id": run_id,
                "conf": {"model": s.pinned, "store": store_uri, "targets": []},
            }
        run["conf"]["targets"].append(s.target)
        s.run_id = run["trigger_run_id"]
    return list(runs.values())


def settle(store: ArtifactStore, states: list[TargetState]) -> bool:
    """Fill in how each stale target's rebuild ended, from the store; True when none is still
    queued or running. A failure counts only if the run triggered for it recorded it."""
    pending = False
    for s in states:
        if s.status != STALE:
            continue
        s.outcome, s.outcome_detail = _outcome(store, s)
        pending = pending or s.outcome in (RUNNING, QUEUED)
    return not pending


def _outcome(store: ArtifactStore, s: TargetState) -> tuple[str, str]:
    """The first store fact that decides: published, its run's failure, a live lease; each read
    only when the ones before it decided nothing (the deferred wait runs this every poll)."""
    from neuronforge import leases
    from neuronforge.failures import read_failure
    from neuronforge.stages.publish import lookup

    hit = lookup(store, s.key)
    if hit is not None:
        return REBUILT, hit.manifest_uri
    failure = read_failure(store, s.key)
    if failure is not None and (not s.run_id or failure.run_id == s.run_id):
        return FAILED, f"{failure.stage}: {failure.error}"
    lease = leases.current(store, s.key)
    if lease is not None and lease.live:
        return RUNNING, f"lease held by {lease.holder}"
    return QUEUED, "not started yet" if s.run_id else "no run was triggered"


def _version(text: str) -> Version | None:
    try:
        return Version(text)
    except (InvalidVersion, TypeError):
        return None


def sdk_release_status(store: ArtifactStore, installed_compiler: str | None) -> dict[str, Any] | None:
    """Compare the workers' neuronx-cc with the newest release in a mirrored copy of the SDK's
    release manifest (aws-neuron-sdk `src/helperscripts/n2-manifest.json`, put at
    `sdk-releases/n2-manifest.json` in the store). None when no manifest is mirrored."""
    try:
        manifest = store.read_json(layout.SDK_RELEASE_MANIFEST)
    except (NotFound, StoreError):
        return None
    releases = []
    for rel in manifest.get("neuron_releases", []):
        cc = next((p.get("version") for p in rel.get("packages", []) if p.get("name") == "neuronx-cc"), None)
        v = _version(rel.get("neuron_version", ""))
        if v is not None and cc:
            releases.append((v, rel["neuron_version"], cc))
    if not releases:
        return {"problem": f"{layout.SDK_RELEASE_MANIFEST} lists no release with a neuronx-cc version"}
    releases.sort()
    _, latest, latest_cc = releases[-1]
    installed_release = next((name for _, name, cc in reversed(releases) if cc == installed_compiler), None)
    newer = (
        installed_compiler is not None
        and _version(latest_cc) is not None
        and _version(installed_compiler) is not None
        and _version(latest_cc) > _version(installed_compiler)
    )
    return {
        "manifest_date": manifest.get("manifest_date"),
        "latest_release": latest,
        "latest_neuronx_cc": latest_cc,
        "installed_neuronx_cc": installed_compiler,
        "installed_release": installed_release,
        "newer_release_available": bool(newer),
    }


@dataclass
class Report:
    stamp: str  # YYYY-MM-DDTHH-MM-SSZ
    catalog: str
    store: str
    toolchains: dict[str, Any]  # backend -> versions, or why unavailable
    states: list[TargetState]
    sdk: dict[str, Any] | None = None
    runs: list[str] = field(default_factory=list)

    def counts(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for s in self.states:
            out[s.status] = out.get(s.status, 0) + 1
            if s.outcome:
                out[s.outcome] = out.get(s.outcome, 0) + 1
        return out

    def to_json(self) -> dict[str, Any]:
        return {
            "schema_version": REPORT_SCHEMA,
            "stamp": self.stamp,
            "generated_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "catalog": self.catalog,
            "store": self.store,
            "toolchains": self.toolchains,
            "sdk_release": self.sdk,
            "runs": self.runs,
            "counts": self.counts(),
            "targets": [s.to_json() for s in self.states],
        }

    def to_markdown(self) -> str:
        c = self.counts()
        lines = [
            f"# neuronforge recompile {self.stamp}",
            "",
            f"Catalog `{self.catalog}`, store `{self.store}`.",
            "",
            f"**{c.get(STALE, 0)} stale** (rebuilt {c.get(REBUILT, 0)}, failed {c.get(FAILED, 0)}, "
            f"running {c.get(RUNNING, 0)}, not started {c.get(QUEUED, 0)}), {c.get(FRESH, 0)} fresh, "
            f"{c.get(UNAVAILABLE, 0)} without a toolchain, {c.get(UNRESOLVED, 0)} unresolvable; "
            f"{len(self.runs)} compile run(s) triggered.",
            "",
            "## Toolchains on the workers",
            "",
        ]
        for backend, tc in sorted(self.toolchains.items()):
            if isinstance(tc, dict):
                lines.append(
                    f"- {backend}: {tc['backend']} {tc['backend_version']}, {tc['compiler']} {tc['compiler_version']}"
                )
            else:
                lines.append(f"- {backend}: unavailable ({tc})")
        if self.sdk:
            lines += ["", "## Neuron SDK releases", ""]
            if "problem" in self.sdk:
                lines.append(f"- {self.sdk['problem']}")
            else:
                behind = "**a newer release exists**" if self.sdk["newer_release_available"] else "up to date"
                lines.append(
                    f"- latest release {self.sdk['latest_release']} (neuronx-cc {self.sdk['latest_neuronx_cc']}); "
                    f"workers run neuronx-cc {self.sdk['installed_neuronx_cc']} "
                    f"(release {self.sdk['installed_release'] or 'unknown'}): {behind}"
                )
        lines += ["", "## Targets", "", "| # | model | target | status | outcome | detail |", "|---" * 6 + "|"]
        for s in sorted(self.states, key=lambda s: s.order):
            detail = (s.outcome_detail or s.detail).replace("|", "\\|").replace("\n", " ")
            lines.append(
                f"| {s.order} | {s.source} | {s.slug} | {s.status} | {s.outcome or '-'} | "
                f"{(s.key[:12] + ' ') if s.key else ''}{detail} |"
            )
        return "\n".join(lines) + "\n"


def write_report(store: ArtifactStore, report: Report) -> dict[str, str]:
    """The report's JSON, then its Markdown; returns both URIs. Re-running overwrites the same
    stamp's report, which is what a retried report task should do."""
    json_key = layout.recompile_report(report.stamp, "json")
    md_key = layout.recompile_report(report.stamp, "md")
    store.put_bytes((json.dumps(report.to_json(), indent=2) + "\n").encode(), json_key)
    store.put_bytes(report.to_markdown().encode(), md_key)
    return {"json": store.uri(json_key), "markdown": store.uri(md_key)}


def stamp_of(when: Any) -> str:
    """`YYYY-MM-DDTHH-MM-SSZ` for a datetime (UTC) or now."""
    if when is None:
        return time.strftime("%Y-%m-%dT%H-%M-%SZ", time.gmtime())
    return when.astimezone(datetime.UTC).strftime("%Y-%m-%dT%H-%M-%SZ")
