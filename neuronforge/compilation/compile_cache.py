"""A compile cache in the Neuron persistent-cache layout, local and mirrored in the store.

    <root>/<compiler>-<full version>/MODULE_<graph hash>+<flags hash>/
        model.pt2 (or model.neff + model.hlo_module.pb)   the compiled graph
        compile_flags.json                                 the flags it was compiled with
        model.done                                         written last: the entry is complete
        model.log                                          a failed compile's error (no model.done)

Graph hash: 20 hex chars of sha256 over the graph; flags hash: 8 hex chars of md5 over the flags
(md5("")[:8] = d41d8cd9 for no flags, as the Neuron compiler names it). Only entries with
`model.done` are ever read; uploads put `model.done` last, and `*.lock` files never leave the host.

What the store holds of an entry this host uploaded or pulled (each file's size and sha256) is
remembered beside the cache, per store, in `<root>/.nf-stored/<store digest>/<compiler dir>/<entry>.json`
(outside the compiler's folder): `sync_to_store` reports it (`SyncReport.stored`), so a payload
holding the same bytes (e.g. the cpu profile's graphs) is copied inside the store, not uploaded again.
The store's copy lives under `neuron-cache/` (`layout.neuron_cache_prefix`), so for Neuron backends
`NEURON_COMPILE_CACHE_URL=<store>/neuron-cache` is the very same cache.

`<full version>` is the compiler's version exactly as it reports it, local label included
(`neuronxcc-2.21.33363.0+82129205` for SDK 2.26.1): that is the folder libneuronxla reads and
writes, so the local folder, the store prefix, pre-seeding and sync all use it verbatim
(`layout.compiler_dir`). `NEURON_COMPILE_CACHE_URL` names the ROOT (`CompileCache.root`); the
compiler appends `neuronxcc-<full version>/` itself.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import shutil
import uuid
from collections.abc import Callable, Collection, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from neuronforge.artifacts import layout
from neuronforge.common.errors import StoreError
from neuronforge.records.base import RecordError
from neuronforge.records.compile_cache import GraphSet, StoredEntryNote
from neuronforge.records.local import read_local, write_local
from neuronforge.records.tree import StoredFile
from neuronforge.spec.source import sha256_file
from neuronforge.stores import ArtifactStore, NotFound, ObjectInfo

log = logging.getLogger(__name__)
DONE = layout.ENTRY_DONE
PULL_THREADS = 4
# config.json fields that record where a model came from, not what its graphs are
GRAPH_SET_IGNORED = frozenset({"_name_or_path", "transformers_version"})
# How the compiler names an entry in its log ("Using a cached neff at …/MODULE_<hash>+<flags>/model.neff",
# "Compilation Successfully Completed for model.MODULE_<hash>+<flags>.hlo_module.pb").
ENTRY_NAME = re.compile(r"MODULE_[0-9A-Za-z]+\+[0-9a-f]{8}")
FAILED_LOG = "model.log"
STORED = ".nf-stored"  # under the cache root: what the store holds of the entries this host synced or pulled


def graph_hash(material: str) -> str:
    return hashlib.sha256(material.encode()).hexdigest()[:20]


def flags_hash(flags: Any) -> str:
    text = flags if isinstance(flags, str) else json.dumps(flags, sort_keys=True, separators=(",", ":"))
    return hashlib.md5(text.encode() if text not in ("{}", "[]") else b"").hexdigest()[:8]


def entry_name(graph: str, flags: str) -> str:
    return f"MODULE_{graph}+{flags}"


@dataclass
class SyncReport:
    uploaded: list[str] = field(default_factory=list)
    already_present: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)  # compiles that left model.log without model.done
    incomplete: list[str] = field(default_factory=list)  # in progress (lock) or interrupted
    graph_set_recorded: bool = False
    # Every file of the uploaded and already-present entries whose stored bytes this host knows
    # ({"key", "size", "sha256"}): what a payload may copy inside the store. Not in `to_json`.
    stored: list[dict[str, Any]] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {k: (list(v) if isinstance(v, list) else v) for k, v in self.__dict__.items() if k != "stored"}


class CompileCache:
    """One compiler version's directory of a local cache, optionally backed by a store."""

    def __init__(self, root: Path, compiler: str, version: str, store: ArtifactStore | None = None) -> None:
        """`root` is what `NEURON_COMPILE_CACHE_URL` names; `version` the compiler's full version
        (`neuronxcc.__version__`, with its local label). A version that cannot be one path
        component raises InvalidInput (layout.compiler_dir) before anything touches the disk."""
        self.compiler, self.version = compiler, version
        self.dir_name = layout.compiler_dir(compiler, version)
        self.root = root
        self.local = root / self.dir_name  # one component below the root, as the compiler lays it out
        self.store = store
        self.store_prefix = layout.neuron_cache_prefix(compiler, version)

    def entry(self, name: str) -> Path:
        return self.local / name

    def lookup(self, name: str) -> Path | None:
        """A complete entry, from the local cache or pulled from the store; None on a miss."""
        path = self.entry(name)
        if (path / DONE).exists():
            return path
        if self.store is not None and self.store.exists(f"{self.store_prefix}/{name}/{DONE}"):
            tmp = path.with_name(f".{name}.pull")
            shutil.rmtree(tmp, ignore_errors=True)
            self.store.get_tree(f"{self.store_prefix}/{name}", tmp)
            if not (tmp / DONE).exists():
                shutil.rmtree(tmp, ignore_errors=True)
                return None
            shutil.rmtree(path, ignore_errors=True)
            tmp.rename(path)
            self._remember_stored(name)  # the bytes just pulled are the store's
            log.info("compile cache: %s pulled from %s", name, self.store.uri(self.store_prefix))
            return path
        return None

    def _stored_record(self, name: str) -> Path | None:
        if self.store is None:
            return None
        store_digest = hashlib.sha256(self.store.root_uri.encode()).hexdigest()[:16]
        return self.root / STORED / store_digest / self.dir_name / f"{name}.json"

    def _remember_stored(self, name: str) -> list[dict[str, Any]]:
        """Record that the store holds entry `name` with exactly the bytes of the local entry (this
        host just uploaded or pulled them); returns the files as `SyncReport.stored` lists them."""
        record = self._stored_record(name)
        path = self.entry(name)
        if record is None:
            return []
        files = [
            StoredFile(path=p.relative_to(path).as_posix(), size=p.stat().st_size, sha256=sha256_file(p))
            for p in sorted(path.rglob("*"))
            if p.is_file() and not p.name.endswith(".lock") and p.name != FAILED_LOG
        ]
        record.parent.mkdir(parents=True, exist_ok=True)
        tmp = record.with_name(f".{record.name}.{uuid.uuid4().hex[:8]}")
        write_local(StoredEntryNote(store=self.store.uri(f"{self.store_prefix}/{name}"), files=files), tmp)
        os.replace(tmp, record)
        return self._stored_keys(name, files)

    def _stored_keys(self, name: str, files: list[StoredFile]) -> list[dict[str, Any]]:
        return [{"key": f"{self.store_prefix}/{name}/{f.path}", "size": f.size, "sha256": f.sha256} for f in files]

    def known_stored(self, name: str) -> list[dict[str, Any]]:
        """What this host recorded the store holds of entry `name` (uploaded or pulled here); [] if
        nothing (e.g. another host uploaded it while this one compiled the same graph: the bytes may differ)."""
        record = self._stored_record(name)
        try:
            files = read_local(StoredEntryNote, record).files if record is not None else []
        except (OSError, RecordError):  # absent, or not a note this release reads: upload again
            return []
        return self._stored_keys(name, files)

    def begin(self, name: str, flags: Any) -> Path:
        """A fresh entry directory for a compile about to run (any stale attempt removed)."""
        path = self.entry(name)
        shutil.rmtree(path, ignore_errors=True)
        path.mkdir(parents=True)
        (path / "compile_flags.json").write_text(json.dumps(flags, sort_keys=True) + "\n", encoding="utf-8")
        return path

    @staticmethod
    def commit(path: Path) -> None:
        (path / DONE).write_text("", encoding="utf-8")

    @staticmethod
    def fail(path: Path, error: str) -> None:
        (path / FAILED_LOG).write_text(error, encoding="utf-8")

    def entries(self) -> list[Path]:
        return sorted(p for p in self.local.glob("MODULE_*") if p.is_dir()) if self.local.is_dir() else []

    def preseed(self, names: Iterable[str] | None = None) -> list[str]:
        """Pull complete entries the local cache lacks, in parallel, so the compiler finds them on
        local disk: `names` (a graph set's entries), or every entry of this compiler version when
        None — which costs time in proportion to the whole store (bench/cache_seed.py)."""
        if self.store is None:
            return []
        if names is None:
            listing = self.store.list(self.store_prefix)
            base = len(self.store_prefix) + 1
            names = {o.key[base:].split("/")[0] for o in listing if o.key.endswith(f"/{DONE}")}
        missing = sorted(n for n in set(names) if not (self.entry(n) / DONE).exists())
        with ThreadPoolExecutor(max_workers=PULL_THREADS) as pool:
            found = list(pool.map(self.lookup, missing))
        pulled = [n for n, path in zip(missing, found, strict=True) if path is not None]
        if pulled:
            log.info("compile cache: pre-seeded %d entries from %s", len(pulled), self.store.uri(self.store_prefix))
        return pulled

    def graph_set(self, key: str) -> list[str] | None:
        """The entries a compile of graph set `key` used, as recorded in the store; None if unknown."""
        if self.store is None:
            return None
        try:
            return GraphSet.read(self.store, layout.neuron_graph_set(self.compiler, self.version, key)).entries
        except (NotFound, StoreError):  # RecordError is a StoreError: an unreadable set is an unknown one
            return None

    def record_graph_set(self, key: str, entries: list[str]) -> bool:
        """Record which entries graph set `key` compiles into — only once all are in the store."""
        if self.store is None or not entries:
            return False
        if not all(self.store.exists(f"{self.store_prefix}/{n}/{DONE}") for n in entries):
            return False
        GraphSet(entries=sorted(entries)).write(self.store, layout.neuron_graph_set(self.compiler, self.version, key))
        return True

    def sync_to_store(self) -> SyncReport:
        """Upload complete local entries the store lacks: files first, `model.done` last."""
        report = SyncReport()
        if self.store is None:
            return report
        for path in self.entries():
            name = path.name
            if not (path / DONE).exists():
                (report.failed if (path / FAILED_LOG).exists() else report.incomplete).append(name)
                continue
            prefix = f"{self.store_prefix}/{name}"
            if self.store.exists(f"{prefix}/{DONE}"):
                report.already_present.append(name)
                report.stored += self.known_stored(name)
                continue
            skip = (*(p.name for p in path.iterdir() if p.name.endswith(".lock")), DONE)
            self.store.put_tree(path, prefix, exclude=skip)
            self.store.put_file(path / DONE, f"{prefix}/{DONE}")
            report.uploaded.append(name)
            report.stored += self._remember_stored(name)
        for name in report.failed:
            log.warning("compile cache: %s failed to compile (model.log kept locally, not uploaded)", name)
        return report


# -- the store's cache, for `neuronforge cache ls|stats|prune` ------------------------------------------
@dataclass
class StoredEntry:
    compiler_dir: str  # e.g. neuronxcc-2.21.33363.0+82129205
    name: str  # MODULE_<graph>+<flags>
    files: int
    bytes: int
    complete: bool  # has model.done


def selects(compiler_dir: str, present: str) -> bool:
    """Whether `--compiler-version` naming `compiler_dir` selects the stored folder `present`.

    Exactly, or — when the selection has no local label — every local label of that public
    version, as PEP 440 `==2.21.33363.0` matches `2.21.33363.0+82129205`: the compiler's folders
    always carry the label, while people know the version pip pins."""
    return present == compiler_dir or ("+" not in compiler_dir and present.startswith(f"{compiler_dir}+"))


# `<compiler>-<full version>`: the compiler's name may hold dashes (torch-inductor), its version starts with a digit.
_COMPILER_DIR = re.compile(r"(?P<compiler>.+?)-(?P<version>[0-9].*)")


def matches(present: str, compiler: str | None = None, version: str | None = None) -> bool:
    """Whether the stored compiler folder `present` is one of `compiler` (any when None) at
    `version` (any when None; without a local label, every label of it: `selects`). So
    `--compiler-version 2.13.0` alone finds `torch-inductor-2.13.0+cpu` as well as a neuronxcc one."""
    if compiler is None and version is None:
        return True
    parts = _COMPILER_DIR.fullmatch(present)
    if parts is None:
        return False
    return (compiler is None or parts["compiler"] == compiler) and (
        version is None or selects(version, parts["version"])
    )


def _selected_objects(
    store: ArtifactStore,
    top: str,
    compiler_dir: str | None,
    exact: bool,
    compiler: str | None = None,
    version: str | None = None,
) -> list[tuple[str, ObjectInfo]]:
    """(compiler folder, object) under `top/` for the selected compiler folders: those
    `compiler_dir` selects, else those of `compiler` and/or `version` (`matches`)."""
    if compiler_dir is not None and exact:
        return [(compiler_dir, o) for o in store.list(f"{top}/{compiler_dir}") if o.key.count("/") >= 2]
    if compiler_dir is not None and "+" in compiler_dir:  # one folder, listed alone
        listing = store.list(f"{top}/{compiler_dir}")
    else:  # labelled siblings, other compilers: they share no folder-like prefix, list the whole top level
        listing = store.list(top)
    out = []
    for obj in listing:
        cdir = obj.key.split("/")[1] if obj.key.count("/") >= 2 else ""
        if not cdir:
            continue
        if selects(compiler_dir, cdir) if compiler_dir is not None else matches(cdir, compiler, version):
            out.append((cdir, obj))
    return out


def compiler_dirs(store: ArtifactStore) -> list[str]:
    """The compiler folders the store's cache has (what a selection that matched nothing can name)."""
    return sorted({o.key.split("/")[1] for o in store.list(layout.NEURON_CACHE) if o.key.count("/") >= 2})


def stored_entries(
    store: ArtifactStore,
    compiler_dir: str | None = None,
    exact: bool = False,
    *,
    compiler: str | None = None,
    version: str | None = None,
) -> list[StoredEntry]:
    """The store's cache entries: all, those of the compiler folders `compiler_dir` selects (with
    `exact` only the folder named `compiler_dir`: what `gc` deletes, never a sibling), or those of
    `compiler` and/or `version` (`matches`)."""
    grouped: dict[tuple[str, str], list[tuple[str, int]]] = {}
    for cdir, obj in _selected_objects(store, layout.NEURON_CACHE, compiler_dir, exact, compiler, version):
        parts = obj.key.split("/")
        if len(parts) >= 4 and parts[2].startswith("MODULE_"):
            grouped.setdefault((cdir, parts[2]), []).append((parts[-1], obj.size))
    return [
        StoredEntry(cdir, name, len(files), sum(size for _, size in files), any(f == DONE for f, _ in files))
        for (cdir, name), files in sorted(grouped.items())
    ]


def prune_store(
    store: ArtifactStore,
    compiler_dir: str | None = None,
    incomplete_only: bool = False,
    dry_run: bool = False,
    exact: bool = False,
    *,
    compiler: str | None = None,
    version: str | None = None,
    keep: Callable[[list[StoredEntry]], Collection[tuple[str, str]]] | None = None,
) -> list[StoredEntry]:
    """Delete cache entries: all of the compiler folders `compiler_dir` selects (`selects`; with
    `exact` only that very folder) or `compiler` / `version` match (`matches`), or only incomplete
    ones (no model.done). `model.done` goes first, so a reader never trusts an entry being deleted.

    `keep`, given the selected entries, names the (compiler folder, entry) pairs that stay (those a
    published artifact points at: `neuronforge.farm.gc.referenced_cache_entries`); their folders' graph-set
    records stay too."""
    chosen = stored_entries(store, compiler_dir, exact, compiler=compiler, version=version)
    kept = set(keep(chosen)) if keep is not None else set()
    doomed = [e for e in chosen if not (incomplete_only and e.complete) and (e.compiler_dir, e.name) not in kept]
    if not dry_run:
        for e in doomed:
            base = f"{layout.NEURON_CACHE}/{e.compiler_dir}/{e.name}"
            if e.complete:
                store.delete_prefix(f"{base}/{DONE}")
            store.delete_prefix(base)
        if (compiler_dir or version) and not incomplete_only:  # the graph-set records of that version go too
            sets = _selected_objects(store, layout.NEURON_CACHE_SETS, compiler_dir, exact, compiler, version)
            for cdir in sorted({c for c, _ in sets} - {c for c, _ in kept}):
                store.delete_prefix(f"{layout.NEURON_CACHE_SETS}/{cdir}")
    return doomed


@dataclass
class CacheUse:
    """The cache entries one compile created and the ones it reused (from the compiler's log)."""

    created: list[str] = field(default_factory=list)
    reused: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)

    @property
    def used(self) -> list[str]:
        return sorted({*self.created, *self.reused})


def graph_set_key(model_config: dict[str, Any], target_json: dict[str, Any], toolchain_json: dict[str, Any]) -> str:
    """What decides the compiled graphs but not the weights: the model config (without provenance
    fields), the target and the toolchain. NEFFs carry no weights, so other revisions and
    fine-tunes of a model with the same config share a graph set and its cache entries."""
    config = {k: v for k, v in model_config.items() if k not in GRAPH_SET_IGNORED}
    material = json.dumps([config, target_json, toolchain_json], sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(material.encode()).hexdigest()


def compile_through_cache(
    cache: CompileCache, run: Callable[[], list[str]], preseed: list[str] | None = None
) -> CacheUse:
    """Pre-seed the local cache with `preseed` (the entries a previous compile of the same graph
    set recorded), run a compiler child (`run` returns its log lines) and tell which complete
    entries it created and which it reused."""
    if preseed:
        cache.preseed(preseed)
    cache.local.mkdir(parents=True, exist_ok=True)
    before = {p.name for p in cache.entries()}
    lines = run()
    new = {p.name: p for p in cache.entries() if p.name not in before}
    failed = sorted(n for n, p in new.items() if not (p / DONE).exists())
    if failed:
        log.warning("the compile left failed cache entries (model.log, no model.done): %s", failed)
    created = sorted(n for n, p in new.items() if (p / DONE).exists())
    mentioned = {m for line in lines for m in ENTRY_NAME.findall(line)}
    reused = sorted(n for n in mentioned - set(new) if (cache.entry(n) / DONE).exists())
    return CacheUse(created, reused, failed)
