#!/usr/bin/env python
"""`make demo`'s steps, timed in a fresh clone, with the machine's load: where the README's times come from.

A demo's wall time depends on the machine more than on neuronforge (the cold build is two compiles of
the tiny model on the CPU, Airflow's start-up is Python imports), so the README states a range and the
machine. This bench clones the checkout (its committed state), runs what `make demo` runs there, and
prints each step's wall seconds and CPU seconds, the load average during the step, and the ratio to a
baseline measured in the same run: a fixed pure-Python workload run on every core at once, before and
after the demo (its seconds say how fast this machine is *now*; a loaded machine stretches both).

Steps, as the demo prints them: `setup` (`make setup`: the .venv; only with `--setup`, which installs
every package from the package index or pip's cache — without it the checkout's .venv is reused and
the install is not timed), `prepare` (Airflow's metadata DB, the cluster policy, the pool), `run 1`
(the cold build), `run 2` (the cache hit), `report` (ls, show, verify, profiles, the planner), then,
with `--repeat` (default), the same demo again in the same clone: a second `make demo`.

    .venv/bin/python bench/demo.py [--setup] [--no-repeat] [--keep]

Run it once on a quiet machine and once on a busy one for a range; it takes the demo's own time (3 to
8 minutes on 2 cores) plus about 20 s of baseline.
"""

from __future__ import annotations

import argparse
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

# The baseline: a fixed amount of pure-Python work (no I/O, no imports), one process per core at once.
REFERENCE = "s = 0\nfor i in range(12_000_000):\n    s += i * i % 7\n"

# The demo's lines (at the start of a line: its progress lines are indented) that start and end its runs:
# `run 1: <what it does>` ... `run 1: <what it did> in 96s (log ...)`.
RUN_LINE = re.compile(r"^run (?P<n>\d+): ")
RUN_DONE = re.compile(r" in \d+s \(log ")


@dataclass
class Step:
    name: str
    start: float
    end: float
    cpu_seconds: float = 0.0

    @property
    def seconds(self) -> float:
        return self.end - self.start

    def load(self, samples: list[tuple[float, float]]) -> str:
        """The mean 1-minute load average sampled during the step."""
        inside = [load for at, load in samples if self.start <= at <= self.end]
        return f"{sum(inside) / len(inside):.1f}" if inside else "-"


def reference(cores: int) -> float:
    """Seconds for `cores` processes to run REFERENCE at once (the slowest one)."""
    started = time.perf_counter()
    procs = [subprocess.Popen([sys.executable, "-c", REFERENCE]) for _ in range(cores)]
    for p in procs:
        p.wait()
    return time.perf_counter() - started


class LoadSampler:
    """The 1-minute load average every 2 s, with when."""

    def __init__(self) -> None:
        self.samples: list[tuple[float, float]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(2.0):
            self.samples.append((time.monotonic(), os.getloadavg()[0]))

    def __enter__(self) -> LoadSampler:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join()


def _children_cpu() -> float:
    usage = os.times()
    return usage.children_user + usage.children_system


def segments(lines: list[tuple[float, str]], started: float, ended: float) -> list[tuple[str, float, float]]:
    """The demo's steps from its timestamped stdout lines: `prepare` until run 1 starts, each run from
    its first `run N:` line to the one that says what it did, `report` from the last run's end to the exit."""
    starts: dict[str, float] = {}
    ends: dict[str, float] = {}
    for at, line in lines:
        if m := RUN_LINE.match(line):
            if RUN_DONE.search(line):
                ends[m["n"]] = at
            else:
                starts.setdefault(m["n"], at)
    runs = sorted(n for n in starts if n in ends)
    if not runs:
        return [("(no run lines: see the log)", started, ended)]
    out = [("prepare", started, starts[runs[0]])]
    out += [(f"run {n}", starts[n], ends[n]) for n in runs]
    return [*out, ("report", ends[runs[-1]], ended)]


def run_demo(clone: Path, env: dict[str, str], tag: str) -> list[Step]:
    """`make demo` without its `setup` prerequisite (timed apart): the demo module in the clone."""
    cmd = [str(clone / ".venv" / "bin" / "python"), "-m", "neuronforge.interfaces.demo"]
    cpu0, started = _children_cpu(), time.monotonic()
    lines: list[tuple[float, str]] = []
    log = clone / f"bench-{tag.replace(' ', '-')}.log"  # what the demo printed, each line with its second
    with (
        open(log, "w") as kept,
        subprocess.Popen(cmd, cwd=clone, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) as p,
    ):
        assert p.stdout is not None
        for line in p.stdout:
            lines.append((time.monotonic(), line.rstrip("\n")))
            kept.write(f"{lines[-1][0] - started:7.1f} {line}")
        rc = p.wait()
    ended = time.monotonic()
    if rc != 0:
        sys.exit(f"{tag}: the demo failed (exit {rc}):\n" + "\n".join(line for _, line in lines[-30:]))
    parts = [Step(f"{tag}: {name}", start, end) for name, start, end in segments(lines, started, ended)]
    return [*parts, Step(f"{tag} (all)", started, ended, _children_cpu() - cpu0)]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--setup", action="store_true", help="time `make setup` too (a fresh .venv from the index)")
    ap.add_argument("--no-repeat", dest="repeat", action="store_false", help="run the demo once, not twice")
    ap.add_argument(
        "--venv",
        type=Path,
        default=Path(sys.prefix),
        help="the .venv the clone reuses without --setup (default: this interpreter's, %(default)s)",
    )
    ap.add_argument("--keep", action="store_true", help="keep the clone (its .neuronforge/ has every log)")
    args = ap.parse_args()

    cores = os.cpu_count() or 1
    info = Path("/proc/cpuinfo").read_text().splitlines()
    cpu = next((line.split(":", 1)[1].strip() for line in info if "model name" in line), platform.processor() or "?")
    mem = next((line.split()[1] for line in Path("/proc/meminfo").read_text().splitlines() if "MemTotal" in line), "0")
    print(f"machine: {cores} cores ({cpu}), {int(mem) / 2**20:.1f} GiB, Python {platform.python_version()}")
    print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")

    tmp = Path(tempfile.mkdtemp(prefix="nf-bench-demo-"))
    clone = tmp / "neuronforge"
    subprocess.run(["git", "clone", "--quiet", str(REPO), str(clone)], check=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("NEURONFORGE_", "AIRFLOW_"))}
    env["PYTHONUNBUFFERED"] = "1"
    steps: list[Step] = []
    base_before = reference(cores)
    print(f"baseline: {base_before:.1f}s (REFERENCE on {cores} processes at once)")
    with LoadSampler() as sampler:
        if args.setup:
            cpu0, started = _children_cpu(), time.monotonic()
            subprocess.run(["make", "setup"], cwd=clone, env=env, check=True, stdout=subprocess.DEVNULL)
            steps.append(Step("setup (make setup)", started, time.monotonic(), _children_cpu() - cpu0))
        else:
            (clone / ".venv").symlink_to(args.venv.resolve())
        steps += run_demo(clone, env, "make demo")
        if args.repeat:
            steps += run_demo(clone, env, "make demo again")
    base_after = reference(cores)
    base = (base_before + base_after) / 2
    print(f"baseline after: {base_after:.1f}s; load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print()
    print(f"{'step':<34} {'wall':>8} {'× baseline':>11} {'CPU s':>8} {'load':>6}")
    for s in steps:
        cpu_s = f"{s.cpu_seconds:.0f}" if s.cpu_seconds else "-"
        print(f"{s.name:<34} {s.seconds:>7.0f}s {s.seconds / base:>10.1f}× {cpu_s:>8} {s.load(sampler.samples):>6}")
    if not args.setup:
        print("(setup not timed: the checkout's .venv was reused; --setup installs a fresh one)")
    if args.keep:
        print(f"kept: {clone}")
    else:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
