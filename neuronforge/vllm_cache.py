"""The vLLM Neuron plugin's compile cache (SDK 2.32+, vllm-neuron 0.24 / 0.29 with
libtorch-neuronx-lite): what a complete entry is, how entries go to the store and come back.

The plugin keeps one folder per compiled graph (shared/reference/VLLM_NEURON_NATIVE.md §1.2, from
vllm_neuron/compile/cache.py `_is_cache_complete`, `_store_local`, `get_neff_filename`):

    $VLLM_CACHE_ROOT/neuron/compile_cache/<key: 32 hex>/
        graph.hlo                     what the NEFF was compiled from
        graph_<key>.neff              the NEFF, named after the key
        .artifact_metadata_v0.json    {"cache_key": <key>, ...}: the key is checked against the folder
        .compilation_complete         written LAST ("completed:<ts>\\nneff_size:<n>\\n...")
        command.txt, log-neuron-cc.txt, .cache_accessed (touched on every local hit: host-local)
    $VLLM_CACHE_ROOT/neuron/compile_cache/nki/<key>.json   NKI compile results (travel with the entries)

An entry is complete only with graph.hlo, the NEFF, the marker and a metadata file whose cache_key is
its folder's name. In the store the entries of one profile version live under
`vllm-neuron-cache/<version>/<key>/` (`layout.vllm_cache_prefix`), files first and the marker last;
`.cache_accessed` and lock files never leave the host. A cache manifest (`CacheManifest`) lists every
entry an artifact's server loads with each file's size and sha256: `sync.sh`, the smoke test and
`verify` check entries against it, so a server starts only on the bytes that were compiled.
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from neuronforge.stores import ArtifactStore, NotFound

KEY = re.compile(r"[0-9a-f]{32}")
MARKER = ".compilation_complete"
HLO = "graph.hlo"
METADATA = re.compile(r"\.artifact_metadata_v\d+\.json")
NKI_DIR = "nki"
# Per-host files: observability of local hits and the plugin's per-key locks.
HOST_LOCAL = re.compile(r"\.cache_accessed|.*\.lock")
MANIFEST_SCHEMA = 1


def _at(prefix: str, rel: str) -> str:
    """`prefix/rel`, or `rel` alone at a store's root (prefix "")."""
    return f"{prefix}/{rel}" if prefix else rel


def compile_cache_dir(cache_root: Path) -> Path:
    """The folder the plugin reads under `$VLLM_CACHE_ROOT` (vllm_neuron/envs.py
    get_neuron_compile_cache_dir)."""
    return cache_root / "neuron" / "compile_cache"


def neff_name(key: str) -> str:
    return f"graph_{key}.neff"


def entry_problems(entry: Path) -> list[str]:
    """Why the plugin would not take `entry` as a complete cache entry (empty: it would)."""
    key = entry.name
    if not KEY.fullmatch(key):
        return [f"{key}: not a 32-hex cache key"]
    out = [f"{key}/{name}: missing" for name in (HLO, neff_name(key), MARKER) if not (entry / name).is_file()]
    metas = [p for p in entry.iterdir() if METADATA.fullmatch(p.name)] if entry.is_dir() else []
    if not metas:
        out.append(f"{key}/.artifact_metadata_v0.json: missing")
    for meta in metas:
        try:
            recorded = json.loads(meta.read_text()).get("cache_key")
        except (OSError, ValueError, AttributeError):
            recorded = None
        if recorded != key:
            out.append(
                f"{key}/{meta.name}: cache_key {recorded!r} is not the folder's name "
                "(the plugin raises 'Cache key mismatch')"
            )
    return out


def local_keys(cache_dir: Path) -> set[str]:
    """The entry folders under a compile_cache folder (complete or not)."""
    if not cache_dir.is_dir():
        return set()
    return {p.name for p in cache_dir.iterdir() if p.is_dir() and KEY.fullmatch(p.name)}


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


@dataclass(frozen=True)
class EntryRecord:
    """One cache entry as the manifest lists it: its key and every published file (relative path
    inside the entry, size, sha256); the marker is among them and is always copied last."""

    key: str
    files: tuple[tuple[str, int, str], ...]

    @classmethod
    def of(cls, entry: Path) -> EntryRecord:
        files = sorted(
            (p.relative_to(entry).as_posix(), p.stat().st_size, _sha256(p))
            for p in entry.rglob("*")
            if p.is_file() and not HOST_LOCAL.fullmatch(p.name)
        )
        return cls(entry.name, tuple(files))

    def to_json(self) -> dict[str, Any]:
        return {"key": self.key, "files": [{"path": p, "size": s, "sha256": h} for p, s, h in self.files]}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> EntryRecord:
        return cls(str(data["key"]), tuple((f["path"], int(f["size"]), f["sha256"]) for f in data["files"]))


@dataclass
class CacheManifest:
    """What a vLLM Neuron server needs from the store to start without compiling, and what it was
    compiled with: the versions, the exact argv and env of `vllm serve`, the target, the route and
    every entry with its files' sizes and sha256 (`launch/vllm-cache.json`)."""

    profile: str  # name@version
    store_prefix: str  # URI of vllm-neuron-cache/<version>
    versions: dict[str, str]
    argv: list[str]  # `vllm serve` arguments after `serve`, the model folder as $MODEL_DIR
    env: dict[str, str]  # the serving environment the graphs depend on
    target: str  # NEURON_PLATFORM_TARGET_OVERRIDE: trn2 | trn3
    route: str  # native | xla
    image: str
    entries: list[EntryRecord] = field(default_factory=list)
    nki: list[tuple[str, int, str]] = field(default_factory=list)  # nki/<key>.json files
    built: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "schema_version": MANIFEST_SCHEMA,
            "profile": self.profile,
            "store_prefix": self.store_prefix,
            "image": self.image,
            "versions": dict(sorted(self.versions.items())),
            "target": self.target,
            "route": self.route,
            "argv": list(self.argv),
            "env": dict(sorted(self.env.items())),
            "entries": [e.to_json() for e in sorted(self.entries, key=lambda e: e.key)],
            "nki": [{"path": p, "size": s, "sha256": h} for p, s, h in sorted(self.nki)],
            "built": self.built,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> CacheManifest:
        if data.get("schema_version") != MANIFEST_SCHEMA:
            raise ValueError(f"cache manifest schema {data.get('schema_version')!r}, expected {MANIFEST_SCHEMA}")
        return cls(
            profile=data["profile"],
            store_prefix=data["store_prefix"],
            versions=dict(data["versions"]),
            argv=list(data["argv"]),
            env=dict(data["env"]),
            target=data["target"],
            route=data["route"],
            image=data.get("image", ""),
            entries=[EntryRecord.from_json(e) for e in data["entries"]],
            nki=[(f["path"], int(f["size"]), f["sha256"]) for f in data.get("nki", [])],
            built=dict(data.get("built") or {}),
        )

    @classmethod
    def read(cls, path: Path) -> CacheManifest:
        return cls.from_json(json.loads(path.read_text()))


# -- store side -------------------------------------------------------------------------------------
def upload_entry(store: ArtifactStore, prefix: str, entry: Path) -> bool:
    """Publish one complete entry under `prefix/<key>/`: every file but the marker first, the marker
    last, so a reader that trusts the marker never sees half an entry. False when the store already
    has it complete (entries are immutable: the same key is the same graph)."""
    problems = entry_problems(entry)
    if problems:
        raise ValueError(f"refusing to publish an incomplete vLLM cache entry: {'; '.join(problems)}")
    base = f"{prefix}/{entry.name}"
    if store.exists(f"{base}/{MARKER}"):
        return False
    skip = tuple(p.relative_to(entry).as_posix() for p in entry.rglob("*") if HOST_LOCAL.fullmatch(p.name))
    store.put_tree(entry, base, exclude=(*skip, MARKER))
    store.put_file(entry / MARKER, f"{base}/{MARKER}")
    return True


def upload_nki(store: ArtifactStore, prefix: str, cache_dir: Path) -> list[tuple[str, int, str]]:
    """The NKI compile results beside the entries (`nki/*.json`): they travel with the graphs."""
    nki = cache_dir / NKI_DIR
    out = []
    for path in sorted(nki.glob("*.json")) if nki.is_dir() else []:
        rel = f"{NKI_DIR}/{path.name}"
        store.put_file(path, f"{prefix}/{rel}")
        out.append((rel, path.stat().st_size, _sha256(path)))
    return out


def store_problems(store: ArtifactStore, prefix: str, manifest: CacheManifest) -> list[str]:
    """Every entry the manifest lists must be in the store, complete (marker present) and with each
    file at its recorded size: what a server that syncs the entries would otherwise miss."""
    out = []
    for record in manifest.entries:
        base = _at(prefix, record.key)
        present = {o.key[len(base) + 1 :]: o.size for o in store.list(base)}
        if MARKER not in present:
            out.append(f"{store.uri(base)}: missing or incomplete (no {MARKER}); the server would compile this graph")
            continue
        for rel, size, _ in record.files:
            if rel not in present:
                out.append(f"{store.uri(base)}/{rel}: missing")
            elif present[rel] != size:
                out.append(f"{store.uri(base)}/{rel}: {present[rel]} bytes, the manifest says {size}")
    for rel, _, _ in manifest.nki:
        if not store.exists(_at(prefix, rel)):
            out.append(f"{store.uri(prefix)}/{rel}: missing (NKI results travel with the entries)")
    return out


class SyncFailed(Exception):
    """An entry in the store is not what the manifest recorded: nothing was put in place."""


def pull(store: ArtifactStore, prefix: str, manifest: CacheManifest, cache_dir: Path) -> list[str]:
    """Bring every manifest entry into a local compile_cache folder, as `launch/sync.sh` does: each
    entry is downloaded beside its place, checked file by file (size and sha256) against the
    manifest, then renamed in whole, so the plugin sees complete entries or none. Entries already
    present and complete are kept. Returns the keys pulled."""
    cache_dir.mkdir(parents=True, exist_ok=True)
    pulled = []
    for record in manifest.entries:
        dest = cache_dir / record.key
        if dest.is_dir() and not entry_problems(dest):
            continue
        tmp = cache_dir / f".{record.key}.sync"
        shutil.rmtree(tmp, ignore_errors=True)
        try:
            store.get_files(
                [(_at(prefix, f"{record.key}/{rel}"), tmp / rel) for rel, _, _ in record.files],
                total_bytes=sum(size for _, size, _ in record.files),
            )
        except NotFound as exc:
            shutil.rmtree(tmp, ignore_errors=True)
            raise SyncFailed(f"{store.uri(prefix)}/{record.key}: {exc}") from None
        for rel, size, sha in record.files:
            got = tmp / rel
            if got.stat().st_size != size or _sha256(got) != sha:
                shutil.rmtree(tmp, ignore_errors=True)
                raise SyncFailed(f"{store.uri(prefix)}/{record.key}/{rel}: size or sha256 differs from the manifest")
        shutil.rmtree(dest, ignore_errors=True)
        tmp.rename(dest)
        pulled.append(record.key)
    for rel, size, sha in manifest.nki:
        dest = cache_dir / rel
        store.get_file(_at(prefix, rel), dest)
        if dest.stat().st_size != size or _sha256(dest) != sha:
            dest.unlink()
            raise SyncFailed(f"{store.uri(prefix)}/{rel}: size or sha256 differs from the manifest")
    return pulled
