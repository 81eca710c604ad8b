"""The vLLM Neuron plugin's compile cache (SDK 2.32+, vllm-neuron 0.24 / 0.29 with
libtorch-neuronx-lite): what a complete entry is, how entries go to the store and come back.

The plugin keeps one folder per compiled graph (its in-plugin 0.21 code, `vllm_neuron_sources.CACHE_CODE`:
`_is_cache_complete`, `_store_local`, `get_neff_filename`; the `nki/` results as libtorch-neuronx-lite
writes them on SDK 2.32, `vllm_neuron_sources.LNL_CACHE_CODE`):

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
from pathlib import Path

from neuronforge.records.tree import StoredFile
from neuronforge.records.vllm_cache import CacheManifest, EntryRecord
from neuronforge.stores import ArtifactStore, NotFound

KEY = re.compile(r"[0-9a-f]{32}")
MARKER = ".compilation_complete"
HLO = "graph.hlo"
METADATA = re.compile(r"\.artifact_metadata_v\d+\.json")
NKI_DIR = "nki"
# Per-host files: observability of local hits, the plugin's per-key locks, and what sync.sh verified
# (`artifacts.launch_fetch.STATE`).
HOST_LOCAL = re.compile(r"\.cache_accessed|.*\.lock|\.neuronforge-sync\.json")
__all__ = ["CacheManifest", "EntryRecord", "entry_record"]  # the manifest's shape: neuronforge.records.vllm_cache


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
            recorded = json.loads(meta.read_text(encoding="utf-8")).get("cache_key")
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


def entry_record(entry: Path) -> EntryRecord:
    """The manifest's record of a complete entry folder: every file but the host-local ones, sorted."""
    files = sorted(
        (p.relative_to(entry).as_posix(), p.stat().st_size, _sha256(p))
        for p in entry.rglob("*")
        if p.is_file() and not HOST_LOCAL.fullmatch(p.name)
    )
    return EntryRecord(key=entry.name, files=[StoredFile(path=p, size=n, sha256=h) for p, n, h in files])


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


def upload_nki(store: ArtifactStore, prefix: str, cache_dir: Path) -> list[StoredFile]:
    """The NKI compile results beside the entries (`nki/*.json`): they travel with the graphs."""
    nki = cache_dir / NKI_DIR
    out = []
    for path in sorted(nki.glob("*.json")) if nki.is_dir() else []:
        rel = f"{NKI_DIR}/{path.name}"
        store.put_file(path, f"{prefix}/{rel}")
        out.append(StoredFile(path=rel, size=path.stat().st_size, sha256=_sha256(path)))
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
        for f in record.files:
            if f.path not in present:
                out.append(f"{store.uri(base)}/{f.path}: missing")
            elif present[f.path] != f.size:
                out.append(f"{store.uri(base)}/{f.path}: {present[f.path]} bytes, the manifest says {f.size}")
    for f in manifest.nki:
        if not store.exists(_at(prefix, f.path)):
            out.append(f"{store.uri(prefix)}/{f.path}: missing (NKI results travel with the entries)")
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
                [(_at(prefix, f"{record.key}/{f.path}"), tmp / f.path) for f in record.files],
                total_bytes=sum(f.size for f in record.files),
            )
        except NotFound as exc:
            shutil.rmtree(tmp, ignore_errors=True)
            raise SyncFailed(f"{store.uri(prefix)}/{record.key}: {exc}") from None
        for f in record.files:
            got = tmp / f.path
            if got.stat().st_size != f.size or _sha256(got) != f.sha256:
                shutil.rmtree(tmp, ignore_errors=True)
                raise SyncFailed(f"{store.uri(prefix)}/{record.key}/{f.path}: size or sha256 differs from the manifest")
        shutil.rmtree(dest, ignore_errors=True)
        tmp.rename(dest)
        pulled.append(record.key)
    for f in manifest.nki:
        dest = cache_dir / f.path
        store.get_file(_at(prefix, f.path), dest)
        if dest.stat().st_size != f.size or _sha256(dest) != f.sha256:
            dest.unlink()
            raise SyncFailed(f"{store.uri(prefix)}/{f.path}: size or sha256 differs from the manifest")
    return pulled
