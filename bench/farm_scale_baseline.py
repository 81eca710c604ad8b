"""The farm's readers as they were before the farm index (commit 5c3ed6d), for `farm_scale.py`'s
baseline: every one of them scans the store (`published.scan_index`: a listing of `index/`,
then each pointer and its manifest) and most list each artifact's folder too.

Ported with their store reads unchanged; what they render (HTML, text) is left out, which only
makes the baseline look faster than it was:

- `ls`: `neuronforge ls` (5c3ed6d `neuronforge/interfaces/cli.py::cmd_ls`): every artifact, each folder listed.
- `farm_rows`: 5c3ed6d `neuronforge/farm/rows.py::farm_rows` (+ `_published`).
- `api_artifacts`, `api_artifact`, `page`: 5c3ed6d `plugins/neuronforge_catalog.py`: the JSON
  endpoints and the catalog page (`farm_rows` twice, then each shown row's manifest and launch files).
- `find_stale`: 5c3ed6d `neuronforge/farm/recompile.py` (`published_builds`, `published_for`).
- `gc_collect`: 5c3ed6d `neuronforge/farm/gc.py::collect` (`published`, `_collect_cache_dirs`); only the
  plan (`dry_run=True`) is reproduced.

`scan_index`, `published_manifests` and `incomplete_files` are ported too (the records are read as the
dicts they were, with the same requests). Helpers that did not change since (`lookup`, `read_failure`, `leases.current`,
`compile_cache.prune_store`, `form_targets.form_target` ...) are imported from the working tree.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from packaging.version import InvalidVersion, Version

from neuronforge.farm.gc import Published
from neuronforge.farm.rows import FarmRow, filter_rows
from neuronforge.stores import ArtifactStore, open_store


# -- published.py as it was (records read as dicts; the same requests) ------------------------------------
@dataclass
class _Indexed:
    index_key: str
    index: dict[str, Any] | None = None
    manifest: dict[str, Any] | None = None
    problem: str | None = None


def scan_index(store: ArtifactStore) -> Any:
    """5c3ed6d `published.scan_index`: a listing of `index/`, then each pointer and its manifest."""
    from neuronforge.common.errors import StoreError

    for obj in store.list("index"):
        try:
            index = store.read_json(obj.key)
            manifest = store.read_json(index["manifest"])
        except (StoreError, KeyError, TypeError, ValueError) as exc:
            yield _Indexed(obj.key, problem=str(exc))
            continue
        if not isinstance(manifest, dict) or "files" not in manifest or "cache_key" not in manifest:
            yield _Indexed(obj.key, index, problem="not an artifact manifest")
            continue
        yield _Indexed(obj.key, index, manifest)


def published_manifests(store: ArtifactStore) -> Any:
    for entry in scan_index(store):
        if entry.problem is None and entry.index is not None and entry.manifest is not None:
            yield entry.index_key, entry.index, entry.manifest


def incomplete_files(store: ArtifactStore, index: dict[str, Any], manifest: dict[str, Any]) -> list[str]:
    """5c3ed6d `published.incomplete_files`: one listing of the artifact's folder."""
    prefix = str(index.get("prefix") or index["manifest"].rpartition("/")[0])
    present = {o.key: o.size for o in store.list(prefix)}
    return [f["path"] for f in manifest["files"] if present.get(f"{prefix}/{f['path']}") != f["size"]]


# -- farm.py ------------------------------------------------------------------------------------------
def _newest_refs() -> dict[str, str]:
    from neuronforge.profiles import all_profiles, get_profile

    return {p.name: get_profile(p.name).ref for p in all_profiles()}


def _instance(manifest: dict[str, Any]) -> str:
    request = manifest.get("request")
    target = request.get("target") if isinstance(request, dict) else None
    return str(target.get("instance_type") or "") if isinstance(target, dict) else ""


def _seconds(value: Any) -> float | None:
    return round(float(value), 3) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _ms(seconds: Any) -> float | None:
    return round(float(seconds) * 1e3, 2) if isinstance(seconds, (int, float)) else None


def _published(store: ArtifactStore, newest: dict[str, str]) -> dict[str, FarmRow]:
    from neuronforge.artifacts.published import format_uris

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


def farm_rows(store: ArtifactStore) -> list[FarmRow]:
    from neuronforge.artifacts import leases
    from neuronforge.artifacts.failures import read_failure

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


# -- cli.py: ls -----------------------------------------------------------------------------------------
def ls(uri: str) -> list[dict[str, Any]]:
    """`neuronforge ls STORE`: every published artifact with its folder listed (text not printed)."""
    store = open_store(uri, must_exist=True)
    rows = []
    for entry in scan_index(store):
        if entry.problem is not None or entry.index is None or entry.manifest is None:
            continue
        m, lacking = entry.manifest, incomplete_files(store, entry.index, entry.manifest)
        rows.append(
            {
                "cache_key": m["cache_key"],
                "model": str(m["source"].get("location")),
                "revision": str(m["source"].get("revision")),
                "target": str(m.get("target_slug", "?")),
                "published_at": str(m.get("published_at", "?")),
                "manifest_uri": store.uri(entry.index["manifest"]),
                "complete": not lacking,
                "missing_or_truncated": lacking,
            }
        )
    return sorted(rows, key=lambda r: r["published_at"])


# -- plugins/neuronforge_catalog.py ----------------------------------------------------------------------
SNIPPET_LIMIT = 64 * 1024


def _rows(uri: str, model=None, profile=None, instance=None, status=None) -> tuple[ArtifactStore, list[FarmRow]]:
    store = open_store(uri, must_exist=True)
    return store, filter_rows(farm_rows(store), model=model, profile=profile, instance=instance, status=status)


def api_artifacts(uri: str, **filters: str | None) -> list[dict[str, Any]]:
    """GET /neuronforge/api/artifacts?model=..."""
    _, rows = _rows(uri, **filters)
    return [r.to_json() for r in rows]


def _detail(store: ArtifactStore, row: FarmRow) -> dict[str, Any]:
    out = row.to_json()
    out["snippets"] = {}
    out["manifest"] = None
    if row.manifest_uri:
        prefix = row.artifact_uri.removeprefix(store.root_uri).strip("/")
        out["manifest"] = store.read_json(f"{prefix}/manifest.json")
        for name in row.launch:
            data = store.get_bytes(f"{prefix}/launch/{name}")
            if len(data) <= SNIPPET_LIMIT:
                out["snippets"][name] = data.decode("utf-8", errors="replace")
    return out


def api_artifact(uri: str, key: str) -> dict[str, Any] | None:
    """GET /neuronforge/api/artifacts/{key} (None where the endpoint answered 404)."""
    store = open_store(uri, must_exist=True)
    matches = [r for r in farm_rows(store) if r.key == key or (len(key) >= 12 and r.key.startswith(key))]
    if len(matches) != 1:
        return None
    return _detail(store, matches[0])


def page(uri: str, model=None, profile=None, instance=None, status=None) -> dict[str, Any]:
    """GET /neuronforge/ (the catalog page): its reads; the HTML is not rendered."""
    store = open_store(uri, must_exist=True)
    every = farm_rows(store)
    _, rows = _rows(uri, model, profile, instance, status)
    details = [_detail(store, r) for r in rows]  # `_detail_html` for every row shown
    counts: dict[str, int] = {}
    for r in every:
        counts[r.status] = counts.get(r.status, 0) + 1
    return {"rows": len(rows), "details": len(details), "counts": counts}


# -- recompile.py: catalog stale ------------------------------------------------------------------------
@dataclass(frozen=True)
class PublishedBuild:
    revision: str
    target: Any  # TargetSpec, normalized, its profile as `name@version`
    profile: str
    key: str


def published_builds(store: ArtifactStore) -> list[PublishedBuild]:
    from neuronforge.common.errors import InvalidInput, NeuronforgeError
    from neuronforge.spec.target import TargetSpec

    out = []
    for _, _, manifest in published_manifests(store):
        try:
            request = manifest["request"]
            profile = request["profile"]
            ref = (manifest.get("profile") or {}).get("ref") or f"{profile['name']}@{profile['version']}"
            try:
                target = TargetSpec.from_key_material(request)
            except InvalidInput:
                target = TargetSpec.parse(
                    {
                        **request["target"],
                        "quantization": request["quantization"],
                        "profile": profile["name"],
                        "backend_options": request.get("backend_options", {}),
                    }
                ).normalized()
            out.append(PublishedBuild(request["model_revision"], target, ref, manifest["cache_key"]))
        except (KeyError, TypeError, ValueError, NeuronforgeError):
            continue
    return out


def _ref_order(ref: str) -> tuple[int, ...]:
    return tuple(int(x) if x.isdigit() else -1 for x in ref.partition("@")[2].split("."))


def published_for(store: ArtifactStore, builds: list[PublishedBuild], pinned: Any, spec: Any) -> list[str]:
    from neuronforge.artifacts.published import lookup

    name = spec.profile_name
    want = spec.normalized().model_copy(update={"profile": ""})
    refs = {
        b.profile
        for b in builds
        if b.revision == pinned.resolved_revision
        and b.profile.partition("@")[0] == name
        and b.target.model_copy(update={"profile": ""}) == want
        and lookup(store, b.key) is not None
    }
    return sorted(refs, key=_ref_order)


def find_stale(catalog: Any, toolchains: dict[str, Any], store: ArtifactStore, work_dir: Path) -> list[Any]:
    from neuronforge.artifacts.published import lookup
    from neuronforge.common.errors import NeuronforgeError
    from neuronforge.farm.form_targets import form_target
    from neuronforge.farm.recompile import (
        FRESH,
        STALE,
        UNAVAILABLE,
        UNRESOLVED,
        TargetState,
        usable_toolchain,
    )
    from neuronforge.pipeline.stages.resolve import resolve_source
    from neuronforge.profiles import get_profile
    from neuronforge.profiles.request import CompileRequest, cache_key

    builds = published_builds(store)
    states = []
    order = 0
    for entry in catalog.entries:
        try:
            pinned = resolve_source(entry.source, work_dir=work_dir)
            unresolved = ""
        except (NeuronforgeError, OSError) as exc:
            pinned, unresolved = None, f"cannot resolve the source: {exc}"
        for t in entry.targets:
            profile = get_profile(t.spec.profile)
            spec = t.spec.model_copy(update={"profile": profile.ref})
            state = TargetState(
                order, entry.source, t.line, spec.slug, form_target(spec), UNRESOLVED, detail=unresolved
            )
            state.profile = profile.ref
            order += 1
            states.append(state)
            if pinned is None:
                continue
            state.pinned = str(pinned)
            state.published_for = published_for(store, builds, pinned, spec)
            toolchain = usable_toolchain(profile, toolchains.get(profile.ref))
            if isinstance(toolchain, str):
                state.status, state.detail = UNAVAILABLE, toolchain
                continue
            state.key = cache_key(CompileRequest(pinned, spec, profile), toolchain)
            hit = lookup(store, state.key)
            if hit is None:
                state.status, state.stale_for = STALE, [profile.ref]
            else:
                state.status, state.detail = FRESH, hit.manifest_uri
    return states


# -- gc.py: the plan of `gc --dry-run` (its record type is unchanged: `neuronforge.farm.gc.Published`) ----------


@dataclass
class GcPlan:
    keep: dict[str, list[str]] = field(default_factory=dict)
    deleted: list[dict[str, str]] = field(default_factory=list)
    kept: int = 0
    cache_dirs_deleted: list[str] = field(default_factory=list)


def gc_published(store: ArtifactStore) -> list[Published]:

    out = []
    for index_key, index, m in published_manifests(store):
        try:
            tc = m["toolchain"]
            out.append(
                Published(
                    m["cache_key"],
                    index_key,
                    index["manifest"],
                    index["prefix"],
                    m["source"]["location"],
                    tc["compiler"],
                    tc["compiler_version"],
                )
            )
        except (KeyError, TypeError):
            continue
    return out


def _order(version: str) -> tuple[int, Any]:
    try:
        return (1, Version(version))
    except InvalidVersion:
        return (0, version)


def gc_collect(store: ArtifactStore, keep_compilers: int) -> GcPlan:
    """`gc --keep-compilers N --dry-run` without a catalog (no pins)."""
    from neuronforge.artifacts import layout
    from neuronforge.compilation.compile_cache import prune_store
    from neuronforge.farm.gc import collect_tmp_objects

    artifacts = gc_published(store)
    plan = GcPlan()
    by_compiler: dict[str, set[str]] = {}
    for a in artifacts:
        by_compiler.setdefault(a.compiler, set()).add(a.compiler_version)
    for compiler, versions in by_compiler.items():
        plan.keep[compiler] = sorted(versions, key=_order, reverse=True)[:keep_compilers]
    kept_versions = {(c, v) for c, vs in plan.keep.items() for v in vs}
    for a in artifacts:
        if (a.compiler, a.compiler_version) in kept_versions:
            plan.kept += 1
            continue
        plan.deleted.append({"key": a.key, "prefix": a.prefix, "compiler_version": a.compiler_version})
    doomed = {(c, v) for c, vs in by_compiler.items() for v in vs} - kept_versions
    present = {o.key.split("/")[1] for o in store.list(layout.NEURON_CACHE) if o.key.count("/") >= 2}
    for compiler, version in sorted(doomed):
        cdir = layout.compiler_dir(compiler, version)
        if cdir in present:
            prune_store(store, cdir, dry_run=True, exact=True)
            plan.cache_dirs_deleted.append(cdir)
    collect_tmp_objects(store, dry_run=True)
    return plan
