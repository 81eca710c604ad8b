#!/usr/bin/env python
"""Neuron-host time per build: how much of a build runs where the expensive hours are.

Each stage of a build is placed by its target's serving profile (`ServingProfile.placement`): the
Neuron profiles compile on CPU workers of their SDK image and load (the smoke test) on a Neuron host;
a toolchain that cannot compile without a device compiles there too. This builds, through the real
pipeline (`run_target`, one process: stage seconds are what they are wherever they run),

1. the embedded default target (profile `cpu`): no stage needs a Neuron host;
2. a Neuron target (profile `vllm-neuron@2.26.1`) through the FAKE SDK 2.26.1 (tests/fakes), whose
   compile is slowed (FAKE_NEURON_SLEEP) so that compile : smoke-load is `--compile-to-smoke` : 1 —
   15 by default, the ratio of a Llama-3.1-8B NxD Inference compile (~45 min) to its load and
   generation (~3 min); the tiny model's own ratio is far smaller and would flatter the baseline;

and prints, for each, the seconds on CPU and Neuron hosts, the Neuron share of the build, and its cost
at on-demand prices (bench/prices.json: prices, date, sources), against the baseline measured in the
same run — the same stage seconds placed as before (toolchain detection, compile and smoke all on
the Neuron host). Goal: Neuron-host time per build no more than the smoke test's (<= 10% of the
build at a realistic ratio).

    .venv/bin/python bench/neuron_host_time.py [--compile-to-smoke 15] [--pair trn1.32xlarge:c7i.8xlarge ...]

Costs are printed for pairs of (Neuron host, CPU compile host) from prices.json: by default a
trn1.32xlarge with a c7i.8xlarge (the 15x of the issue) and an inf2.xlarge with a c7i.2xlarge (a
small target, whose Neuron host costs about twice a CPU host of its size).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
PRICES = Path(__file__).with_name("prices.json")
# Where each stage ran before issue 23: every toolchain stage on the Neuron host.
BEFORE_ON_NEURON = {"prepare", "compile_graphs", "smoke"}


def build(target: dict, home: Path, env: dict[str, str]) -> list[dict]:
    """One cold build in a fresh home; its stage runs (seconds, host) as the manifest records them."""
    from neuronforge.common import settings
    from neuronforge.pipeline.runner import run_target
    from neuronforge.spec.target import TargetSpec
    from neuronforge.stores import open_store

    os.environ.update({"NEURONFORGE_HOME": str(home), **env})
    store = open_store(f"file://{home / 'store'}")
    out = run_target(settings.DEFAULT_MODEL, TargetSpec.parse(target), store, home / "work")
    assert out.status == "published", out.status
    return out.published.manifest.hosts["stages"]


def fake_sdk(tmp: Path) -> dict[str, str]:
    """The FAKE SDK 2.26.1 as this host's toolchain interpreter, with a Neuron device to load on."""
    from tests.fakes import SDK_2_26_1, fake_python

    python = fake_python(tmp / "sdk-2.26.1" / "python", *SDK_2_26_1)
    return {"NEURONFORGE_TOOLCHAIN_PYTHON_2_26_1": str(python), "FAKE_NEURON_DEVICES": "1"}


def seconds(stages: list[dict], on_neuron) -> tuple[float, float]:
    """(CPU-host seconds, Neuron-host seconds) of stage runs, `on_neuron(stage)` deciding the host."""
    cpu = sum(s["seconds"] for s in stages if not on_neuron(s))
    return cpu, sum(s["seconds"] for s in stages if on_neuron(s))


def report(name: str, stages: list[dict], neuron_profile: bool) -> dict:
    """The build's seconds per kind of host, now and as placed before (the baseline)."""
    now = seconds(stages, lambda s: s["host"] == "neuron")
    before = seconds(stages, lambda s: neuron_profile and s["stage"] in BEFORE_ON_NEURON)
    total = sum(now)
    row = {
        "build": name,
        "total_s": round(total, 1),
        "compile_s": round(sum(s["seconds"] for s in stages if s["stage"] == "compile_graphs"), 1),
        "smoke_s": round(sum(s["seconds"] for s in stages if s["stage"] == "smoke"), 1),
        "cpu_s": round(now[0], 1),
        "neuron_s": round(now[1], 1),
        "neuron_share": round(now[1] / total, 3) if total else 0.0,
        "baseline_cpu_s": round(before[0], 1),
        "baseline_neuron_s": round(before[1], 1),
        "baseline_neuron_share": round(before[1] / total, 3) if total else 0.0,
    }
    print(
        f"{name:<22} total {row['total_s']:6.1f}s (compile {row['compile_s']:5.1f}s, smoke {row['smoke_s']:4.1f}s) | "
        f"Neuron host {row['neuron_s']:5.1f}s = {row['neuron_share']:6.1%} of the build; "
        f"baseline {row['baseline_neuron_s']:5.1f}s = {row['baseline_neuron_share']:6.1%}"
    )
    return row


def cost(row: dict, prices: dict, neuron: str, cpu: str, baseline: bool = False) -> float:
    """USD per build with the build's CPU seconds on `cpu` and Neuron seconds on `neuron`."""
    per_hour = {k: v["usd_per_hour"] for k, v in prices["instances"].items()}
    pre = "baseline_" if baseline else ""
    return row[f"{pre}cpu_s"] / 3600 * per_hour[cpu] + row[f"{pre}neuron_s"] / 3600 * per_hour[neuron]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--compile-to-smoke", type=float, default=15.0)
    parser.add_argument(
        "--pair",
        action="append",
        help="NEURON_HOST:CPU_HOST from prices.json (repeatable)",
    )
    args = parser.parse_args()
    pairs = [tuple(p.split(":", 1)) for p in (args.pair or ["trn1.32xlarge:c7i.8xlarge", "inf2.xlarge:c7i.2xlarge"])]
    prices = json.loads(PRICES.read_text())
    from neuronforge.interfaces.demo import DEMO_TARGET

    neuron_target = {**DEMO_TARGET, "profile": "vllm-neuron@2.26.1", "tp_degree": 1, "max_context_length": 64}
    rows = []
    with tempfile.TemporaryDirectory(prefix="nf-bench-hosts-") as tmp:
        base = Path(tmp)
        rows.append(report("cpu (demo target)", build(DEMO_TARGET, base / "cpu", {}), neuron_profile=False))
        env = fake_sdk(base)
        probe = build(neuron_target, base / "probe", env)  # the fake's own compile and smoke seconds
        smoke = sum(s["seconds"] for s in probe if s["stage"] == "smoke")
        compiled = sum(s["seconds"] for s in probe if s["stage"] == "compile_graphs")
        sleep = max(0.0, args.compile_to_smoke * smoke - compiled)
        stages = build(neuron_target, base / "neuron", {**env, "FAKE_NEURON_SLEEP": f"{sleep:.2f}"})
        rows.append(report("vllm-neuron (fake SDK)", stages, neuron_profile=True))
    nr = rows[-1]
    print(
        f"\nvllm-neuron: compile:smoke {nr['compile_s'] / max(nr['smoke_s'], 1e-9):.1f}:1 (fake compile slowed by "
        f"{sleep:.1f}s); Neuron-host time {nr['neuron_s']:.1f}s vs the smoke test's {nr['smoke_s']:.1f}s; "
        f"{nr['neuron_share']:.1%} of the build (goal <= 10%), baseline {nr['baseline_neuron_share']:.1%} "
        f"(Neuron-host seconds {nr['neuron_s'] / nr['baseline_neuron_s']:.3f}x the baseline's)"
    )
    print(f"cost per build (on demand, {prices['region']}, as of {prices['as_of']}; bench/prices.json):")
    for neuron, cpu in pairs:
        now, before = cost(nr, prices, neuron, cpu), cost(nr, prices, neuron, cpu, baseline=True)
        print(
            f"  Neuron host {neuron} ${prices['instances'][neuron]['usd_per_hour']}/h, compile host {cpu} "
            f"${prices['instances'][cpu]['usd_per_hour']}/h: ${now:.4f} vs baseline ${before:.4f} ({now / before:.2f}x)"
        )
    print(json.dumps(rows, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
