#!/usr/bin/env python
"""What the smoke test's measurement protocol costs one smoke of a tiny cpu build.

Builds the tiny Llama for the default cpu target once (in a temp dir, or `--work DIR` to keep and
reuse it), then runs the smoke test of the published payload `--runs` times each way, alternating:
correctness only (no target: no protocol) and with the protocol at the settings' warm-up and
repetitions (`NEURONFORGE_SMOKE_WARMUP`, `NEURONFORGE_SMOKE_REPETITIONS`). Prints each way's median
smoke seconds and the ratio with/without, measured in this run on this machine, with the 1-minute
load average; the protocol's own seconds, timed alone on a loaded `CpuModel` of the payload (the
whole-smoke difference is within the smoke's noise on a loaded machine); and the last protocol run's
figures, each with its spread (the noise a comparison of two builds must exceed).

    .venv/bin/python bench/smoke_protocol.py [--runs 4] [--work DIR]
"""

from __future__ import annotations

import argparse
import glob
import os
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from neuronforge.common.settings import DEFAULT_TARGET


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=4, help="smoke runs each way (default 4)")
    parser.add_argument("--work", type=Path, help="keep the build here (reused when it holds one)")
    args = parser.parse_args()
    work = args.work or Path(tempfile.mkdtemp(prefix="nf-bench-smoke-"))

    from neuronforge.compilation.compile_cache import CompileCache
    from neuronforge.pipeline.runner import run_target
    from neuronforge.pipeline.stages.smoke import SmokeInput, smoke_test
    from neuronforge.profiles import get_profile
    from neuronforge.spec.target import TargetSpec
    from neuronforge.spec.tinymodel import make_tiny_llama
    from neuronforge.stores import open_store

    target = TargetSpec.parse({k: v for k, v in DEFAULT_TARGET.items() if k != "quantization"})
    checkpoint = work / "tiny-llama"
    if not checkpoint.exists():
        make_tiny_llama(checkpoint, tokenizer=True)
    out = run_target(str(checkpoint), target, open_store(f"file://{work / 'store'}"), work / "work")
    payload = Path(glob.glob(str(work / "store" / "artifacts" / "**" / out.key[:12]), recursive=True)[0])
    profile = get_profile(target.profile)
    load = profile.smoke_load(payload)
    seconds: dict[str, list[float]] = {"without": [], "with": []}
    last = None
    for i in range(args.runs):
        for how in ("without", "with"):
            cache = CompileCache(work / "smoke-cache" / f"{how}-{i}", "torch-inductor", "0.0.0", None)
            measured = target if how == "with" else None
            result = smoke_test(SmokeInput(payload, load, "cpu", cache, profile.python(), target=measured))
            if not result.passed:
                print(f"the smoke test failed: {result.reason}", file=sys.stderr)
                return 1
            seconds[how].append(result.seconds)
            last = result.measurement or last
    with_s, without_s = (statistics.median(seconds[h]) for h in ("with", "without"))
    alone = _protocol_alone(payload, target, args.runs)
    print(f"smoke of a tiny cpu build, median of {args.runs} alternating runs each (load {os.getloadavg()[0]:.2f}):")
    print(f"  correctness only      {without_s:6.2f} s   {seconds['without']}")
    print(f"  with the protocol     {with_s:6.2f} s   {seconds['with']}")
    print(f"  ratio with/without    {with_s / without_s:6.2f}x")
    print(f"  the protocol alone    {alone:6.2f} s   ({alone / without_s:.1%} of the smoke without it)")
    if last is not None:
        print(f"the protocol: {last.warmup} warm-up, {last.repetitions} repetitions")
        for name, f in last.figures.items():
            spread = "-" if f.spread is None else f"{f.spread:.2f}"
            print(f"  {name:<14} median {f.median:.6f}  p10 {f.p10:.6f}  p90 {f.p90:.6f}  spread {spread}")
    return 0


def _protocol_alone(payload: Path, target, runs: int) -> float:
    """Median seconds of the protocol's loop (`neuronforge_toolchain.measure`) on a `CpuModel` loaded
    once in this process, as the smoke child runs it after its correctness generation."""
    import time

    from neuronforge.common import settings
    from neuronforge.compilation.backends.cpu import CpuModel
    from neuronforge.pipeline.stages import measure as plan
    from neuronforge.pipeline.stages.smoke import EXPECTED
    from neuronforge.records.smoke_reference import SmokeReference
    from neuronforge_toolchain import measure

    model = CpuModel(payload / "cpu-aoti")
    expected = SmokeReference.from_bytes((payload / EXPECTED).read_bytes(), EXPECTED)  # what the smoke asks
    s = settings.current()
    asked = plan.plan(target, expected.prompt_ids, expected.max_new_tokens, s.smoke_warmup, s.smoke_repetitions)

    def sample(ids: list[int], n: int) -> tuple[float, float | None]:
        g = model.generate(ids, n)
        return g["time_to_first_token_s"], g["per_token_s"] if n > 1 else None

    took = []
    for _ in range(runs):
        started = time.perf_counter()
        measure.measure(asked, sample, model.load_seconds)
        took.append(time.perf_counter() - started)
    return statistics.median(took)


if __name__ == "__main__":
    sys.exit(main())
