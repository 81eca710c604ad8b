#!/usr/bin/env python
"""How noisy the smoke stage's measurement is on this machine, so that the protocol's default
repetitions and the promotion gate's threshold are chosen from data (docs/releasing.md, "Comparing
builds"). A benchmark, not a test: it prints numbers, ratios against a baseline measured in the same
run, and PASS/FAIL against the goals.

One build of the embedded tiny Llama (`builtin:tiny-llama`, cpu profile, as `make demo` builds it) is
published into a file store once. Then, for each repetition count R of `--repetitions` (default
1,3,5,9), the published build is smoke-tested `--k` times (`farm.attest.smoke_published`: the smoke
stage's own test of a published payload, in a fresh child process each time, protocol included) with
NEURONFORGE_SMOKE_REPETITIONS=R. Per R and figure it reports:
- `within`: the median over the K runs of each run's own spread ((p90 - p10) / median): the noise a
  comparison sees in one measurement;
- `between`: the spread of the K medians ((max - min) / median): how far two measurements of the SAME
  build land apart;
- false alarms: of the K x (K - 1) ordered pairs of runs of the same build, how many the comparison
  (`artifacts.comparison.compare`, the stable channel's default policy) calls a regression — each one a
  promotion the gate would refuse for nothing;
- the seconds one smoke test takes at that R.
The baseline is R = 1 (one sample per figure: what every smoke recorded before the protocol): `between`
is printed as a ratio against it, and the smoke's seconds likewise.

    .venv/bin/python bench/measurement_noise.py [--k 6] [--repetitions 1,3,5,9]
    .venv/bin/python bench/measurement_noise.py --quick   # k 2, R 1,3: about a minute, for the test
"""

from __future__ import annotations

import argparse
import logging
import os
import shutil
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

GATED_GOAL = 0  # false alarms the default policy may raise on repeated measurements of one build


@dataclass
class Runs:
    repetitions: int
    smokes: list = field(default_factory=list)  # SmokeRecord per run
    seconds: list[float] = field(default_factory=list)


def isolated(folder: str | None) -> Path:
    """The run's scratch folder and an environment that reaches no real store or Hub."""
    scratch = Path(folder or tempfile.mkdtemp(prefix="nf-measurement-noise-")).resolve()
    scratch.mkdir(parents=True, exist_ok=True)
    os.environ["NEURONFORGE_HOME"] = str(scratch / "home")
    os.environ["HF_HUB_OFFLINE"] = "1"
    os.environ.pop("NEURONFORGE_STORE", None)
    return scratch


def build_once(scratch: Path):
    """The embedded model's cpu build, published into a file store: (store, its folder, its manifest)."""
    from neuronforge.artifacts import layout
    from neuronforge.common import settings
    from neuronforge.pipeline.runner import run_target
    from neuronforge.profiles.registry import parse_target
    from neuronforge.records.artifact_manifest import ArtifactManifest
    from neuronforge.stores import open_store

    store = open_store(f"file://{scratch / 'store'}")
    t0 = time.perf_counter()
    target = parse_target({**settings.DEFAULT_TARGET, "profile": "cpu"})
    out = run_target(settings.DEFAULT_MODEL, target, store, scratch / "work")
    assert out.status == "published", out.status
    print(f"build: {out.key[:12]} published in {time.perf_counter() - t0:.1f} s")
    prefix = out.published.prefix
    manifest = ArtifactManifest.read(store, f"{prefix}/{layout.ARTIFACT_MANIFEST}")
    return store, prefix, manifest


def smoke_runs(store, prefix: str, manifest, scratch: Path, repetitions: int, k: int) -> Runs:
    from neuronforge.farm import attest
    from neuronforge.records.smoke import SmokeRecord

    os.environ["NEURONFORGE_SMOKE_REPETITIONS"] = str(repetitions)
    payload = attest.download(store, prefix, manifest, scratch / f"payload-r{repetitions}")
    runs = Runs(repetitions)
    for _ in range(k):
        t0 = time.perf_counter()
        result = attest.smoke_published(store, manifest, payload, scratch / "work")
        runs.seconds.append(time.perf_counter() - t0)
        smoke = SmokeRecord.model_validate(result.to_json())
        assert smoke.passed and smoke.measurement is not None, smoke.reason
        runs.smokes.append(smoke)
    shutil.rmtree(payload, ignore_errors=True)
    return runs


def spreads(runs: Runs, figure: str) -> tuple[float, float]:
    """(within, between) for one figure (module doc); a figure without 3 samples has no within."""
    figs = [s.measurement.figures[figure] for s in runs.smokes if figure in s.measurement.figures]
    within = [f.spread for f in figs if f.spread is not None]
    medians = [f.median for f in figs]
    middle = statistics.median(medians)
    between = (max(medians) - min(medians)) / middle if middle else 0.0
    return (statistics.median(within) if within else float("nan")), between


def false_alarms(runs: Runs) -> tuple[int, int]:
    from neuronforge.artifacts.comparison import compare

    alarms = pairs = 0
    for i, a in enumerate(runs.smokes):
        for j, b in enumerate(runs.smokes):
            if i != j:
                pairs += 1
                alarms += compare(a, b, base_key=f"run{i}", candidate_key=f"run{j}").verdict == "regression"
    return alarms, pairs


def report(all_runs: list[Runs]) -> list[tuple[bool, str]]:
    from neuronforge.records.smoke import FIGURE_TITLES, FIGURES

    base = all_runs[0]
    print(f"\n{'R':>3} {'figure':<46} {'within':>8} {'between':>8} {'vs R=1':>7}")
    for runs in all_runs:
        for figure in FIGURES:
            within, between = spreads(runs, figure)
            _, base_between = spreads(base, figure)
            ratio = f"{between / base_between:.2f}x" if base_between else "–"
            shown = "–" if within != within else f"{within:.1%}"
            print(f"{runs.repetitions:>3} {FIGURE_TITLES[figure]:<46} {shown:>8} {between:>8.1%} {ratio:>7}")
    print(f"\n{'R':>3} {'false alarms (pairs)':>22} {'smoke s (median)':>17} {'vs R=1':>7}")
    goals = []
    base_s = statistics.median(base.seconds)
    for runs in all_runs:
        alarms, pairs = false_alarms(runs)
        secs = statistics.median(runs.seconds)
        print(f"{runs.repetitions:>3} {f'{alarms} of {pairs}':>22} {secs:>17.2f} {secs / base_s:>6.2f}x")
        if runs.repetitions >= 3:
            goals.append(
                (
                    alarms <= GATED_GOAL,
                    f"R={runs.repetitions}: {alarms} false regression(s) among {pairs} comparisons of one build",
                )
            )
    return goals


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--k", type=int, default=6, help="smoke tests per repetition count (default 6)")
    ap.add_argument("--repetitions", default="1,3,5,9", help="repetition counts, the first the baseline")
    ap.add_argument("--quick", action="store_true", help="k 2, R 1,3: for the test")
    ap.add_argument("--dir", help="scratch folder (default: a temporary one, removed at the end)")
    args = ap.parse_args()
    if args.quick:
        args.k, args.repetitions = 2, "1,3"
    try:
        counts = [int(r) for r in args.repetitions.split(",") if r.strip()]
    except ValueError:
        raise SystemExit(f"--repetitions {args.repetitions}: give whole numbers separated by commas") from None
    if args.k < 2 or not counts or min(counts) < 1:
        raise SystemExit("--k must be at least 2 and every repetition count at least 1")
    logging.basicConfig(level=logging.ERROR)
    scratch = isolated(args.dir)
    started = time.monotonic()
    try:
        print(f"machine: {os.cpu_count()} cores, load average {os.getloadavg()[0]:.2f} at start")
        store, prefix, manifest = build_once(scratch)
        all_runs = [smoke_runs(store, prefix, manifest, scratch, r, args.k) for r in counts]
        goals = report(all_runs)
    finally:
        if not args.dir:
            shutil.rmtree(scratch, ignore_errors=True)
    print("\nGoals")
    for ok, text in goals:
        print(f"  {'PASS' if ok else 'FAIL'} {text}")
    print(f"\n{time.monotonic() - started:.0f} s in all")
    return 0


if __name__ == "__main__":
    sys.exit(main())
