#!/usr/bin/env python
"""What a Neuron SDK upgrade costs: today's rebuild-everything beside the decisions of issue 52
(`farm.upgrade_decisions`: re-smoke, rebuild, ...), measured in one run. A benchmark, not a test: it
prints numbers, ratios against a baseline measured in the same run, and PASS/FAIL against the goals.

(1) Per release kind, a catalog of `--k` targets (the embedded tiny Llama, `builtin:tiny-llama`, cpu
profile, as `make demo` builds it; each target its own sequence length, so each compiles its own
graphs). Two releases are fed as a user feeds them: `releases sync --manifest` then `releases accept`
— tests/data/release-manifests/adds-2.33.9.json (2.33.9: only aws-neuronx-runtime-lib changed) and a
copy of it that adds 2.33.10 with another neuronx-cc. Measured:
- baseline, today's rebuild-everything: every target built into an empty store (compile + smoke +
  publish; the cache key of every target changes with the release, so nothing is found);
- runtime-only patch (2.33.9): what `recompile --sdk 2.33.9` runs for a `re-smoke` row
  (`farm.attest.attest_build`, with the store's accepted releases in effect): the published build
  downloaded, checked and smoke-tested, the attestation recorded — no compile;
- compiler changed (2.33.10): every key is new, so `recompile --sdk 2.33.10` rebuilds every target
  (run here over a store without them: compile + smoke + publish, through the command).
The cpu profile reads no Neuron SDK: its builds are re-smoked at any release (attest's rule for SDK
`none`), and a compiler change reaches its keys through its own toolchain; the decision for each
Neuron serving line at each fed release is computed from the release table and timed, and printed with
what was not measured here (a Neuron compile, a smoke on a Neuron host: no Neuron SDK on this machine).
Compile seconds and smoke ("Neuron-host", here the smoke test) seconds are the builds' own stage
seconds (their manifests' `hosts.stages`) and, for re-smoke, the attest's timed download and smoke.

(1b) What a `re-verify` costs (a library the consumer's key may hash changed, the compiler did not: SDK
2.33.1 for `vllm-neuron-native` builds made on 2.33.0), on the FAKE vLLM Neuron plugin of tests/fakes (its
SDK images' interpreters in NEURONFORGE_TOOLCHAIN_PYTHON_2_33_0 / _2_33_1, 2 fake devices): `--k` targets
of a tiny Llama (trn2.3xlarge, tp 4, batch 2, fp32, a sequence length each) built on 2.33.0 into a file
store — compile + smoke + publish, the baseline — then `farm.attest.attest_build(store, key, "2.33.1")`
for each, what `recompile --sdk 2.33.1` runs for a `re-verify` row: the consumer's re-trace in 2.33.1's
interpreter against the published cache, compiling forbidden, then (every key found) the smoke test there.
Under both readings of the unverified fact (FAKE_LNL_VERSION_HASHED): the plugin's key does not hash
libtorch-neuronx-lite's version (every key found: attested, 0 compiles) or does (the first key missed:
not attested, the key named, 0 compiles; the rebuild needs a profile version for 2.33.1 first).

(2) Deciding at farm scale: a catalog of `--models` models x 4 targets against a store holding their
builds (cloned from one real build under genuine cache keys: `farm_scale.make_clone`) and as many other
models interleaved with them, then the same store grown `--grow` times with further models (the
baseline: deciding must not grow with the store). `recompile CATALOG --sdk 2.33.9 --dry-run --json`
runs in this process; its requests are counted as farm_scale.py counts them (S3: botocore's
`before-send`, every attempt; the file store: calls of its primitives), on a file store and on S3 (moto
on 127.0.0.1 in a child process, `--s3-models` models: moto answers one request at a time and walks
every key of its bucket for each listing, so its seconds grow with the bucket where the requests do not).

    .venv/bin/python bench/upgrade_cost.py [--k 4] [--models 2000] [--s3-models 500] [--grow 4] [--stores file,s3]
    .venv/bin/python bench/upgrade_cost.py --quick     # k 1, 20 models: a few minutes, for the test
    .venv/bin/python bench/upgrade_cost.py --k 2 --stores ''   # parts 1 and 1b only
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import hashlib
import json
import logging
import os
import sys
import time
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from bench.farm_scale import (  # noqa: E402  (the farm's clones, its counting and moto's server)
    INSTANCES,
    Calls,
    Farm,
    Template,
    breakdown,
    cli,
    count_file_store_calls,
    isolated,
    model_of,
    real_artifact,
    start_moto,
    tear_down,
    write_catalog,
)

FEED = ROOT / "tests" / "data" / "release-manifests" / "adds-2.33.9.json"
RUNTIME_ONLY, COMPILER_CHANGED = "2.33.9", "2.33.10"
NEW_COMPILER = "2.28.9999.0"  # 2.33.10's neuronx-cc (2.33.9's: 2.28.7631.0)
TARGETS_PER_MODEL = 4  # the catalog's targets per model: the first 4 of farm_scale's 5 instance types
STAND_IN_BYTES = 64
COMPILE_STAGE, SMOKE_STAGE = "compile_graphs", "smoke"
PER_TARGET_GOAL = 4  # requests per catalog target (pointer, manifest, folder listing; + the index)


# -- part 1: release kinds on a small catalog -----------------------------------------------------------
@dataclass
class Cost:
    """What one way of taking a release ran for the catalog, in seconds."""

    what: str
    targets: int = 0
    compile_s: float = 0.0
    smoke_s: float = 0.0  # the smoke test: a Neuron host's work
    other_s: float = 0.0  # prepare, publish; attest's download and check
    wall_s: float = 0.0
    compiles: int = 0  # compile stage runs (the backend's compile calls: CompileCounter)
    graphs: int = 0  # graphs compiled (compiler invocations)
    notes: list[str] = field(default_factory=list)


class CompileCounter:
    """Counts the compile calls of the cpu backend and the vLLM Neuron plugin's (the fake SDK's, part 1b)
    and the graphs they compiled, in this process."""

    def __init__(self) -> None:
        from neuronforge.compilation.backends.cpu import CpuBackend
        from neuronforge.compilation.backends.vllm_native import VllmNativeBackend

        self.calls = 0
        self.graphs = 0
        for backend_class in (CpuBackend, VllmNativeBackend):
            self._count(backend_class)

    def _count(self, backend_class: Any) -> None:
        original = backend_class.compile

        def counted(backend: Any, job: Any) -> Any:
            self.calls += 1
            result = original(backend, job)
            self.graphs += int(getattr(result, "compiler_invocations", 0) or 0)
            return result

        backend_class.compile = counted

    def mark(self) -> tuple[int, int]:
        return self.calls, self.graphs


@contextlib.contextmanager
def timed(into: dict[str, float], name: str, module: Any, attr: str) -> Iterator[None]:
    """`module.attr` timed into `into[name]` (summed) while the block runs."""
    original = getattr(module, attr)

    def wrapper(*a: Any, **kw: Any) -> Any:
        t = time.perf_counter()
        try:
            return original(*a, **kw)
        finally:
            into[name] = into.get(name, 0.0) + time.perf_counter() - t

    setattr(module, attr, wrapper)
    try:
        yield
    finally:
        setattr(module, attr, original)


def catalog_targets(k: int) -> list[dict[str, Any]]:
    """`k` cpu targets of the demo's shape, each its own sequence length (its own graphs)."""
    from neuronforge.common import settings

    return [{**settings.DEFAULT_TARGET, "sequence_length": 64 + 32 * i, "profile": "cpu"} for i in range(k)]


def stage_seconds(store: Any, key: str) -> tuple[float, float, float]:
    """(compile, smoke, other) seconds of the published build `key`, from its manifest's stage records."""
    from neuronforge.artifacts.published import lookup

    hit = lookup(store, key)
    assert hit is not None, key
    by = Counter[str]()
    for s in hit.manifest.hosts.stages or []:
        by[s.stage] += s.seconds or 0.0
    compile_s, smoke_s = by.pop(COMPILE_STAGE, 0.0), by.pop(SMOKE_STAGE, 0.0)
    return compile_s, smoke_s, sum(by.values())


def add_build(cost: Cost, store: Any, key: str) -> None:
    c, s, o = stage_seconds(store, key)
    cost.compile_s += c
    cost.smoke_s += s
    cost.other_s += o
    cost.targets += 1


def rebuild_everything(
    store: Any,
    targets: list[dict[str, Any]],
    work: Path,
    counter: CompileCounter,
    model: str = "",
    what: str = "today: rebuild every target",
) -> Cost:
    """Today's way: every target built (`run_target`, what `run` and a rebuild run), none found; of
    `model` (default: the embedded tiny Llama)."""
    from neuronforge.common import settings
    from neuronforge.pipeline.runner import run_target
    from neuronforge.profiles.registry import parse_target

    cost = Cost(what)
    calls, graphs = counter.mark()
    t0 = time.perf_counter()
    for t in targets:
        out = run_target(model or settings.DEFAULT_MODEL, parse_target(t), store, work)
        assert out.status == "published", out.status
        add_build(cost, store, out.key)
    cost.wall_s = time.perf_counter() - t0
    cost.compiles, cost.graphs = counter.calls - calls, counter.graphs - graphs
    return cost


def feed(store_uri: str, manifests: list[Path], releases: tuple[str, ...]) -> list[str]:
    """`releases sync --manifest` each manifest, then `releases accept` each release: as a user feeds them.
    Returns what the syncs said of `releases` (each one's line and its package changes)."""
    said: list[str] = []
    for m in manifests:
        rc, out = cli(["releases", "sync", "--manifest", str(m), "--store", store_uri])
        assert rc == 0, out
        mine = False
        for line in out.splitlines():
            if line.startswith("Neuron "):
                mine = line.split()[1].rstrip(":") in releases
            if mine and line.startswith(("Neuron ", "  ~ ", "  + ", "  - ")):
                said.append(line)
    for r in releases:
        rc, out = cli(["releases", "accept", r, "--store", store_uri, "--by", "bench"])
        assert rc == 0, out
    return said


def compiler_changed_manifest(path: Path) -> Path:
    """adds-2.33.9.json plus 2.33.10: 2.33.9's packages with another neuronx-cc."""
    data = json.loads(FEED.read_text())
    base = next(r for r in data["neuron_releases"] if r["neuron_version"] == RUNTIME_ONLY)
    new = copy.deepcopy(base)
    new["neuron_version"] = COMPILER_CHANGED
    for p in new["packages"]:
        if p["name"] == "neuronx-cc":
            p["version"] = NEW_COMPILER
    data["neuron_releases"].insert(0, new)
    data["manifest_version"] = COMPILER_CHANGED
    for latest in data.get("latest_release", []):
        latest["version"] = COMPILER_CHANGED
    path.write_text(json.dumps(data, indent=1))
    return path


@dataclass
class LineDecision:
    line: str
    base: str
    release: str
    entry: str  # "as fed" | "reviewed"
    decision: str
    deciding: tuple[str, ...]
    seconds: float


def neuron_decisions(store: Any, release: str) -> tuple[list[LineDecision], list[str]]:
    """Each serving line's decision at `release` for a build on the release before it, from the release
    table with the store's accepted releases (what `recompile --sdk R` decides by), timed: the entry as
    fed, and as `releases accept R --same-as <the release before>` completes it — each package the
    proposal marks `needs review` (the manifest does not carry it: vLLM) taken from the release before,
    which an absent package otherwise counts as changed. Returns the decisions and the packages the review filled in."""
    from neuronforge.artifacts import release_entries
    from neuronforge.farm import upgrade_decisions
    from neuronforge.farm.release_feed import known_table, settle_same_as
    from neuronforge.profiles.lifecycle import release_key

    table = known_table(store)
    versions = sorted((e.version for e in table.entries), key=release_key)
    base = table.entry(versions[versions.index(release) - 1])
    fed = table.entry(release)
    assert base is not None and fed is not None
    held = release_entries.get(store, release)
    # What `releases accept R --same-as <the release before>` records (`release_feed.settle_same_as`).
    reviewed = settle_same_as(held[0], table, base.version, "bench", "")["entry"] if held else fed
    filled = tuple(p for p in reviewed.packages if fed.package(p.name) is None)
    out = []
    for name, entry in (("as fed", fed), ("reviewed", reviewed)):
        for line, facts in table.lines.items():
            if not facts.reads:
                continue
            t = time.perf_counter()
            d = upgrade_decisions.decide_packages(base, entry, facts.reads)
            seconds = time.perf_counter() - t
            out.append(LineDecision(line, base.version, release, name, d.decision, d.deciding, seconds))
    return out, [f"{p.name} {p.full}" for p in filled]


def re_smoke(store: Any, keys: list[str], release: str, work: Path, counter: CompileCounter) -> Cost:
    """What `recompile --sdk R` runs for each `re-smoke` row (`_attest_kept`: `attest_build`, the store's
    accepted releases in effect): download + check + smoke of the published build, attestation recorded."""
    from neuronforge.farm import attest
    from neuronforge.farm.release_feed import known_table
    from neuronforge.profiles.sdk_releases import in_effect

    cost = Cost(f"{release} runtime-only: re-smoke (attest)")
    calls, graphs = counter.mark()
    spent: dict[str, float] = {}
    t0 = time.perf_counter()
    with (
        in_effect(known_table(store)),
        timed(spent, "download", attest, "download"),
        timed(spent, "smoke", attest, "smoke_published"),
    ):
        for key in keys:
            done = attest.attest_build(store, key, release, work)
            assert done.attestation is not None and done.attestation.passed, done.line
            assert done.decision == "re-smoke", done.decision
            cost.targets += 1
    cost.wall_s = time.perf_counter() - t0
    cost.smoke_s = spent.get("smoke", 0.0)
    cost.other_s = cost.wall_s - cost.smoke_s  # the download and check, the attestation's write
    cost.compiles, cost.graphs = counter.calls - calls, counter.graphs - graphs
    cost.notes.append(f"download + check {spent.get('download', 0.0):.1f} s")
    return cost


def rebuild_by_recompile(store: Any, catalog: Path, release: str, counter: CompileCounter) -> Cost:
    """`recompile CATALOG --sdk R` (not a dry run) over a store without the catalog's keys: each row stale,
    rebuilt by the command."""
    cost = Cost(f"{release} compiler changed: rebuild")
    calls, graphs = counter.mark()
    t0 = time.perf_counter()
    rc, out = cli(["recompile", str(catalog), "--sdk", release, "--store", store.root_uri, "--json"])
    cost.wall_s = time.perf_counter() - t0
    report = json.loads(out)
    assert rc == 0, out[-2000:]
    for row in report["targets"]:
        assert row["outcome"] == "rebuilt", row
        add_build(cost, store, row["key"])
    cost.compiles, cost.graphs = counter.calls - calls, counter.graphs - graphs
    decided = Counter(row["upgrade"]["decision"] for row in report["targets"])
    cost.notes.append("decided: " + ", ".join(f"{n} {d}" for d, n in decided.items()))
    return cost


def ratio(new: float, old: float) -> str:
    return f"{new / old:.2f}" if old > 0 else "—"


def print_costs(old: Cost, news: list[Cost]) -> None:
    print(
        f"\n{'':<40}| {'targets':>7} {'compiles':>8} {'graphs':>6} | {'compile s':>9} {'smoke s':>8} "
        f"{'other s':>8} {'wall s':>8} | {'new/old compile':>15} {'smoke':>6} {'wall':>6}"
    )
    for c in (old, *news):
        r = "" if c is old else f"{ratio(c.compile_s, old.compile_s):>15} {ratio(c.smoke_s, old.smoke_s):>6} "
        r += "" if c is old else f"{ratio(c.wall_s, old.wall_s):>6}"
        print(
            f"{c.what:<40}| {c.targets:>7} {c.compiles:>8} {c.graphs:>6} | {c.compile_s:>9.1f} {c.smoke_s:>8.1f} "
            f"{c.other_s:>8.1f} {c.wall_s:>8.1f} | {r}" + (f"  ({'; '.join(c.notes)})" if c.notes else "")
        )
    print(
        "compile s: the compile stage, a CPU compile host's work; smoke s: the smoke test, the Neuron host's work "
        "(Neuron-host seconds; here on this CPU); other s: prepare and publish, or attest's download and check"
    )


def release_kinds(
    args: argparse.Namespace, scratch: Path, counter: CompileCounter
) -> tuple[list[tuple[bool, str]], str]:
    """Part (1); returns its goal lines and the file store holding the baseline's builds."""
    from neuronforge.stores import open_store

    targets = catalog_targets(args.k)
    manifests = [FEED, compiler_changed_manifest(scratch / "adds-2.33.10.json")]
    print(f"\n== (1) release kinds, a catalog of {args.k} target(s): builtin:tiny-llama, cpu profile")
    print("targets: " + "; ".join(f"seq {t['sequence_length']}" for t in targets) + " (each its own graphs)")

    from neuronforge.spec.builtin import demo_model

    demo_model()  # generated once, torch and transformers imported: no build below pays for either
    old_store = open_store(f"file://{scratch / 'today'}")
    print("baseline (today): every target built into an empty store ...", flush=True)
    old = rebuild_everything(old_store, targets, scratch / "today-home" / "work", counter)
    # Each release fed into the store that takes it: the re-smoke attests the builds of `today`, the
    # rebuild builds into a store without them.
    new_store = open_store(f"file://{scratch / 'rebuild'}")
    said = feed(old_store.root_uri, manifests[:1], (RUNTIME_ONLY,))
    said += feed(new_store.root_uri, manifests[1:], (COMPILER_CHANGED,))
    print("releases fed (`releases sync --manifest`, then `releases accept`):")
    for line in said:
        print(f"  {line}")

    decisions, filled = neuron_decisions(old_store, RUNTIME_ONLY)
    more, filled_too = neuron_decisions(new_store, COMPILER_CHANGED)
    decisions += more
    print("what each Neuron serving line's build on the release before is asked (the decision, measured):")
    for d in decisions:
        print(
            f"  {d.entry:<8} {d.line} {d.base} -> {d.release}: {d.decision} "
            f"({'; '.join(d.deciding) or 'nothing changed'}) decided in {d.seconds * 1000:.2f} ms"
        )
    absent = ", ".join(sorted({*filled, *filled_too}))
    print(
        f"  NOTE: as fed, an entry lacks what the manifest does not carry ({absent} "
        "in the release before: `needs review`), and an absent package counts as changed, so every line reading "
        "it rebuilds until the entry is reviewed; `reviewed` is the entry `releases accept R --same-as <the release "
        "before>` records"
    )

    keys = sorted({row.cache_key for row in published(old_store)})
    print(f"re-smoke: {len(keys)} published build(s) attested at {RUNTIME_ONLY} ...", flush=True)
    smoke = re_smoke(old_store, keys, RUNTIME_ONLY, scratch / "attest-home" / "work", counter)

    catalog = scratch / "catalog-k.yaml"
    lines = "\n".join(f"      - {json.dumps(t)}" for t in targets)
    catalog.write_text(f"models:\n  - source: builtin:tiny-llama\n    targets:\n{lines}\n")
    print(f"rebuild: `recompile --sdk {COMPILER_CHANGED}` over a store without the catalog's keys ...", flush=True)
    rebuild = rebuild_by_recompile(new_store, catalog, COMPILER_CHANGED, counter)

    print_costs(old, [smoke, rebuild])
    neuron_line = next(
        (d for d in decisions if d.release == RUNTIME_ONLY and d.entry == "reviewed" and d.decision == "re-smoke"),
        None,
    )
    print(
        "MEASURED: the cpu profile's compile, smoke test, publish and attest on this machine (2 cores), each "
        "build's stage seconds from its manifest; the decisions above.\nNOT MEASURED (no Neuron SDK here): a "
        "Neuron compile, a smoke test on a Neuron host (the re-verify re-trace: (1b), on the FAKE plugin). The cpu "
        "profile reads no Neuron SDK: it is re-smoked at any release"
        + (f" (as {neuron_line.line} is at {RUNTIME_ONLY}, reviewed)" if neuron_line else "")
        + f"; at {COMPILER_CHANGED} its rebuild stands for a Neuron line's (every key new, nothing found)."
    )
    goals = [
        (
            smoke.compiles == 0 and smoke.graphs == 0 and smoke.targets == len(targets),
            f"re-smoke compiles 0 times: {smoke.compiles} compile call(s), {smoke.graphs} graph(s) for "
            f"{smoke.targets} attested target(s) (today: {old.compiles} compile calls, {old.graphs} graphs); "
            f"compile seconds {ratio(smoke.compile_s, old.compile_s)}x, smoke seconds "
            f"{ratio(smoke.smoke_s, old.smoke_s)}x, wall {ratio(smoke.wall_s, old.wall_s)}x of today's",
        ),
        (
            rebuild.compiles == len(targets),
            f"a compiler change rebuilds every target: {rebuild.compiles} of {len(targets)} compiled "
            f"(wall {ratio(rebuild.wall_s, old.wall_s)}x of today's: the same work)",
        ),
    ]
    return goals, old_store.root_uri


def published(store: Any) -> list[Any]:
    from neuronforge.artifacts.published import published_manifests

    return [m for _, _, m in published_manifests(store)]


# -- part 1b: re-verify, on the fake vLLM Neuron plugin -------------------------------------------------------
REVERIFY_BUILT_ON, REVERIFY_RELEASE = "2.33.0", "2.33.1"
# The re-verify bench's target: tests/test_reverify.py's tiny Llama on the vLLM Neuron plugin line (its own
# sequence length per target: its own graphs).
REVERIFY_TARGET = {
    "instance_type": "trn2.3xlarge",
    "tp_degree": 4,
    "batch_size": 2,
    "dtype": "fp32",
    "profile": "vllm-neuron-native@2.33",
}
# The two readings of the unverified fact (the fake plugin's FAKE_LNL_VERSION_HASHED): does the plugin's
# key hash libtorch-neuronx-lite's version, which 2.33.1 rebuilt?
NOT_HASHED, HASHED = "not hashed", "hashed"
READINGS = {NOT_HASHED: "0", HASHED: "1"}
# Sequence lengths 256, 224, ...: the tiny Llama holds 256 positions (`max_position_embeddings`), so at most
# REVERIFY_MAX_K targets of 32 positions apart.
REVERIFY_SEQ, REVERIFY_STEP, REVERIFY_MAX_K = 256, 32, 7


@contextlib.contextmanager
def fake_vllm_hosts(folder: Path, reading: str) -> Iterator[None]:
    """This process as a host with the FAKE SDK images of 2.33.0 and 2.33.1 (tests/fakes: their interpreters
    in NEURONFORGE_TOOLCHAIN_PYTHON_<R>) and 2 fake Neuron devices, the plugin's key under `reading`; the
    environment restored after."""
    from tests.fakes import VLLM_SDK_2_33_0, VLLM_SDK_2_33_1, fake_python

    env = {
        "NEURONFORGE_TOOLCHAIN_PYTHON_2_33_0": str(fake_python(folder / "py-2.33.0", *VLLM_SDK_2_33_0)),
        "NEURONFORGE_TOOLCHAIN_PYTHON_2_33_1": str(fake_python(folder / "py-2.33.1", *VLLM_SDK_2_33_1)),
        "FAKE_NEURON_DEVICES": "2",
        "FAKE_LNL_VERSION_HASHED": READINGS[reading],
    }
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def published_entries(store: Any) -> set[str]:
    """The plugin's cache entries the store holds for 2.33.0 (a compile publishes one per graph)."""
    from neuronforge.artifacts import layout

    listed = store.list(layout.vllm_cache_prefix(REVERIFY_BUILT_ON))
    return {o.key.rsplit("/", 2)[-2] for o in listed if o.key.endswith("/graph.hlo")}


@dataclass
class Reverified:
    """One reading: the builds on 2.33.0 (the baseline) and their re-verify at 2.33.1."""

    reading: str
    baseline: Cost
    cost: Cost  # the re-verify: smoke_s its smoke tests, wall_s attest_build's
    retrace_s: float
    published: int  # cache entries the builds published
    added: int  # cache entries the re-verify added (a compile would)
    found: list[str]
    missing: list[str]
    passed: int
    named: int  # builds whose attest line names its missing keys, none of them a published one
    lines: list[str]  # each attest's line (`neuronforge attest` prints it)


def reverify_reading(reading: str, k: int, scratch: Path, counter: CompileCounter) -> Reverified:
    """`k` targets built on 2.33.0 into a file store (compile + smoke + publish: the baseline), then
    `attest_build(store, key, "2.33.1", work)` for each — what `recompile --sdk 2.33.1` runs for a
    `re-verify` row: the consumer's re-trace in 2.33.1's interpreter against the published cache,
    compiling forbidden, then (every key found) the smoke test there."""
    from neuronforge.farm import attest
    from neuronforge.profiles.registry import get_profile
    from neuronforge.spec.tinymodel import make_tiny_llama
    from neuronforge.stores import open_store

    folder = scratch / f"reverify-{READINGS[reading]}"
    targets = [{**REVERIFY_TARGET, "sequence_length": REVERIFY_SEQ - REVERIFY_STEP * i} for i in range(k)]
    with fake_vllm_hosts(folder, reading):
        store = open_store(f"file://{folder / 'store'}")
        model = make_tiny_llama(folder / "model", tokenizer=True)
        what = f"{REVERIFY_BUILT_ON}: build every target"
        baseline = rebuild_everything(store, targets, folder / "build", counter, str(model), what)
        keys = sorted({row.cache_key for row in published(store)})
        entries = published_entries(store)
        cost = Cost(f"{REVERIFY_RELEASE}: re-verify (attest)")
        out = Reverified(reading, baseline, cost, 0.0, len(entries), 0, [], [], 0, 0, [])
        plugin = type(get_profile(str(REVERIFY_TARGET["profile"])))
        spent: dict[str, float] = {}
        calls, graphs = counter.mark()
        t0 = time.perf_counter()
        with (
            timed(spent, "download", attest, "download"),
            timed(spent, "retrace", plugin, "retrace"),
            timed(spent, "smoke", attest, "smoke_published"),
        ):
            for key in keys:
                done = attest.attest_build(store, key, REVERIFY_RELEASE, folder / "attest")
                a = done.attestation
                assert a is not None and done.decision == "re-verify" and a.run == "re-verify", done.line
                out.found += a.keys_found
                out.missing += a.keys_missing
                out.passed += a.passed
                out.named += bool(a.keys_missing) and all(m in done.line and m not in entries for m in a.keys_missing)
                out.lines.append(done.line)
                cost.targets += 1
        cost.wall_s = time.perf_counter() - t0
        cost.compiles, cost.graphs = counter.calls - calls, counter.graphs - graphs
    cost.smoke_s = spent.get("smoke", 0.0)
    out.retrace_s = spent.get("retrace", 0.0)
    cost.other_s = cost.wall_s - cost.smoke_s - out.retrace_s  # download + check, the attestation's write
    cost.notes.append(f"download + check {spent.get('download', 0.0):.1f} s")
    out.added = len(published_entries(store) - entries)
    return out


def print_reverify(rows: list[Reverified]) -> None:
    print(
        f"\n{'':<34}| {'targets':>7} {'compiles':>8} {'graphs':>6} {'entries':>7} | {'compile s':>9} "
        f"{'retrace s':>9} {'smoke s':>8} {'wall s':>8} | {'found':>5} {'missing':>7} {'attested':>8} | "
        f"{'new/old smoke':>13} {'wall':>6}"
    )
    for r in rows:
        b, c = r.baseline, r.cost
        hashed = READINGS[r.reading]
        print(f"-- the plugin's key: libtorch-neuronx-lite's version {r.reading} (FAKE_LNL_VERSION_HASHED={hashed})")
        print(
            f"{b.what:<34}| {b.targets:>7} {b.compiles:>8} {b.graphs:>6} {r.published:>7} | {b.compile_s:>9.1f} "
            f"{'—':>9} {b.smoke_s:>8.1f} {b.wall_s:>8.1f} |"
        )
        print(
            f"{c.what:<34}| {c.targets:>7} {c.compiles:>8} {c.graphs:>6} {r.added:>7} | {c.compile_s:>9.1f} "
            f"{r.retrace_s:>9.1f} {c.smoke_s:>8.1f} {c.wall_s:>8.1f} | {len(r.found):>5} {len(r.missing):>7} "
            f"{r.passed:>8} | {ratio(c.smoke_s, b.smoke_s):>13} {ratio(c.wall_s, b.wall_s):>6}  ({'; '.join(c.notes)})"
        )
        for line in r.lines:
            print(f"  {line}")
    print(
        "entries: the plugin's cache entries the builds published, and those the re-verify added (a compile would "
        "add some); found/missing: the published keys the re-traces read and lacked; attested: the builds whose "
        "attestation at the release passed"
    )
    print(
        "MEASURED: what runs, on the FAKE SDK (tests/fakes): the plugin's re-trace and smoke load in the fake "
        f"{REVERIFY_RELEASE} interpreter, their seconds on this machine. NOT MEASURED: a neuronx-cc compile (the "
        "fake's compile writes its graphs in seconds, a real one takes minutes to hours: the ratios say what runs, "
        "not what a real catalog saves); which reading is true (unverified: only the re-trace in "
        f"{REVERIFY_RELEASE}'s real image says); under `hashed`, the rebuild, which waits for a profile version "
        f"for {REVERIFY_RELEASE}."
    )


def reverify_goals(rows: list[Reverified]) -> list[tuple[bool, str]]:
    goals = []
    for r in rows:
        c, b = r.cost, r.baseline
        compiled = c.compiles + c.graphs + r.added
        spent = f"{c.compiles} compile call(s), {r.added} cache entries added; wall {ratio(c.wall_s, b.wall_s)}x"
        if r.reading == NOT_HASHED:
            ok = compiled == 0 and not r.missing and len(r.found) == r.published and r.passed == c.targets
            goals.append(
                (
                    ok,
                    f"re-verify, LNL's version not hashed: every key found ({len(r.found)} of {r.published} "
                    f"published, {len(r.missing)} missing), {r.passed} of {c.targets} build(s) attested at "
                    f"{REVERIFY_RELEASE}, {spent} of the {REVERIFY_BUILT_ON} builds'",
                )
            )
            continue
        ok = compiled == 0 and r.passed == 0 and r.named == c.targets
        goals.append(
            (
                ok,
                f"re-verify, LNL's version hashed: fails closed, {c.targets - r.passed} of {c.targets} build(s) not "
                f"attested, {r.named} naming a missing key none of them published "
                f"({', '.join(m[:12] for m in r.missing)}), "
                f"{spent} of the {REVERIFY_BUILT_ON} builds'; a rebuild then needs a profile version for "
                f"{REVERIFY_RELEASE} (registered first: not measured here)",
            )
        )
    return goals


def reverify_costs(k: int, scratch: Path, counter: CompileCounter) -> list[tuple[bool, str]]:
    """Part (1b): both readings, printed; returns their goal lines."""
    capped = f" (--k {k}: at most {REVERIFY_MAX_K} here, the tiny Llama's 256 positions)" if k > REVERIFY_MAX_K else ""
    k = min(k, REVERIFY_MAX_K)
    print(
        f"\n== (1b) re-verify, a catalog of {k} target(s){capped}: tiny Llama on "
        f"vllm-neuron-native@{REVERIFY_BUILT_ON} (FAKE SDK, tests/fakes), re-verified at {REVERIFY_RELEASE} "
        "(libtorch-neuronx-lite rebuilt, the compiler not)"
    )
    rows = []
    for reading in (NOT_HASHED, HASHED):
        print(f"{reading}: {k} build(s) on {REVERIFY_BUILT_ON}, then attest at {REVERIFY_RELEASE} ...", flush=True)
        rows.append(reverify_reading(reading, k, scratch, counter))
    print_reverify(rows)
    return reverify_goals(rows)


# -- part 2: deciding at farm scale ---------------------------------------------------------------------------
def stand_in(tpl: Template, scratch: Path) -> Template:
    """The real artifact's manifest with each of its files a stand-in of STAND_IN_BYTES (its size and
    sha256 in the manifest): a lookup reads the pointer, the manifest and one listing of the folder, whatever
    the files hold, and 8 000 builds of the real payload would not fit in moto's memory."""
    root = scratch / "stand-in"
    manifest = copy.deepcopy(tpl.manifest)
    for f in manifest["files"]:
        data = hashlib.sha256(f"{manifest['cache_key']}/{f['path']}".encode()).hexdigest()[:STAND_IN_BYTES].encode()
        path = root / tpl.prefix / f["path"]
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        f["size"], f["sha256"] = len(data), hashlib.sha256(data).hexdigest()
    return replace(tpl, root=root, manifest=manifest)


@dataclass
class CatalogFarm(Farm):
    """A farm whose catalog models (every other model of the first 2 x `models`) have their builds'
    manifests, those of the catalog's targets (their first TARGETS_PER_MODEL instance types) their
    (stand-in) payload; every build its pointer and farm-index record. The other models' builds have no
    manifest or payload: a reader that read them would still be counted (a GET of a missing key is a
    request), and moto's memory and the write time stay bounded."""

    models: int = 0

    def catalog_model(self, i: int) -> bool:
        m, _ = model_of(i)
        return i == 0 or (m % 2 == 0 and m < 2 * self.models)

    def has_payload(self, i: int) -> bool:
        return i == 0 or (self.catalog_model(i) and (i - 1) % len(INSTANCES) < TARGETS_PER_MODEL)

    def has_manifest(self, i: int) -> bool:
        return self.catalog_model(i)

    def _objects(self, c: Any, manifest: bool = True) -> None:
        """The clone's payload (where it has one), then its manifest, then its pointer, as publish orders them."""
        from neuronforge.artifacts import layout

        if self.has_payload(c.i):
            self._payload(c)
        if manifest:
            self.store.write_json(c.index["manifest"], c.manifest)
        self.store.put_if_absent(json.dumps(c.index, indent=2).encode(), layout.index_entry(c.key))


@dataclass
class Decided:
    factor: int
    builds: int
    requests: int
    seconds: float
    what: str
    pages: int
    decisions: str
    rc: int
    parts: dict[str, float]  # seconds of the catalog's load and check, and of find_stale


def decide(farm: Farm, catalog: Path, factor: int) -> Decided:
    """`recompile CATALOG --sdk 2.33.9 --dry-run --json` in this process, its requests counted."""
    from neuronforge.farm import catalog as catalogs
    from neuronforge.farm import recompile

    mark = farm.calls.mark()
    parts: dict[str, float] = {}
    t0 = time.perf_counter()
    with (
        timed(parts, "catalog load + check", catalogs, "check_catalog"),
        timed(parts, "find_stale", recompile, "find_stale"),
    ):
        rc, out = cli(["recompile", str(catalog), "--sdk", RUNTIME_ONLY, "--dry-run", "--json", "--store", farm.uri])
    seconds = time.perf_counter() - t0
    got = farm.calls.since(mark)
    report = json.loads(out)
    status = Counter(row["status"] for row in report["targets"])
    decided = ", ".join(f"{n} {d}" for d, n in sorted(report["summary"]["decisions"].items()))
    pages = sum(op == "GetObject" and "farm-index/pages/" in key for op, key in got)
    statuses = ", ".join(f"{n} {s}" for s, n in sorted(status.items()))
    what = f"{statuses}; decided {decided}"
    return Decided(factor, farm.count, len(got), seconds, breakdown(got), pages, what, rc, parts)


def farm_decisions(scratch: Path, tpl: Template, kind: str, models: int, grow: int) -> tuple[list[Decided], float]:
    """Part (2) on one store: grow to the catalog's store, decide; grow `grow` times, decide again."""
    catalog = scratch / f"catalog-{kind}.yaml"
    write_catalog(catalog, tpl, [2 * m for m in range(models)], INSTANCES[:TARGETS_PER_MODEL])
    warm_up = scratch / f"catalog-{kind}-warm-up.yaml"
    write_catalog(warm_up, tpl, [0], INSTANCES[:1])
    calls = Calls()
    if kind == "file":
        count_file_store_calls(calls)
        farm = CatalogFarm("file", f"file://{scratch / 'farm-file'}", tpl, calls, models=models)
        farm.pool = ThreadPoolExecutor(4)  # the writes only
    else:
        farm = CatalogFarm("s3", "s3://bench-upgrade/store", tpl, calls, models=models)
        farm.store.client.meta.events.register("before-send.s3", calls)
    rows: list[Decided] = []
    t_grow = 0.0
    for factor in (1, grow):
        size = 1 + 2 * models * len(INSTANCES) * factor  # the real artifact, then the clones
        t = time.perf_counter()
        farm.simulate_to(size)
        if factor == 1:
            feed(farm.uri, [FEED], (RUNTIME_ONLY,))
            decide(farm, warm_up, 0)  # unmeasured: the first run imports what the command needs
        t_grow += time.perf_counter() - t
        rows.append(decide(farm, catalog, factor))
    if farm.pool is not None:
        farm.pool.shutdown()
    return rows, t_grow


def print_farm(kind: str, rows: list[Decided], targets: int, models: int) -> None:
    where = "S3 (moto on 127.0.0.1)" if kind == "s3" else "file store (local disk)"
    unit = "requests" if kind == "s3" else "store calls"
    print(f"\n== (2) {where}: `recompile CATALOG --sdk {RUNTIME_ONLY} --dry-run --json`, {targets:,} targets")
    print(f"{'store':<34}| {unit:>11} {'per target':>10} {'pages':>5} {'seconds':>8} | what was read; rows")
    for r in rows:
        label = f"{r.builds:,} builds (" + ("the baseline)" if r.factor == 1 else f"{r.factor}x)")
        parts = ", ".join(f"{k} {v:.1f} s" for k, v in r.parts.items())
        print(
            f"{label:<34}| {r.requests:>11,} {r.requests / targets:>10.2f} {r.pages:>5} {r.seconds:>8.1f} | "
            f"{r.what}; {r.decisions} (exit {r.rc}); of its seconds: {parts}"
        )
    base, big = rows[0], rows[-1]
    print(
        f"ratio {big.factor}x store / baseline: {unit} {big.requests / base.requests:.3f}x, "
        f"seconds {big.seconds / base.seconds:.2f}x (catalog: {models:,} models x {TARGETS_PER_MODEL})"
    )


def farm_goal(kind: str, rows: list[Decided], targets: int) -> tuple[bool, str]:
    base, big = rows[0], rows[-1]
    unit = "requests" if kind == "s3" else "store calls"
    ok = big.requests <= base.requests and base.requests <= PER_TARGET_GOAL * targets
    return (
        ok,
        f"deciding is bounded by the catalog, not the store ({kind}): {base.requests:,} {unit} for {targets:,} "
        f"targets over {base.builds:,} builds, {big.requests:,} over {big.builds:,} "
        f"({big.requests / base.requests:.3f}x; goal: no more, and <= {PER_TARGET_GOAL} per target)",
    )


# -- the run ------------------------------------------------------------------------------------------------------
def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--k", type=int, default=4, help="targets of the small catalog of part 1 (default 4)")
    ap.add_argument("--models", type=int, default=2000, help="models of the farm-scale catalog (x 4 targets)")
    ap.add_argument(
        "--s3-models",
        type=int,
        default=500,
        help="the same on S3 (default 500: moto answers one request at a time, ~5-15 ms each on 2 cores)",
    )
    ap.add_argument("--grow", type=int, default=4, help="the larger store, as a multiple of the first (default 4)")
    ap.add_argument("--stores", default="file,s3", help="stores of part 2 (default file,s3)")
    ap.add_argument("--skip-kinds", action="store_true", help="part 2 only (its template: --artifact-store)")
    ap.add_argument("--artifact-store", help="with --skip-kinds: a file store holding a published cpu build")
    ap.add_argument("--quick", action="store_true", help="k 1, 20 models, grown 2x: minutes, for the test")
    ap.add_argument("--dir", help="scratch folder (default: a temporary one, removed at the end)")
    args = ap.parse_args()
    if args.quick:
        args.k, args.models, args.s3_models, args.grow = 1, 20, 20, 2
    if args.k < 1 or args.models < 1 or args.s3_models < 1 or args.grow < 2:
        raise SystemExit("--k and --models must be at least 1, --grow at least 2")
    stores = [s.strip() for s in args.stores.split(",") if s.strip()]

    t_start = time.monotonic()
    scratch = isolated(args.dir, "nf-upgrade-cost-")
    logging.basicConfig(level=logging.ERROR)
    moto = None
    goals: list[tuple[bool, str]] = []
    phases: dict[str, float] = {}
    try:
        t = time.monotonic()
        if args.skip_kinds:
            if not args.artifact_store:
                raise SystemExit("--skip-kinds needs --artifact-store")
            template_store = args.artifact_store
        else:
            counter = CompileCounter()
            kinds, template_store = release_kinds(args, scratch, counter)
            goals += kinds
            phases["(1) release kinds"] = time.monotonic() - t
            t = time.monotonic()
            goals += reverify_costs(args.k, scratch, counter)
            phases["(1b) re-verify"] = time.monotonic() - t

        tpl, _ = real_artifact(template_store, scratch)
        tpl = stand_in(tpl, scratch)
        print(
            f"\nfarm: clones of build {tpl.manifest['cache_key'][:12]} under genuine cache keys "
            f"(bench-farm/llama-NNNNN@<sha1>, {len(INSTANCES)} instance types each, 10% of the models on the "
            f"previous compiler); the catalog: every other model of the first 2 x M (M models x "
            f"{TARGETS_PER_MODEL} instance types), the other M models interleaved with them, the larger store's "
            f"after them (in name order); every build has its pointer and farm-index record (the index written at "
            f"once, as `index rebuild` writes it), the catalog models' builds their manifest, the catalog's targets "
            f"the real artifact's {len(tpl.paths)} file names as {STAND_IN_BYTES}-byte stand-ins (in the manifest "
            f"at their size and sha256)"
        )
        for kind in stores:
            models = args.models if kind == "file" else args.s3_models
            targets = models * TARGETS_PER_MODEL
            if kind == "s3" and moto is None:
                moto, endpoint = start_moto()
                os.environ["AWS_ENDPOINT_URL"] = endpoint
                import boto3

                boto3.client("s3", endpoint_url=endpoint).create_bucket(Bucket="bench-upgrade")
            t = time.monotonic()
            rows, grown = farm_decisions(scratch, tpl, kind, models, args.grow)
            phases[f"(2) {kind}: writing the farm"] = grown
            phases[f"(2) {kind}: deciding"] = time.monotonic() - t - grown
            print_farm(kind, rows, targets, models)
            goals.append(farm_goal(kind, rows, targets))

        print("\nGoals")
        for ok, line in goals:
            print(f"  {'PASS' if ok else 'FAIL'} {line}")
        print("phases: " + ", ".join(f"{k} {v:.0f} s" for k, v in phases.items()))
        print(f"wall {time.monotonic() - t_start:.0f} s")
    finally:
        tear_down(moto, scratch, keep=bool(args.dir))
    return 1 if any(not ok for ok, _ in goals) else 0


if __name__ == "__main__":
    sys.exit(main())
