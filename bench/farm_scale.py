#!/usr/bin/env python
"""Farm scale: what each reader of a compile farm's store costs as the farm grows, through the farm
index (`neuronforge.artifacts.farm_index`) and through the full scans it replaced (commit 5c3ed6d, ported in
`farm_scale_baseline.py`), both measured in the same run on the same stores.

One artifact is built with the real pipeline (`run_target`, the embedded tiny Llama, cpu profile;
about 40 s) unless `--artifact-store` names a file store that holds one. The farm is grown from it
to each of `--sizes` published artifacts, in a file store and in S3 (moto's ThreadedMotoServer on
127.0.0.1, in a child process so the server has its own core): every other artifact is a clone
published under a genuine cache key — another model (`bench-farm/llama-NNNNN@<40-hex revision>`,
five instance types each, 10% of the models built with the previous compiler version) — whose
key is recomputed with `cache_key(compile_request(...), toolchain)`, whose manifest carries
`cache_key_material`, and whose `manifest.json`, `index/<key>.json` and farm-index record are
written as `publish` writes them (the record with `farm_index.append`, compaction included).
What each clone holds is printed before the tables.

Requests are counted with botocore's `before-send` event (every HTTP attempt, retries included);
on the file store, calls of the store's primitives. Each reader gets requests per view, seconds per
view (median of `--repeats` for the new readers, one run of each baseline) and the 20 ms model
(requests x 20 ms: a store across a network), new against baseline, with the ratio. To keep the
default run near 20 minutes on 2 cores, on S3 farms above `--full-baselines-upto` (1 000) the
filtered view's baseline (old `/api/artifacts?model=`) is derived from the detail endpoint's (the
same old `farm_rows` scan) and says so. `--simulate N` then writes an S3 farm of N index records
with their pointers (no payloads; manifests only where a reader reads them; gc not run) and checks
the new readers stay within 2x of the goals there; its baseline is the largest run's, scaled.

    .venv/bin/python bench/farm_scale.py [--sizes 100,1000,5000] [--simulate 50000] [--stores file,s3]
    .venv/bin/python bench/farm_scale.py --quick        # sizes 40, no simulation: seconds, for the test
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import io
import json
import logging
import os
import resource
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
MS_PER_REQUEST = 0.020
INSTANCES = ("inf2.xlarge", "inf2.8xlarge", "inf2.24xlarge", "inf2.48xlarge", "trn1.2xlarge")
CATALOG_MODELS = (0, 1, 2, 3)  # x 5 instance types = the 20-target catalog
OLD_TOOLCHAIN_EVERY = 10  # models m with m % 10 == 5 were built with the previous compiler version
DETAIL_CLONE = 42
S3_PAYLOAD_CLONES = 100  # on S3 the first clones hold the whole payload; the rest manifest + pointer
SIM_TAIL = 32  # records left in the simulated farm's tail (half of COMPACT_AT): a live farm's steady state
PUBLISH_WINDOW = 200
GOALS = {
    "page": 20,
    "page_model_s": 1.0,
    "detail": 3,  # one artifact: the catalog's JSON endpoint and `show --json`, by its whole key
    "stale_per_target": 3,
    "stale_constant": 10,
    "ls": 5,
}
FILE_GOALS_S = {"page": 0.5, "ls": 0.5, "detail": 0.1}  # on the file store at the largest size, independent of N
GOAL_PUBLISH = 3.0


# -- counting ------------------------------------------------------------------------------------------
class Calls:
    """(operation, key) of every request (S3) or store call (file store), in order."""

    def __init__(self) -> None:
        self.log: list[tuple[str, str]] = []
        self._lock = threading.Lock()

    def add(self, op: str, key: str) -> None:
        with self._lock:
            self.log.append((op, key))

    def mark(self) -> int:
        return len(self.log)

    def since(self, mark: int) -> list[tuple[str, str]]:
        with self._lock:
            return self.log[mark:]

    # botocore `before-send` handler: one call per HTTP attempt (retries included)
    def __call__(self, request: Any, event_name: str, **_: Any) -> None:
        self.add(event_name.rsplit(".", 1)[-1], unquote(urlsplit(request.url).path))


FILE_OPS = {
    "get_bytes": "GetObject",
    "read_versioned": "GetObject",
    "read_capped": "GetObject",
    "get_file": "GetObject",
    "get_files": "GetObject",
    "get_tree": "GetObject",
    "list": "ListObjectsV2",
    "list_page": "ListObjectsV2",
    "exists": "HeadObject",
    "put_bytes": "PutObject",
    "put_file": "PutObject",
    "put_if_absent": "PutObject",
    "replace_if_version": "PutObject",
    "put_tree": "PutObject",
    "copy_objects": "CopyObject",
    "delete_prefix": "DeleteObjects",
    "probe": "HeadBucket",
}
_KEY_ARG = {"put_bytes": 1, "put_file": 1, "put_if_absent": 1, "replace_if_version": 1}


def count_file_store_calls(calls: Calls) -> None:
    """Count the outermost calls of FileStore's primitives (the file store's 'requests')."""
    from neuronforge.stores.file import FileStore

    depth = threading.local()
    for name, op in FILE_OPS.items():
        original = getattr(FileStore, name)

        def wrapper(self: Any, *a: Any, _orig: Any = original, _op: str = op, _name: str = name, **kw: Any) -> Any:
            level = getattr(depth, "n", 0)
            if level == 0:
                i = _KEY_ARG.get(_name, 0)
                calls.add(_op, str(a[i]) if len(a) > i and isinstance(a[i], str) else "")
            depth.n = level + 1
            try:
                return _orig(self, *a, **kw)
            finally:
                depth.n = level

        setattr(FileStore, name, wrapper)


def kind_of(op: str, key: str) -> str:
    if op == "GetObject":
        if "farm-index/pages/" in key:
            return "pages"
        if key.endswith(("farm-index/head.json", "farm-index/tail.json")):
            return "idx"
        if "index/" in key and key.endswith(".json") and "/artifacts/" not in f"/{key}":
            return "ptr"
        return "manifest" if key.endswith("manifest.json") else "get"
    return {
        "ListObjectsV2": "list",
        "HeadObject": "head",
        "HeadBucket": "head",
        "PutObject": "put",
        "CopyObject": "put",
        "DeleteObjects": "del",
        "DeleteObject": "del",
    }.get(op, op)


def breakdown(calls: list[tuple[str, str]]) -> str:
    c = Counter(kind_of(op, key) for op, key in calls)
    order = ["idx", "pages", "ptr", "manifest", "get", "list", "head", "put", "del"]
    return " ".join(f"{k}{c[k]}" for k in sorted(c, key=lambda k: order.index(k) if k in order else 99))


class WarningCount(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(f"{record.name}: {record.getMessage()}"[:200])


# -- the real artifact and its clones ------------------------------------------------------------------
@dataclass
class Template:
    root: Path  # the file store holding the real artifact
    prefix: str
    manifest: dict[str, Any]
    index: dict[str, Any]
    toolchain: Any
    old_toolchain: Any
    targets: dict[str, Any]  # instance type -> TargetSpec

    @property
    def paths(self) -> list[str]:
        return [f["path"] for f in self.manifest["files"]]


def previous_version(version: str) -> str:
    from packaging.version import Version

    v = Version(version)
    local = f"+{v.local}" if v.local else ""
    return f"{v.major}.{max(v.minor - 1, 0)}.{v.micro}{local}" if v.minor else f"{max(v.major - 1, 0)}.0.0{local}"


def real_artifact(artifact_store: str | None, scratch: Path) -> tuple[Template, float]:
    """The one artifact built by the real pipeline (or found in `artifact_store`)."""
    from neuronforge.artifacts.published import published_manifests
    from neuronforge.common import settings
    from neuronforge.spec.target import TargetSpec
    from neuronforge.spec.toolchain import Toolchain
    from neuronforge.stores import open_store

    t0 = time.monotonic()
    if artifact_store:
        store = open_store(artifact_store, must_exist=True)
    else:
        from neuronforge.pipeline.runner import run_target

        store = open_store(f"file://{scratch / 'template-store'}")
        print("building the real artifact (builtin:tiny-llama, cpu profile) ...", flush=True)
        out = run_target(
            settings.DEFAULT_MODEL, TargetSpec.parse(settings.DEFAULT_TARGET), store, scratch / "home" / "work"
        )
        print(f"  {out.key[:12]} {out.status} in {time.monotonic() - t0:.0f} s", flush=True)
    cpu = (f for f in published_manifests(store) if f[2].profile is not None and f[2].profile.name == "cpu")
    found = next(cpu, None)
    if found is None or not hasattr(store, "root"):
        raise SystemExit(f"{store.root_uri}: no published cpu-profile artifact in a file store to clone")
    index, manifest = found[1].to_json(), found[2].as_stored()  # cloned as the store holds them
    tc = Toolchain.from_json(manifest["toolchain"])
    old = Toolchain(
        tc.backend,
        previous_version(tc.backend_version),
        tc.compiler,
        previous_version(tc.compiler_version),
        {k: previous_version(v) if v == tc.compiler_version else v for k, v in tc.packages.items()},
        tc.compiler_flags,
    )
    base = {k: v for k, v in manifest["request"]["target"].items() if v is not None}
    targets = {i: TargetSpec.parse({**base, "instance_type": i, "profile": "cpu"}) for i in INSTANCES}
    tpl = Template(store.root, index["prefix"], manifest, index, tc, old, targets)
    return tpl, time.monotonic() - t0


def model_of(i: int) -> tuple[int, str]:
    m = (i - 1) // len(INSTANCES)
    return m, f"bench-farm/llama-{m:05d}"


def revision_of(location: str) -> str:
    return hashlib.sha1(location.encode()).hexdigest()  # 40 hex: an immutable Hub revision


@dataclass
class Clone:
    i: int
    key: str
    prefix: str
    manifest: dict[str, Any]  # as stored
    index: dict[str, Any]

    @property
    def records(self) -> tuple[Any, Any]:
        """The index entry and the manifest as the readers hold them."""
        from neuronforge.records.artifact_manifest import ArtifactManifest
        from neuronforge.records.index_entry import IndexEntry

        return IndexEntry.from_json(self.index), ArtifactManifest.from_json(self.manifest)


def make_clone(tpl: Template, i: int, now: str) -> Clone:
    """Clone `i` (0: the real artifact itself) under the genuine key of its request."""
    from neuronforge.artifacts import layout
    from neuronforge.profiles.registry import compile_request
    from neuronforge.profiles.request import cache_key, cache_key_material
    from neuronforge.records.index_entry import IndexEntry
    from neuronforge.spec.source import ModelSource

    if i == 0:
        return Clone(0, tpl.manifest["cache_key"], tpl.prefix, tpl.manifest, tpl.index)
    m, location = model_of(i)
    target = tpl.targets[INSTANCES[(i - 1) % len(INSTANCES)]]
    toolchain = tpl.old_toolchain if m % OLD_TOOLCHAIN_EVERY == 5 else tpl.toolchain
    source = ModelSource("hf", location, None, revision_of(location))
    request = compile_request(source, target)
    key = cache_key(request, toolchain)
    prefix = layout.artifact_prefix(source, target, key)
    manifest = {
        **tpl.manifest,
        "cache_key": key,
        "request": cache_key_material(request, toolchain),
        "source": {"kind": source.kind, "location": source.location, "revision": source.resolved_revision},
        "target_slug": target.slug,
        "toolchain": toolchain.to_json(),
        "compiler_flags": list(toolchain.compiler_flags),
        "run_id": f"bench-farm__{i:06d}",
        "published_at": now,
    }
    manifest_key = f"{prefix}/{layout.ARTIFACT_MANIFEST}"
    index = {"schema_version": IndexEntry.SCHEMA, "cache_key": key, "manifest": manifest_key, "prefix": prefix}
    return Clone(i, key, prefix, manifest, index)


# -- a farm: one store, grown clone by clone -------------------------------------------------------------
@dataclass
class Farm:
    kind: str  # file | s3 | sim
    uri: str
    tpl: Template
    calls: Calls
    store: Any = None
    count: int = 0
    payload_clones: int = 0
    publish_costs: list[list[tuple[str, str]]] = field(default_factory=list)
    publish_seconds: list[float] = field(default_factory=list)
    tail: int = 0  # records in the farm-index tail (this bench is its only writer)
    keys: dict[int, str] = field(default_factory=dict)
    pool: ThreadPoolExecutor | None = None
    snapshot: dict[str, Any] = field(default_factory=dict)  # `simulate_to`'s records, by key

    def __post_init__(self) -> None:
        from neuronforge.stores import open_store

        self.store = open_store(self.uri)
        if self.kind != "file":
            self.pool = ThreadPoolExecutor(8)

    def has_payload(self, i: int) -> bool:
        if self.kind == "file" or i == 0:
            return True
        if self.kind == "s3":
            return i <= S3_PAYLOAD_CLONES or i == DETAIL_CLONE
        return model_of(i)[0] in CATALOG_MODELS or i == DETAIL_CLONE

    def has_manifest(self, i: int) -> bool:
        return self.kind != "sim" or self.has_payload(i)

    def _payload(self, c: Clone) -> None:
        if c.i == 0 and self.kind != "file":
            for path in self.tpl.paths:
                self.store.put_file(self.tpl.root / self.tpl.prefix / path, f"{c.prefix}/{path}")
        elif self.kind == "file":
            if c.i == 0 and self.tpl.root == self.store.root:
                return
            for path in self.tpl.paths:
                dest = self.store.root / c.prefix / path
                dest.parent.mkdir(parents=True, exist_ok=True)
                try:  # the same bytes as the real artifact's: every clone verifies
                    os.link(self.tpl.root / self.tpl.prefix / path, dest)
                except OSError:
                    shutil.copyfile(self.tpl.root / self.tpl.prefix / path, dest)
        else:
            self.store.copy_objects(self.tpl.prefix, c.prefix, self.tpl.paths)  # server-side, as publish

    def _objects(self, c: Clone, manifest: bool = True) -> None:
        """What `publish` writes before the index record: payload, manifest (last), pointer."""
        from neuronforge.artifacts import layout

        if self.has_payload(c.i):
            self._payload(c)
        elif self.kind == "s3":  # the launch files only (what the old catalog page read of every row)
            self.store.copy_objects(self.tpl.prefix, c.prefix, [p for p in self.tpl.paths if p.startswith("launch/")])
        if manifest:
            self.store.write_json(c.index["manifest"], c.manifest)
        self.store.put_if_absent(json.dumps(c.index, indent=2).encode(), layout.index_entry(c.key))

    def grow_to(self, n: int) -> None:
        """Publish clones until the farm holds `n`, each as `publish` does: its objects, then its
        record with `farm_index.append` (compaction included), counted. The objects of the clones
        up to the next compaction are written in parallel (publishers at once), so no compaction
        meets a pointer whose record is still to come (which it would read back, 2 requests each)."""
        from neuronforge.artifacts import farm_index

        now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        while self.count < n:
            batch = min(n - self.count, farm_index.COMPACT_AT - self.tail)
            clones = [make_clone(self.tpl, i, now) for i in range(self.count, self.count + batch)]
            if clones[0].i == 0:  # the real artifact first: the clones' payloads are copied from it
                self._objects(clones[0])
            rest = [c for c in clones if c.i]
            if self.pool is not None:
                list(self.pool.map(self._objects, rest))
            else:
                for c in rest:
                    self._objects(c)
            for c in clones:
                record = farm_index.published_record(*c.records)
                mark, t = self.calls.mark(), time.perf_counter()
                farm_index.append(self.store, [record])
                self.publish_seconds.append(time.perf_counter() - t)
                cost = self.calls.since(mark)
                self.publish_costs.append(cost)
                compacted = any(op == "PutObject" and k.endswith("farm-index/head.json") for op, k in cost)
                self.tail = 0 if compacted else self.tail + 1
                self.keys[c.i] = c.key
                if self.has_payload(c.i):
                    self.payload_clones += 1
            self.count += len(clones)

    def simulate_to(self, n: int) -> None:
        """N index records and pointers without publishing each: the snapshot written at once
        (`write_snapshot`, as `rebuild` writes it), pointers for every key (compaction drops a row
        whose pointer is gone), manifests and payloads only where a reader reads them. Called again
        with a larger `n`, it adds the clones from where it stopped and writes the snapshot anew."""
        from neuronforge.artifacts import farm_index
        from neuronforge.artifacts.farm_index.snapshot import HEAD, merge, write_snapshot

        now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        entries = self.snapshot
        each = self.pool.map if self.pool is not None else map
        for start in range(self.count, n, 2000):
            clones = [make_clone(self.tpl, i, now) for i in range(start, min(n, start + 2000))]
            for c in clones:
                merge(entries, [farm_index.published_record(*c.records).numbered(0)])
                self.keys[c.i] = c.key
                if self.has_payload(c.i):
                    self.payload_clones += 1
            if start == 0:
                self._objects(clones[0])
            rest = [c for c in clones if c.i]
            list(each(lambda c: self._objects(c, manifest=self.has_manifest(c.i)), rest))
            if (start + 2000) % 10000 == 0 or start + 2000 >= n:
                print(f"  simulated {min(n, start + 2000):,}/{n:,} records + pointers", flush=True)
        version = self.store.read_versioned(HEAD)[1] if self.count else None
        head = write_snapshot(self.store, entries.values(), n, version)
        assert head is not None
        self.count = n

    def publish_row(self, window: int = PUBLISH_WINDOW) -> Measured:
        """What `append` cost per publish over the last `window` publishes (compactions included)."""
        last = self.publish_costs[-window:]
        per = [len(c) for c in last]
        compactions = sum(any(op == "PutObject" and "farm-index/head.json" in k for op, k in c) for c in last)
        seconds = self.publish_seconds[-window:]
        return Measured(
            round(sum(per) / max(1, len(per)), 2),  # type: ignore[arg-type]
            sum(seconds) / max(1, len(seconds)),
            breakdown([c for cost in last for c in cost]),
            f"mean of the last {len(per)} publishes, max {max(per, default=0)}, {compactions} compaction(s)",
            runs=1,
        )


# -- the readers -------------------------------------------------------------------------------------------
@dataclass
class Measured:
    requests: int = 0
    seconds: float = 0.0
    what: str = ""
    note: str = ""
    error: str = ""
    runs: int = 0


def measure(fn: Callable[[], str], calls: Calls, repeats: int, warnings: WarningCount) -> Measured:
    times, note, got = [], "", []
    before = len(warnings.messages)
    for _ in range(max(1, repeats)):
        mark = calls.mark()
        t = time.perf_counter()
        try:
            note = fn()
        except Exception as exc:  # a reader that fails is reported in its row, not a crash
            return Measured(error=f"{type(exc).__name__}: {exc}"[:160])
        times.append(time.perf_counter() - t)
        got = calls.since(mark)
    warned = len(warnings.messages) - before
    if warned:
        note += f"; {warned} warning(s) logged"
    return Measured(len(got), statistics.median(times), breakdown(got), note, runs=len(times))


@dataclass
class Ctx:
    farm: Farm
    catalog: Any
    toolchains: dict[str, Any]
    work: Path
    model_filter: str
    instance_filter: str
    detail_key: str


def cli(argv: list[str]) -> tuple[int, str]:
    from neuronforge.interfaces.cli import main

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        rc = main(argv)
    return rc, out.getvalue()


def new_readers(ctx: Ctx) -> dict[str, Callable[[], str]]:
    from neuronforge.farm import gc, recompile
    from neuronforge.farm.rows import FarmQuery, farm_page, farm_row

    store, uri = ctx.farm.store, ctx.farm.uri

    def ls() -> str:
        rc, out = cli(["ls", uri])
        assert rc == 0, out
        return out.strip().splitlines()[-2 if "next page" in out else -1]

    def page(query: Any) -> Callable[[], str]:
        def run() -> str:
            p = farm_page(store, query, offset=0, limit=50)
            return f"{len(p.rows)} rows of {p.total if p.total is not None else '?'}"

        return run

    catalog = catalog_plugin(uri)

    def detail() -> str:  # what the artifact page's JSON link and its rows' links ask: the whole key
        if catalog is None:
            found = farm_row(store, ctx.detail_key)
            assert found is not None, ctx.detail_key
            return f"{found[0].status} (farm_row: Airflow's plugin module did not import)"
        base = catalog.pages.base  # the JSON route, called with the store the api-server keeps open
        out = catalog.pages.api.artifact(base.StoreAccess(base.open_configured), ctx.detail_key)
        return f"{out['status']}, {len(out['incomplete'] or [])} file(s) missing, {len(out['snippets'])} snippet(s)"

    def detail12() -> str:
        found = farm_row(store, ctx.detail_key[:12])
        assert found is not None, ctx.detail_key
        return f"{found[0].status}, {len(found[0].incomplete or [])} file(s) missing"

    def show() -> str:
        rc, out = cli(["show", ctx.detail_key, "--store", uri, "--json"])
        assert rc == 0, out
        return f"{len(json.loads(out)['files'])} files"

    def stale() -> str:
        states = recompile.find_stale(ctx.catalog, ctx.toolchains, store, ctx.work)
        return ", ".join(f"{n} {s}" for s, n in sorted(Counter(s.status for s in states).items()))

    def gc_plan() -> str:
        report = gc.collect(store, keep_compilers=1, dry_run=True)
        return f"would delete {len(report.deleted)}, keep {report.kept}"

    return {
        "ls": ls,
        "page": page(FarmQuery()),
        "model": page(FarmQuery(model=ctx.model_filter)),
        "instance": page(FarmQuery(instance=ctx.instance_filter)),
        "detail": detail,
        "detail12": detail12,
        "show": show,
        "stale": stale,
        "gc": gc_plan,
    }


_PLUGINS: dict[str, Any] = {}


def catalog_plugin(uri: str) -> Any:
    """The catalog plugin's module (`plugins/neuronforge_catalog.py`, loaded as Airflow loads it) serving
    the store `uri`, opened once as the api-server keeps it (its one bucket check paid here); None when
    Airflow is not installed."""
    import importlib.util

    if "module" not in _PLUGINS:
        try:
            path = ROOT / "plugins" / "neuronforge_catalog.py"
            spec = importlib.util.spec_from_file_location("neuronforge_catalog", path)
            assert spec is not None and spec.loader is not None
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
        except ImportError:
            module = None
        _PLUGINS["module"] = module
    module = _PLUGINS["module"]
    if module is not None:
        os.environ["NEURONFORGE_STORE"] = uri
        module.pages.base.open_configured()
    return module


def baseline_readers(ctx: Ctx) -> dict[str, Callable[[], str]]:
    import farm_scale_baseline as old

    store, uri = ctx.farm.store, ctx.farm.uri

    def ls() -> str:
        rows = old.ls(uri)
        return f"{len(rows)} rows, {sum(not r['complete'] for r in rows)} incomplete"

    def page() -> str:
        p = old.page(uri)
        return f"{p['rows']} rows + details"

    def model() -> str:
        return f"{len(old.api_artifacts(uri, model=ctx.model_filter))} rows"

    def detail() -> str:
        d = old.api_artifact(uri, ctx.detail_key[:12])
        assert d is not None
        return f"{d['status']}, {len(d['incomplete'] or [])} file(s) missing"

    def stale() -> str:
        states = old.find_stale(ctx.catalog, ctx.toolchains, store, ctx.work)
        return ", ".join(f"{n} {s}" for s, n in sorted(Counter(s.status for s in states).items()))

    def gc_plan() -> str:
        plan = old.gc_collect(store, keep_compilers=1)
        return f"would delete {len(plan.deleted)}, keep {plan.kept}"

    return {"ls": ls, "page": page, "model": model, "detail": detail, "stale": stale, "gc": gc_plan}


LABELS = {
    "ls": "ls, first page (50)",
    "page": "catalog page (50 rows)",
    "model": "filtered: --model (1 model)",
    "instance": "filtered: --instance (1/5)",
    "detail": "one artifact (catalog JSON)",
    "detail12": "  the same by its key12",
    "show": "show KEY --json",
    "stale": "catalog stale (20 targets)",
    "gc": "gc --dry-run",
    "publish": "publish: index requests",
}
BASELINE_OF = {  # what the baseline runs for each reader
    "ls": "old `ls` (every artifact)",
    "page": "old catalog page",
    "model": "old /api/artifacts?model=",
    "instance": "= the row above (same scan)",
    "detail": "old /api/artifacts/{key}",
    "detail12": "= the row above",
    "show": "-",
    "stale": "old find_stale",
    "gc": "old gc plan",
    "publish": "none (no index)",
}


def write_catalog(
    path: Path, tpl: Template, models: Iterable[int] = CATALOG_MODELS, instances: tuple[str, ...] = INSTANCES
) -> Any:
    """A catalog of the clones' `models`, each with a target per instance type of `instances`."""
    from neuronforge.farm.catalog import load_catalog

    lines = ["models:"]
    for m in models:
        location = f"bench-farm/llama-{m:05d}"
        lines.append(f"  - source: {location}@{revision_of(location)}")
        lines.append("    targets:")
        for inst in instances:
            t = {k: v for k, v in tpl.manifest["request"]["target"].items() if v is not None}
            lines.append(f"      - {json.dumps({**t, 'instance_type': inst, 'profile': 'cpu'})}")
    path.write_text("\n".join(lines) + "\n")
    catalog = load_catalog(path)
    assert catalog.ok, catalog.problems
    return catalog


# -- printing --------------------------------------------------------------------------------------------------
def fmt_s(s: float) -> str:
    return f"{s:.3f}" if s < 10 else f"{s:.1f}"


def ratio(base: float, new: float) -> str:
    if base <= 0 or new <= 0:
        return "—"
    r = base / new
    return f"{r:,.0f}x" if r >= 10 else f"{r:.1f}x"


def print_table(title: str, unit: str, rows: dict[str, tuple[Measured, Measured | None]], model: bool) -> None:
    print(f"\n== {title}")
    m_head = "@20ms" if model else ""
    print(
        f"{'reader':<29}| {'NEW ' + unit:>9} {'s/view':>8} {m_head:>7} | {'BASELINE ' + unit:>14} {'s/view':>8} "
        f"{m_head:>8} | {'x' + unit:>8} {'x s':>7} | new reads; notes"
    )
    for name, (new, base) in rows.items():
        if new.error:
            print(f"{LABELS[name]:<29}| ERROR {new.error}")
            continue
        nm = f"{new.requests * MS_PER_REQUEST:.2f}s" if model else ""
        if base is None or base.error or base.runs == 0:
            bcol = f"{(base.error[:36] if base and base.error else BASELINE_OF[name]):>32}"
            rr, rs = "—", "—"
        else:
            bm = f"{base.requests * MS_PER_REQUEST:.1f}s" if model else ""
            bcol = f"{base.requests:>14,} {fmt_s(base.seconds):>8} {bm:>8}"
            rr, rs = ratio(base.requests, new.requests), ratio(base.seconds, new.seconds)
        req = f"{new.requests:.2f}" if isinstance(new.requests, float) else f"{new.requests:,}"
        print(
            f"{LABELS[name]:<29}| {req:>9} {fmt_s(new.seconds):>8} {nm:>7} | {bcol} | {rr:>8} {rs:>7} | "
            f"{new.what}; {new.note}"
        )
    notes = [f"{LABELS[n]}: baseline {b.note}" for n, (_, b) in rows.items() if b and b.note and b.runs]
    for n in notes:
        print(f"    {n}")


# -- S3 ----------------------------------------------------------------------------------------------------------
def start_moto() -> tuple[subprocess.Popen, str]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    code = (
        "import time\nfrom moto.server import ThreadedMotoServer\n"
        f"s = ThreadedMotoServer(ip_address='127.0.0.1', port={port}, verbose=False)\ns.start()\n"
        "while True:\n    time.sleep(3600)\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for _ in range(300):
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return proc, f"http://127.0.0.1:{port}"
        time.sleep(0.05)
    proc.kill()
    raise SystemExit("moto's server did not start")


def vm_hwm_mib(pid: int) -> float:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def disk_usage_mib(path: Path) -> float:
    seen, total = set(), 0
    for p in path.rglob("*"):
        try:
            st = p.lstat()
        except OSError:
            continue
        if (st.st_dev, st.st_ino) not in seen:
            seen.add((st.st_dev, st.st_ino))
            total += st.st_blocks * 512
    return total / 2**20


# -- the run ------------------------------------------------------------------------------------------------------
def isolated(folder: str | None, prefix: str) -> Path:
    """The run's scratch folder (`folder`, or a new temporary one) and an environment that reaches no real
    store, Hub or AWS account: NEURONFORGE_HOME under it, the Hub offline, the bench's own S3 credentials."""
    scratch = Path(folder or tempfile.mkdtemp(prefix=prefix)).resolve()
    scratch.mkdir(parents=True, exist_ok=True)
    os.environ["NEURONFORGE_HOME"] = str(scratch / "home")
    os.environ["HF_HUB_OFFLINE"] = "1"
    os.environ.pop("NEURONFORGE_STORE", None)
    for var in ("AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_ENDPOINT_URL_S3"):
        os.environ.pop(var, None)
    os.environ.update(AWS_ACCESS_KEY_ID="bench", AWS_SECRET_ACCESS_KEY="bench", AWS_DEFAULT_REGION="us-east-1")
    return scratch


def tear_down(moto: subprocess.Popen | None, scratch: Path, keep: bool) -> None:
    """Stop moto's server (the child this run started) and remove the scratch folder unless it is kept."""
    if moto is not None:
        moto.kill()
        moto.wait()
    if not keep:
        shutil.rmtree(scratch, ignore_errors=True)


Rows = dict[str, tuple["Measured", "Measured | None"]]


@dataclass
class Setup:
    args: argparse.Namespace
    tpl: Template
    catalog: Any
    toolchains: dict[str, Any]
    scratch: Path
    warnings: WarningCount
    phases: dict[str, float] = field(default_factory=dict)

    @property
    def work(self) -> Path:
        return self.scratch / "home" / "work"

    @property
    def targets(self) -> int:
        return len(self.catalog.entries) * len(INSTANCES)


def measure_size(farm: Farm, size: int, setup: Setup, baseline: bool = True) -> Rows:
    """Every reader on the farm as it is now: the new one (median of --repeats), then its baseline."""
    models = (size - 1) // len(INSTANCES)
    ctx = Ctx(
        farm,
        setup.catalog,
        setup.toolchains,
        setup.work,
        model_filter=f"llama-{models // 2:05d}",
        instance_filter="trn1.2xlarge",
        detail_key=farm.keys[min(DETAIL_CLONE, size - 1)],
    )
    new = new_readers(ctx)
    if farm.kind == "sim":
        # gc confirms the manifest of every artifact it would delete: the simulation writes none
        del new["gc"]
    old = baseline_readers(ctx) if baseline else {}
    # The old /api/artifacts?model= and /api/artifacts/{key} are the same scan (old `farm_rows`);
    # on S3 above --full-baselines-upto it is measured once, through the detail endpoint.
    derive = farm.kind == "s3" and size > setup.args.full_baselines_upto and "detail" in old
    if derive:
        del old["model"]
    rows: Rows = {}
    for name, fn in new.items():
        n = measure(fn, farm.calls, setup.args.repeats, setup.warnings)
        b = measure(old[name], farm.calls, 1, setup.warnings) if name in old else None
        rows[name] = (n, b)
    if derive and rows["detail"][1] is not None and not rows["detail"][1].error:
        d = rows["detail"][1]
        note = "derived: the detail endpoint's scan (the same old farm_rows) without its 2 reads"
        rows["model"] = (rows["model"][0], Measured(d.requests - 2, d.seconds, note=note, runs=1))
    rows["publish"] = (farm.publish_row(), None)
    return rows


def verify_clones(farm: Farm, setup: Setup) -> bool:
    """`neuronforge verify` (every file re-hashed, the profile's preflight) on clones; on the file
    store also `verify --store` (the index against every manifest)."""
    import random

    from neuronforge.artifacts import farm_index

    ok = True
    if farm.kind == "file":
        problems = farm_index.check(farm.store)
        print(f"  verify --store (index against every manifest): {'ok' if not problems else problems[:3]}")
        ok = not problems
        clones = sorted(random.Random(0).sample(range(1, farm.count), 2))
    else:
        clones = [min(DETAIL_CLONE, farm.count - 1)]
    for i in clones:
        uri = farm.store.uri(f"{make_clone(setup.tpl, i, '').prefix}/manifest.json")
        _, out = cli(["verify", uri, "--work-dir", str(setup.scratch / "verify"), "--json"])
        res = json.loads(out)
        where = "on S3 (a payload clone)" if farm.kind == "s3" else f"(...{uri[-56:]})"
        print(f"  verify clone {i} {where}: ok={res['ok']} {res['problems'][:2]}")
        ok &= bool(res["ok"])
    return ok


def run_store(kind: str, sizes: list[int], setup: Setup) -> tuple[dict[int, Rows], bool]:
    calls = Calls()
    if kind == "file":
        count_file_store_calls(calls)
        farm = Farm("file", f"file://{setup.scratch / 'farm-store'}", setup.tpl, calls)
    else:
        farm = Farm("s3", "s3://bench-farm/store", setup.tpl, calls)
        farm.store.client.meta.events.register("before-send.s3", calls)
    results: dict[int, Rows] = {}
    for size in sizes:
        t = time.monotonic()
        farm.grow_to(size)
        setup.phases[f"{kind} grow to {size}"] = time.monotonic() - t
        t = time.monotonic()
        results[size] = measure_size(farm, size, setup)
        setup.phases[f"{kind} readers at {size}"] = time.monotonic() - t
        where = "S3 (moto on 127.0.0.1)" if kind == "s3" else "file store (local disk)"
        what = f"{farm.payload_clones} with payload" if kind == "s3" else "all with payload, hard links"
        unit = "req" if kind == "s3" else "calls"
        print_table(f"{where}: {size:,} published artifacts ({what})", unit, results[size], model=kind == "s3")
    ok = verify_clones(farm, setup)
    if farm.pool:
        farm.pool.shutdown()
    return results, ok


def run_simulation(n: int, setup: Setup, scale_from: tuple[int, Rows] | None) -> Rows:
    calls = Calls()
    farm = Farm("sim", "s3://bench-sim/store", setup.tpl, calls)
    farm.store.client.meta.events.register("before-send.s3", calls)
    t = time.monotonic()
    farm.simulate_to(n)
    farm.grow_to(n + SIM_TAIL)
    setup.phases[f"sim write {n}"] = time.monotonic() - t
    t = time.monotonic()
    rows = measure_size(farm, farm.count, setup, baseline=False)
    farm.grow_to(farm.count + PUBLISH_WINDOW)
    rows["publish"] = (farm.publish_row(), None)
    setup.phases[f"sim readers at {n}"] = time.monotonic() - t
    if scale_from is not None:  # the baseline's requests are linear in the farm: scaled, not measured
        size, base = scale_from
        for name, (new, b) in rows.items():
            src = base.get(name, (None, None))[1]
            if b is None and src is not None and src.runs and not src.error:
                factor = farm.count / size
                rows[name] = (new, Measured(round(src.requests * factor), src.seconds * factor, runs=1))
    basis = f"BASELINE = the {scale_from[0]:,} run's figures scaled linearly (not measured)" if scale_from else ""
    print_table(
        f"S3, simulated {n:,} index records (+{SIM_TAIL} in the tail) and their pointers; manifests and payloads "
        f"only for the catalog's {setup.targets} clones and clone {DETAIL_CLONE}; gc not run (no manifest to "
        f"confirm); {basis}",
        "req",
        rows,
        model=True,
    )
    farm.pool.shutdown()
    return rows


def goal_lines(rows: Rows, factor: float, targets: int) -> list[tuple[bool, str]]:
    def get(name: str) -> Measured:
        return rows[name][0]

    out = []
    page = get("page")
    limit = GOALS["page"] * factor
    model_s = page.requests * MS_PER_REQUEST
    out.append(
        (
            not page.error and page.requests <= limit and model_s <= GOALS["page_model_s"] * factor,
            f"catalog page view: {page.requests} requests (goal <= {limit:g}), {model_s:.2f} s in the 20 ms model "
            f"(goal <= {GOALS['page_model_s'] * factor:g} s)",
        )
    )
    for name, what in (("detail", "one artifact, the catalog's JSON endpoint"), ("show", "one artifact, show --json")):
        d = get(name)
        out.append(
            (
                not d.error and d.requests <= GOALS["detail"] * factor,
                f"{what}: {d.requests} requests (goal <= {GOALS['detail'] * factor:g}; {d.what})",
            )
        )
    s = get("stale")
    limit = (GOALS["stale_per_target"] * targets + GOALS["stale_constant"]) * factor
    out.append(
        (
            not s.error and s.requests <= limit,
            f"catalog stale, {targets} targets: {s.requests} (goal <= ({GOALS['stale_per_target']} x {targets} + "
            f"{GOALS['stale_constant']})" + (f" x {factor:g}" if factor != 1 else "") + f" = {limit:g}; {s.what})",
        )
    )
    ls = get("ls")
    out.append(
        (
            not ls.error and ls.requests <= GOALS["ls"] * factor,
            f"ls first page: {ls.requests} (goal <= {GOALS['ls'] * factor:g})",
        )
    )
    p = get("publish")
    out.append(
        (
            float(p.requests) <= GOAL_PUBLISH * factor,
            f"a publish adds {p.requests} requests for the index, amortised "
            f"(goal <= {GOAL_PUBLISH * factor:g}; {p.note})",
        )
    )
    return out


def constant_line(kind: str, results: dict[int, Rows], sim: Rows | None = None) -> tuple[bool, str]:
    """`catalog stale` for the same catalog costs the same at every farm size: the requests at each size
    (and the simulated one) no more than at the smallest."""
    got = {f"{n:,}": results[n]["stale"][0] for n in sorted(results)}
    if sim is not None:
        got["the simulated farm"] = sim["stale"][0]
    counts = {n: m.requests for n, m in got.items() if not m.error}
    first = next(iter(counts.values()), None)
    ok = len(counts) == len(got) and all(c <= first for c in counts.values())  # type: ignore[operator]
    unit = "requests" if kind == "s3" else "store calls"
    shown = ", ".join(f"{c} at {n}" for n, c in counts.items())
    return ok, f"catalog stale, the same catalog, constant in N ({kind}): {shown} {unit}"


def file_goal_lines(results: dict[int, Rows]) -> list[tuple[bool, str]]:
    """The file store at the largest size: a page and one artifact within their seconds, and no slower
    than at the size before it beyond noise (2x, or under a fifth of the goal: a shared machine). A view
    reads at most one or two index pages of up to 2 000 rows, so its cost stops growing once they are full."""
    sizes = sorted(results)
    big, before = sizes[-1], sizes[-2] if len(sizes) > 1 else sizes[-1]
    out = []
    for name, what in (("page", "catalog page (50 rows)"), ("ls", "ls first page (50)"), ("detail", "one artifact")):
        goal = FILE_GOALS_S[name]
        m, prev = results[big][name][0], results[before][name][0]
        flat = m.seconds <= max(2 * prev.seconds, goal / 5)
        ok = not m.error and m.seconds <= goal and flat
        out.append(
            (
                ok,
                f"file store, {what}: {m.seconds:.3f} s at {big:,} (goal <= {goal:g} s); {prev.seconds:.3f} s at "
                f"{before:,} ({'independent of N' if flat else 'GROWS with N'})",
            )
        )
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="100,1000,5000", help="published artifacts to grow the farm to, in order")
    ap.add_argument("--stores", default="file,s3")
    ap.add_argument("--simulate", type=int, default=None, help="S3 farm of N index records (default 50000; 0: off)")
    ap.add_argument("--repeats", type=int, default=3, help="runs of each new reader (the median is shown)")
    ap.add_argument("--quick", action="store_true", help="sizes 40, one repeat, no simulation (the smoke test)")
    ap.add_argument("--artifact-store", help="a file store holding a published artifact to clone (no build)")
    ap.add_argument(
        "--full-baselines-upto",
        type=int,
        default=1000,
        help="on S3 farms larger than this, the filtered view's baseline is derived from the detail's (same scan)",
    )
    ap.add_argument("--dir", help="scratch folder (default: a temporary one, removed at the end)")
    args = ap.parse_args()
    if args.quick:
        args.sizes, args.repeats = "40", 1
        args.simulate = 0 if args.simulate is None else args.simulate
    simulate = 50000 if args.simulate is None else args.simulate
    sizes = [int(s) for s in args.sizes.split(",") if s.strip()]
    if min(sizes) <= len(CATALOG_MODELS) * len(INSTANCES):
        raise SystemExit(f"--sizes: the farm needs more than {len(CATALOG_MODELS) * len(INSTANCES)} artifacts")
    stores = [s.strip() for s in args.stores.split(",") if s.strip()]

    t_start = time.monotonic()
    scratch = isolated(args.dir, "nf-farm-scale-")
    warnings = WarningCount()
    logging.basicConfig(level=logging.WARNING, handlers=[warnings])
    logging.getLogger("urllib3").setLevel(logging.ERROR)  # "connection pool is full": copies in parallel

    moto = None
    failed = False
    try:
        tpl, built = real_artifact(args.artifact_store, scratch)
        catalog = write_catalog(scratch / "catalog.yaml", tpl)
        from neuronforge.farm import recompile

        toolchains = {p.ref: tpl.toolchain for p in recompile.profiles_of(catalog)}
        setup = Setup(args, tpl, catalog, toolchains, scratch, warnings, {"real build": built})
        if "s3" in stores or simulate:
            moto, endpoint = start_moto()
            os.environ["AWS_ENDPOINT_URL"] = endpoint
            import boto3

            for bucket in ("bench-farm", "bench-sim"):
                boto3.client("s3", endpoint_url=endpoint).create_bucket(Bucket=bucket)
        files = tpl.manifest["files"]
        print(
            f"real artifact {tpl.manifest['cache_key'][:12]}: {len(files)} files, "
            f"{sum(f['size'] for f in files) / 2**20:.1f} MiB, profile {tpl.manifest['profile']['ref']}, "
            f"{tpl.toolchain.compiler} {tpl.toolchain.compiler_version} (clones of 10% of the models: "
            f"{tpl.old_toolchain.compiler_version})"
        )
        print(
            "clones: bench-farm/llama-NNNNN@<sha1>, 5 instance types each, keys from cache_key(CompileRequest, "
            "toolchain), manifest + index/<key>.json + farm-index record as publish writes them\n"
            "  file store: every clone hard-links the real artifact's 13 payload files (verify passes on any clone)\n"
            f"  S3: the real artifact and clones 1..{S3_PAYLOAD_CLONES} (+ clone {DETAIL_CLONE}) hold the whole "
            "payload (server-side copies, as publish); every other clone holds its manifest.json, index pointer and "
            "launch/ files only (a folder listing costs one request either way; readers that check files call "
            "those incomplete)"
        )
        results: dict[str, dict[int, Rows]] = {}
        for kind in stores:
            results[kind], ok = run_store(kind, sizes, setup)
            failed |= not ok

        big = max(sizes)
        at = "" if big >= 5000 else " (the default run checks them at 5,000)"
        if "s3" in stores:
            print(f"\nGoals at {big:,} on S3{at}")
            for ok, line in [*goal_lines(results["s3"][big], 1.0, setup.targets), constant_line("s3", results["s3"])]:
                print(f"  {'met    ' if ok else 'NOT MET'} {line}")
                failed |= not ok and not args.quick
        if "file" in stores:
            print(f"\nGoals at {big:,} on the file store{at}")
            for ok, line in [*file_goal_lines(results["file"]), constant_line("file", results["file"])]:
                print(f"  {'met    ' if ok else 'NOT MET'} {line}")
                failed |= not ok and not args.quick

        if simulate:
            scale_from = (big, results["s3"][big]) if "s3" in stores else None
            rows = run_simulation(simulate, setup, scale_from)
            print(f"\nSimulated {simulate:,} on S3: the new readers within 2x of the goals")
            lines = goal_lines(rows, 2.0, setup.targets)
            if "s3" in stores:
                lines.append(constant_line("s3", results["s3"], rows))
            for ok, line in lines:
                print(f"  {'met    ' if ok else 'NOT MET'} {line}")
                failed |= not ok

        print("\nphases: " + ", ".join(f"{k} {v:.0f} s" for k, v in setup.phases.items()))
        if warnings.messages:
            distinct = sorted(set(warnings.messages))
            print(f"warnings logged: {len(warnings.messages)} ({len(distinct)} distinct), e.g. {distinct[:2]}")
        rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        moto_mib = vm_hwm_mib(moto.pid) if moto else 0.0
        print(
            f"peak RSS: bench {rss:,.0f} MiB, moto server {moto_mib:,.0f} MiB; "
            f"disk: {disk_usage_mib(scratch):,.0f} MiB under {scratch}; wall {time.monotonic() - t_start:.0f} s"
        )
    finally:
        tear_down(moto, scratch, keep=bool(args.dir))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
