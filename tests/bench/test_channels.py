"""`bench/channels.py --quick` runs end to end against moto on 127.0.0.1: a rollback with its requests
broken down and its baseline, and both rounds of concurrent promotes, the goals printed. Request counts,
timings and ratios are the bench's to report, not asserted; that a rollback copies no data is."""

from __future__ import annotations

import re

from tests.bench.running import ROOT, quick_run

BENCH = ROOT / "bench" / "channels.py"


def test_quick_run_prints_the_rollback_the_races_and_the_goals() -> None:
    out = quick_run(BENCH, timeout=600)
    assert re.search(r"^requests of the first rollback: \d+$", out, re.M)
    for part in (
        "channel GET", "index entry GET", "manifest GET", "build folder LIST", "review GET", "damage record GET",
        "channel PUT", "farm-index tail",
    ):  # fmt: skip
        assert re.search(rf"^    {part}", out, re.M), part  # each request named by what it reads or writes
    assert re.search(r"^3 rollbacks: requests median [\d.]+, min \d+, max \d+", out, re.M)
    assert re.search(
        r"^baseline \(no channels: .*: \d+ requests \(.*CopyObject.*\), [\d.]+ s, 1\.0 MiB copied", out, re.M
    )
    assert re.search(
        r"^ratio baseline/channel: requests [\d.]+x, seconds [\d.]+x, bytes copied [\d,]+ vs 0$", out, re.M
    )
    for mode in ("gated", "free"):
        table = out.split(f"2 rounds, {mode}\n", 1)[1]
        rows = table.splitlines()[1:3]
        assert all(re.match(r"^\s+\d+\s+\d+\s+\d+\s+\d+\s+\d+\s+[\d.]+", row) for row in rows), rows
    goals = out.split("\nGoals\n", 1)[1].splitlines()
    assert sum(line.startswith(("  PASS ", "  FAIL ")) for line in goals) == 8
    assert "  PASS no data copied: 0 copy/upload request(s) of artifact data in 4 rollbacks" in goals
    count = r"  (PASS|FAIL) the command makes \d+ S3 requests \(goal <= 9\): .*channel PUT"
    assert any(re.match(count, g) for g in goals)
    assert "  PASS one command: `neuronforge rollback MODEL --profile P --channel C`" in "\n".join(goals)
    command = r"^the command: `neuronforge rollback bench/llama --profile vllm-neuron --channel stable .*: rollback to "
    assert re.search(command, out, re.M)
