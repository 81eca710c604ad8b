"""Stage `publish`, and the index lookup that lets a request skip everything when already published.

Under `artifacts/<org>/<name>/<revision>/<target-slug>/<key12>/`, as the target's serving profile
assembled it on the compile host (`neuronforge.stages.payload`):
- `<folder>/`: the model as its consumer loads it, under a folder named for what it holds
  (`cpu-aoti/`, `optimum-neuron/`, `nxdi/`, `split/`);
- `launch/`: the launch spec rendered from the target (env file, command line);
- `smoke/expected.json`: the reference the smoke test compared against;
- `smoke.json`: the smoke-test result;
- `manifest.json`, written LAST: cache key, request, revision, profile (name, version, pins),
  toolchain, flags, every file with size and sha256, the outputs (`formats`, paths relative to the
  artifact's folder, rendered as URIs of whichever store is read), the smoke result, where each
  stage ran and for how long (`hosts`), timestamps.
Publishing copies the payload the smoke test loaded (staged as `builds/<key>/<digest>/`) inside the
store — the bytes never travel through the publishing host — adds `smoke.json`, checks every file
is there at its size, and writes the manifest. Then `index/<key>.json` is created with
`put_if_absent`. Readers trust only a complete manifest: `lookup` follows the index to the manifest
and checks every file it lists exists.
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import neuronforge
from neuronforge import layout
from neuronforge.errors import InvalidInput, StoreError
from neuronforge.localcache import TreeRef
from neuronforge.request import CompileRequest, Toolchain, cache_key_material
from neuronforge.source import sha256_file
from neuronforge.stores import ArtifactStore, NotFound

log = logging.getLogger(__name__)
MANIFEST_SCHEMA = 1
INDEX_SCHEMA = 1
SMOKE_JSON = "smoke.json"


@dataclass
class PublishInput:
    request: CompileRequest
    toolchain: Toolchain
    key: str
    build: TreeRef  # the payload the smoke test loaded, staged in the store
    smoke: dict[str, Any]
    compile: dict[str, Any]  # the compile stage's record (graphs, cache sync, the payload's formats)
    run_id: str = ""  # the Airflow run that built it (empty from the CLI): linked from the catalog page
    hosts: dict[str, Any] = field(default_factory=dict)  # where each stage ran, how long (`costs.host_report`)


@dataclass
class Published:
    key: str
    prefix: str
    manifest_uri: str
    uris: dict[str, str] = field(default_factory=dict)  # output (model folder, launch) -> URI
    manifest: dict[str, Any] = field(default_factory=dict)


def _payload_files(store: ArtifactStore, build: TreeRef) -> list[dict[str, Any]]:
    """The staged payload's file list, from its manifest as the smoke test's ref pinned it."""
    raw = store.get_bytes(build.manifest_key)
    if hashlib.sha256(raw).hexdigest() != build.manifest_sha256:
        raise StoreError(
            f"{store.uri(build.manifest_key)} changed since the compile staged it; run the build again "
            "(what the smoke test loaded is no longer what would be published)"
        )
    return list(json.loads(raw)["files"])


def publish(inp: PublishInput, store: ArtifactStore) -> Published:
    if not inp.smoke.get("passed"):
        raise InvalidInput(f"refusing to publish {inp.key[:12]}: the smoke test failed ({inp.smoke.get('reason')})")
    prefix = layout.artifact_prefix(inp.request.source, inp.request.target, inp.key)
    files = _payload_files(store, inp.build)
    store.copy_objects(inp.build.prefix, prefix, [f["path"] for f in files])
    smoke = (json.dumps(inp.smoke, indent=2) + "\n").encode()
    store.put_bytes(smoke, f"{prefix}/{SMOKE_JSON}")
    files.append({"path": SMOKE_JSON, "size": len(smoke), "sha256": hashlib.sha256(smoke).hexdigest()})
    files.sort(key=lambda f: f["path"])
    missing = _missing(_sizes(store, prefix), prefix, files)
    if missing:
        raise StoreError(f"{store.uri(prefix)}: {missing[:3]} missing or of another size after copying; not published")
    compile_record = {k: v for k, v in inp.compile.items() if k != "formats"}
    manifest = {
        "schema_version": MANIFEST_SCHEMA,
        "cache_key": inp.key,
        "request": cache_key_material(inp.request, inp.toolchain),
        "source": {
            "kind": inp.request.source.kind,
            "location": inp.request.source.location,
            "revision": inp.request.source.resolved_revision,
        },
        "target_slug": inp.request.target.slug,
        "profile": inp.request.target.serving_profile.describe(),
        "toolchain": inp.toolchain.to_json(),
        "compiler_flags": list(inp.toolchain.compiler_flags),
        "files": files,
        # Store-relative (to the artifact's folder): a copied or moved store renders its own URIs.
        "formats": dict(inp.compile.get("formats") or {}),
        "smoke": inp.smoke,
        "compile": compile_record,
        "hosts": inp.hosts,
        "neuronforge_version": neuronforge.__version__,
        "run_id": inp.run_id,
        "published_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    manifest_key = f"{prefix}/{layout.ARTIFACT_MANIFEST}"
    store.write_json(manifest_key, manifest)  # last: from here on the artifact exists
    index = {"schema_version": INDEX_SCHEMA, "cache_key": inp.key, "manifest": manifest_key, "prefix": prefix}
    if not store.put_if_absent(json.dumps(index, indent=2).encode(), layout.index_entry(inp.key)):
        log.info("index/%s already present (published by an earlier or concurrent run)", inp.key[:12])
    note_published(store, index, manifest)
    uris = format_uris(store, prefix, manifest["formats"])
    return Published(inp.key, prefix, store.uri(manifest_key), uris, manifest)


def note_published(store: ArtifactStore, index: dict[str, Any], manifest: dict[str, Any]) -> None:
    """Tell the farm index (two requests). Its failure does not unpublish anything: the index is a
    cache of the manifests, and the next compaction finds the pointer without a record."""
    from neuronforge import farm_index

    try:
        farm_index.append(store, [farm_index.published_record(index, manifest)])
    except (StoreError, OSError) as exc:
        log.warning(
            "published %s, but the farm index was not updated (%s); its next compaction recovers it",
            manifest["cache_key"][:12],
            exc,
        )


def format_uris(store: ArtifactStore, prefix: str, formats: dict[str, str]) -> dict[str, str]:
    """The URIs of an artifact's outputs in the store being read. Manifests hold paths relative to
    the artifact's folder; older ones held URIs of the store they were written to, of which the part
    below the artifact's folder is kept — so a replicated bucket or a moved folder points at itself."""
    out = {}
    for name, where in formats.items():
        rel = str(where)
        if "://" in rel:
            rel = rel.split(f"/{prefix}/", 1)[-1] if f"/{prefix}/" in rel else rel.rsplit("/", 1)[-1]
        out[name] = store.uri(f"{prefix}/{rel}")
    return out


def lookup(store: ArtifactStore, key: str) -> Published | None:
    """The published artifact for `key`, if its index entry points at a complete manifest."""
    try:
        index = store.read_json(layout.index_entry(key))
        manifest = store.read_json(index["manifest"])
    except (NotFound, KeyError, StoreError):
        return None
    if manifest.get("cache_key") != key:
        return None
    missing = _missing(_sizes(store, index["prefix"]), index["prefix"], manifest.get("files", []))
    if missing:
        log.warning("index/%s points at an incomplete artifact (%s missing); ignoring it", key[:12], missing[0])
        return None
    uris = format_uris(store, index["prefix"], manifest.get("formats", {}))
    return Published(key, index["prefix"], store.uri(index["manifest"]), uris, manifest)


@dataclass(frozen=True)
class IndexedArtifact:
    """One `index/<key>.json` as found: its entry and manifest, or `problem` saying why it
    publishes nothing (unreadable, not JSON, another kind of file, manifest gone)."""

    index_key: str
    index: dict[str, Any] | None = None
    manifest: dict[str, Any] | None = None
    problem: str | None = None


# What every reader of a manifest relies on; a JSON file without them is not an artifact manifest.
MANIFEST_SHAPE: dict[str, type] = {
    "cache_key": str,
    "source": dict,
    "toolchain": dict,
    "files": list,
}


def manifest_problem(manifest: Any) -> str | None:
    """None for something shaped like an artifact manifest, else what it lacks."""
    if not isinstance(manifest, dict):
        return f"not an artifact manifest (a JSON {type(manifest).__name__})"
    wrong = [k for k, kind in MANIFEST_SHAPE.items() if not isinstance(manifest.get(k), kind)]
    if wrong:
        return f"not an artifact manifest (no valid {', '.join(wrong)})"
    if not all(isinstance(f, dict) and {"path", "size", "sha256"} <= f.keys() for f in manifest["files"]):
        return "not an artifact manifest (its files are not path/size/sha256 entries)"
    return None


def scan_index(store: ArtifactStore) -> Iterator[IndexedArtifact]:
    """Every index entry of the store, each either with its manifest or with the problem; nothing
    a store holds (another JSON file, bytes that are not JSON) makes the scan fail."""
    for obj in store.list("index"):
        try:
            index = store.read_json(obj.key)
        except StoreError as exc:
            yield IndexedArtifact(obj.key, problem=str(exc))
            continue
        if not isinstance(index, dict) or not isinstance(index.get("manifest"), str):
            yield IndexedArtifact(obj.key, problem="not an index entry (no manifest key)")
            continue
        try:
            manifest = store.read_json(index["manifest"])
        except StoreError as exc:
            yield IndexedArtifact(obj.key, index, problem=f"manifest unreadable: {exc}")
            continue
        yield IndexedArtifact(obj.key, index, manifest, manifest_problem(manifest))


def published_manifests(store: ArtifactStore) -> Iterator[tuple[str, dict[str, Any], dict[str, Any]]]:
    """(index key, index entry, manifest) of every index entry whose manifest is readable and is
    one; any other entry publishes nothing and is skipped (`scan_index` says why)."""
    for entry in scan_index(store):
        if entry.problem is None and entry.index is not None and entry.manifest is not None:
            yield entry.index_key, entry.index, entry.manifest


def incomplete_files(store: ArtifactStore, index: dict[str, Any], manifest: dict[str, Any]) -> list[str]:
    """The manifest's files that the store lacks or holds at another size (one listing, no
    download: what `ls` can afford per artifact; `verify` also re-hashes)."""
    prefix = index.get("prefix") or index["manifest"].rpartition("/")[0]
    return verify_files(store, prefix, manifest["files"])


def verify_manifest(store: ArtifactStore, manifest_key: str, download_to: Path | None = None) -> list[str]:
    """Problems with a published artifact: files missing, sizes or (when downloaded) sha256 wrong."""
    return verify_files(store, manifest_key.rpartition("/")[0], store.read_json(manifest_key)["files"], download_to)


def verify_files(
    store: ArtifactStore, prefix: str, files: list[dict[str, Any]], download_to: Path | None = None
) -> list[str]:
    """Problems with the files a manifest lists under `prefix` (the artifact root, "" for the store's
    root): missing or another size, and when downloaded into `download_to`, another sha256. A path
    that would leave the artifact folder is refused, never downloaded."""
    escaping = [f["path"] for f in files if Path(f["path"]).is_absolute() or ".." in Path(f["path"]).parts]
    problems = [f"{path}: path escapes the artifact folder" for path in escaping]
    files = [f for f in files if f["path"] not in escaping]
    present = _sizes(store, prefix)
    missing = _missing(present, prefix, files)
    problems += [f"{path}: missing or wrong size" for path in missing]
    if download_to is not None:
        for f in files:
            if _under(prefix, f["path"]) not in present:
                continue
            # a file of the wrong size is still downloaded: the caller may inspect what is there
            store.get_file(_under(prefix, f["path"]), download_to / f["path"])
            if f["path"] not in missing and sha256_file(download_to / f["path"]) != f["sha256"]:
                problems.append(f"{f['path']}: sha256 mismatch")
    return problems


def _under(prefix: str, path: str) -> str:
    return f"{prefix}/{path}" if prefix else path


def _sizes(store: ArtifactStore, prefix: str) -> dict[str, int]:
    return {o.key: o.size for o in store.list(prefix)}


def _missing(present: dict[str, int], prefix: str, files: list[dict[str, Any]]) -> list[str]:
    """Manifest entries absent from the store listing `present` (key -> size), or with another size."""
    return [f["path"] for f in files if present.get(_under(prefix, f["path"])) != f["size"]]
