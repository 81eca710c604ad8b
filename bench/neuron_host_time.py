#!/usr/bin/env python
"""Neuron-host time per build: how much of a build runs where the expensive hours are.

Each stage of a build is placed by its target's serving profile (`ServingProfile.placement`): the
Neuron profiles compile on CPU workers of their SDK image and load (the smoke test) on a Neuron host;
a toolchain that cannot compile without a device compiles there too.

MEASURED (by default): the deployment test's scenario
`test_neuron_builds_compile_on_a_cpu_worker_and_load_on_a_neuron_host` (tests/deployment: PostgreSQL,
redis, an S3 endpoint, Airflow 3 with CeleryExecutor, a CPU compile worker `nf-compile` and a Neuron
worker `nf-neuron`, the FAKE Neuron SDK 2.26.1 as their toolchains) run in a pytest subprocess with
NF_DEPLOY_STAGE_TIMES set: besides its own runs it builds two Neuron targets (optimum-neuron and
vllm-neuron@2.26.1, tp 2) twice, each of a model of its own that compiles cold —

1. placed: as the profiles place them (prepare and compile on `nf-compile`, smoke on `nf-neuron`);
2. baseline, in the same deployment and run of the bench: the same builds with every toolchain stage
   on the Neuron host's queue (the deployment's policy re-routes a `deploy-baseline-*` run), as before
   issue 23 —

and writes each task instance's queue, worker and duration as Airflow recorded them. This prints, per
build, the task seconds on CPU workers and on the Neuron host, the Neuron-host share, the ratio to the
baseline and the cost at on-demand prices (bench/prices.json). The fake SDK's compile is quick, so the
measured compile : smoke ratio is far below a real one's: the measured share says where the seconds
go in a real deployment, not what a real compile costs.

MODEL (`--model`, printed after the measured section): the old figure, one process through
`run_target`, whose "hosts" are placement labels: the fake compile is slowed (FAKE_NEURON_SLEEP) to
compile : smoke = `--compile-to-smoke` : 1 (15 by default: a Llama-3.1-8B NxD Inference compile of
~45 min to its ~3 min load) and the baseline is the same seconds relabelled. Goal (of the model):
Neuron-host time no more than the smoke test's, <= 10% of the build at a realistic ratio.

    .venv/bin/python bench/neuron_host_time.py [--from FILE | --save FILE] [--model [--compile-to-smoke 15]]
        [--pair trn1.32xlarge:c7i.8xlarge ...]

Costs are printed for pairs of (Neuron host, CPU compile host) from prices.json: by default a
trn1.32xlarge with a c7i.8xlarge (the 15x of the issue) and an inf2.xlarge with a c7i.2xlarge (a
small target, whose Neuron host costs about twice a CPU host of its size).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
PRICES = Path(__file__).with_name("prices.json")
# Where each stage ran before issue 23: every toolchain stage on the Neuron host.
BEFORE_ON_NEURON = {"prepare", "compile_graphs", "smoke"}


# -- measured: a real deployment's task instances ------------------------------------------------------
SCENARIO = "neuron_builds_compile"  # pytest -k of the deployment scenario that records stage times
NEURON_GROUP = "neuron_2_26_1_target"


def run_deployment(out: Path) -> None:
    """The deployment scenario in a pytest subprocess, writing its stage times to `out`."""
    from tests.deployment.stage_times import ENV

    cmd = [sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:randomly", "-p", "no:cacheprovider"]
    cmd += ["tests/deployment", "-k", SCENARIO]
    env = {**os.environ, ENV: str(out), "PYTHONPATH": str(REPO)}
    print(f"running the deployment scenario ({' '.join(cmd[2:])}; a few minutes) ...", flush=True)
    t0 = time.monotonic()
    done = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True)
    if done.returncode != 0 or not out.exists():
        tail = "\n".join((done.stdout + done.stderr).splitlines()[-40:])
        raise SystemExit(f"the deployment scenario failed (exit {done.returncode}), no stage times:\n{tail}")
    print(f"deployment scenario done in {time.monotonic() - t0:.0f}s; stage times in {out}")


def build_rows(times, neuron_hosts: tuple[str, ...]) -> list[dict]:
    """Per build (map index of the Neuron group) of one run: task seconds on CPU workers and on Neuron
    hosts, and each stage's seconds and worker."""
    rows = []
    for i, name in enumerate(times.builds):
        tasks = [t for t in times.tasks if t.group == NEURON_GROUP and t.map_index == i]
        neuron = sum(t.duration_s for t in tasks if t.hostname in neuron_hosts)
        cpu = sum(t.duration_s for t in tasks if t.hostname not in neuron_hosts)
        rows.append(
            {
                "run": times.label,
                "build": name,
                "cpu_s": round(cpu, 2),
                "neuron_s": round(neuron, 2),
                "neuron_share": round(neuron / (cpu + neuron), 3) if cpu + neuron else 0.0,
                "compile_s": round(sum(t.duration_s for t in tasks if t.stage == "compile_graphs"), 2),
                "smoke_s": round(sum(t.duration_s for t in tasks if t.stage == "smoke"), 2),
                "stages": {t.stage: [round(t.duration_s, 2), t.hostname] for t in tasks},
            }
        )
    return rows


def measured(path: Path, pairs: list[tuple[str, str]], prices: dict) -> list[dict]:
    """Print the measured section from a stage-times file; its rows (placed, then baseline)."""
    from tests.deployment.stage_times import read

    times = read(path)
    placed, baseline = times.run("placed"), times.run("baseline")
    hosts = times.neuron_hosts
    print(
        f"MEASURED in a real deployment (Airflow 3, CeleryExecutor; Neuron host {', '.join(hosts)}; FAKE SDK 2.26.1): "
        "each task's seconds as Airflow recorded them (task instance duration, start-up included)"
    )
    rows = []
    for run in (placed, baseline):
        print(f"  run {run.label} ({run.run_id}): {run.wall_s:.0f}s from start to end")
        for row in build_rows(run, hosts):
            rows.append(row)
            where = ", ".join(f"{stage} {s:.1f}s@{host}" for stage, (s, host) in row["stages"].items())
            ratio = row["compile_s"] / max(row["smoke_s"], 1e-9)
            print(
                f"    {row['build']:<22} CPU workers {row['cpu_s']:6.1f}s | Neuron host {row['neuron_s']:6.1f}s = "
                f"{row['neuron_share']:6.1%} of the build (compile:smoke {ratio:.1f}:1)"
            )
            print(f"      {where}")
    now = [r for r in rows if r["run"] == "placed"]
    before = [r for r in rows if r["run"] == "baseline"]
    n_now, n_before = sum(r["neuron_s"] for r in now), sum(r["neuron_s"] for r in before)
    total_now = sum(r["neuron_s"] + r["cpu_s"] for r in now)
    total_before = sum(r["neuron_s"] + r["cpu_s"] for r in before)
    per_build = [f"{a['build']} {a['neuron_s'] / b['neuron_s']:.2f}x" for a, b in zip(now, before, strict=True)]
    print(
        f"  Neuron-host seconds: placed {n_now:.1f}s = {n_now / total_now:.1%} of the builds' task seconds, baseline "
        f"{n_before:.1f}s = {n_before / total_before:.1%}: {n_now / n_before:.2f}x the baseline's "
        f"(per build: {', '.join(per_build)})"
    )
    print(f"  cost of the measured builds (on demand, {prices['region']}, as of {prices['as_of']}; bench/prices.json):")
    for neuron, cpu in pairs:
        c_now = sum(cost(r, prices, neuron, cpu) for r in now)
        c_before = sum(cost(r, prices, neuron, cpu) for r in before)
        print(
            f"    Neuron host {neuron}, compile host {cpu}: ${c_now:.5f} vs baseline ${c_before:.5f} "
            f"({c_now / c_before:.2f}x)"
        )
    print(
        "  (the fake compile is seconds, a real one hours: the measured share is of these builds; the goal of "
        "<= 10% at a realistic compile:smoke ratio is the model's, below)"
    )
    return rows


# -- model: one process, stage seconds relabelled -----------------------------------------------------
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
    return [s.model_dump() for s in out.published.manifest.hosts.stages or []]


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


def model(args: argparse.Namespace, pairs: list[tuple[str, str]], prices: dict) -> list[dict]:
    """The modelled figure (one process; hosts are placement labels; the baseline relabels the same seconds)."""
    from neuronforge.interfaces.demo import DEMO_TARGET

    print(
        '\nMODEL (one process through run_target: stage "hosts" are placement labels, the fake compile padded '
        f"by sleep to compile:smoke {args.compile_to_smoke:g}:1, the baseline the same seconds relabelled)"
    )
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
        f"model, vllm-neuron: compile:smoke {nr['compile_s'] / max(nr['smoke_s'], 1e-9):.1f}:1 (fake compile slowed by "
        f"{sleep:.1f}s); Neuron-host time {nr['neuron_s']:.1f}s vs the smoke test's {nr['smoke_s']:.1f}s; "
        f"{nr['neuron_share']:.1%} of the build (goal <= 10%), baseline {nr['baseline_neuron_share']:.1%} "
        f"(Neuron-host seconds {nr['neuron_s'] / nr['baseline_neuron_s']:.3f}x the baseline's)"
    )
    print(f"model cost per build (on demand, {prices['region']}, as of {prices['as_of']}; bench/prices.json):")
    for neuron, cpu in pairs:
        now, before = cost(nr, prices, neuron, cpu), cost(nr, prices, neuron, cpu, baseline=True)
        print(
            f"  Neuron host {neuron} ${prices['instances'][neuron]['usd_per_hour']}/h, compile host {cpu} "
            f"${prices['instances'][cpu]['usd_per_hour']}/h: ${now:.4f} vs baseline ${before:.4f} ({now / before:.2f}x)"
        )
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    source = parser.add_mutually_exclusive_group()
    source.add_argument("--from", dest="source", type=Path, help="read a saved stage-times file, run no deployment")
    source.add_argument("--save", type=Path, help="keep the deployment's stage-times file here")
    parser.add_argument("--model", action="store_true", help="also print the modelled figure (one process)")
    parser.add_argument("--compile-to-smoke", type=float, default=15.0, help="the model's ratio")
    parser.add_argument(
        "--pair",
        action="append",
        help="NEURON_HOST:CPU_HOST from prices.json (repeatable)",
    )
    args = parser.parse_args()
    pairs = [tuple(p.split(":", 1)) for p in (args.pair or ["trn1.32xlarge:c7i.8xlarge", "inf2.xlarge:c7i.2xlarge"])]
    prices = json.loads(PRICES.read_text())
    unknown = sorted({h for pair in pairs for h in pair} - set(prices["instances"]))
    if unknown or any(len(p) != 2 for p in pairs):
        parser.error(f"--pair takes NEURON_HOST:CPU_HOST of {PRICES.name}: {', '.join(unknown) or args.pair}")
    out: dict[str, list[dict]] = {}
    if args.source is not None:
        try:
            out["measured"] = measured(args.source, pairs, prices)
        except ValueError as exc:
            parser.exit(2, f"neuron_host_time: {exc}\n")
    else:
        with tempfile.TemporaryDirectory(prefix="nf-bench-hosts-") as tmp:
            path = args.save or Path(tmp) / "stage-times.json"
            run_deployment(path)
            out["measured"] = measured(path, pairs, prices)
    if args.model:
        out["model"] = model(args, pairs, prices)
    print(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
