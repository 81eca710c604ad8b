"""`bench/upgrade_cost.py --quick` runs end to end: one cpu target built as today's rebuild-everything
does, the two releases fed through `releases sync` and `accept`, the build re-smoked (attested) at the
runtime-only one and rebuilt by `recompile` at the one whose compiler changed; one vllm-neuron-native
target built on 2.33.0 (fake SDK) and re-verified at 2.33.1 under both readings of the plugin's key; then
`recompile --dry-run` deciding a 20-model catalog over a file store and an S3 store grown 2x. Seconds and
ratios are the bench's to report, not asserted; what ran (0 compiles for re-smoke and re-verify, one per
target for the rebuild; every key found, or the missing one named) and the shape of what it prints are."""

from __future__ import annotations

import re

from tests.bench.running import ROOT, quick_run

BENCH = ROOT / "bench" / "upgrade_cost.py"
ROW = r"\s+(\d+)\s+(\d+)\s+(\d+) \|\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+) \|"
# part (1b): targets, compiles, graphs, cache entries | compile s, re-trace s, smoke s, wall s | found, missing,
# attested (the build: no re-trace)
BUILT = (
    r"^2\.33\.0: build every target\s+\|\s+(\d+)\s+(\d+)\s+(\d+)\s+(\d+) \|"
    r"\s+([\d.]+)\s+—\s+([\d.]+)\s+([\d.]+) \|$"
)
REVERIFIED = (
    r"^2\.33\.1: re-verify \(attest\)\s+\|\s+(\d+)\s+(\d+)\s+(\d+)\s+(\d+) \|"
    r"\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+) \|\s+(\d+)\s+(\d+)\s+(\d+) \|"
)


def test_quick_run_prints_each_release_kind_the_farm_decisions_and_the_goals() -> None:
    out = quick_run(BENCH, timeout=1200)
    # (1) the releases as fed, the Neuron lines' decisions, the three rows and what was not measured
    assert "  Neuron 2.33.9: proposed; 1 package change(s) against 2.33.1" in out
    assert "  Neuron 2.33.10: proposed;" in out and "  ~ neuronx-cc 2.28.7631.0 -> 2.28.9999.0" in out
    # as fed, vllm (which no manifest carries) is absent and counts as changed; reviewed, only the runtime changed
    fed = r"^  as fed   vllm-neuron-native 2\.33\.1 -> 2\.33\.9: rebuild \(vllm 0\.29\.0 -> \(not in 2\.33\.9\)\)"
    assert re.search(fed, out, re.M)
    reviewed = r"^  reviewed vllm-neuron-native 2\.33\.1 -> 2\.33\.9: re-smoke \(aws-neuronx-runtime-lib 2\.35\.33"
    assert re.search(reviewed, out, re.M)
    assert re.search(r"^  reviewed vllm-neuron-native 2\.33\.1 -> 2\.33\.10: rebuild \(neuronx-cc ", out, re.M)
    assert "  NOTE: as fed, an entry lacks what the manifest does not carry (vllm 0.29.0 " in out
    today = re.search(rf"^today: rebuild every target\s+\|{ROW}", out, re.M)
    smoke = re.search(rf"^2\.33\.9 runtime-only: re-smoke \(attest\)\s+\|{ROW}", out, re.M)
    rebuild = re.search(rf"^2\.33\.10 compiler changed: rebuild\s+\|{ROW}", out, re.M)
    assert today and smoke and rebuild, out
    assert today.group(1, 2) == ("1", "1") and float(today.group(4)) > 0 and float(today.group(5)) > 0
    assert smoke.group(1, 2, 3) == ("1", "0", "0") and float(smoke.group(4)) == 0 and float(smoke.group(5)) > 0
    assert rebuild.group(1, 2) == ("1", "1") and "decided: 1 rebuild" in out
    assert "NOT MEASURED (no Neuron SDK here): a Neuron compile, a smoke test on a Neuron host" in out
    # (1b) re-verify at 2.33.1 of a build on 2.33.0, per reading: the build (the baseline), then the re-verify
    part = out.split("\n== (1b) re-verify, a catalog of 1 target(s): tiny Llama on vllm-neuron-native@2.33.0", 1)[1]
    unhashed, hashed = part.split("\n-- the plugin's key: libtorch-neuronx-lite's version ")[1:3]
    assert unhashed.startswith("not hashed (FAKE_LNL_VERSION_HASHED=0)") and hashed.startswith("hashed (")
    for reading in (unhashed, hashed):
        built = re.search(BUILT, reading, re.M)
        assert built, reading
        assert built.group(1, 2) == ("1", "1") and int(built.group(4)) > 0 and float(built.group(5)) > 0
    published = re.search(BUILT, unhashed, re.M).group(4)
    found = re.search(REVERIFIED, unhashed, re.M)
    assert found, unhashed
    # every published key found, nothing compiled or added, attested; the re-trace and the smoke timed
    assert found.group(1, 2, 3, 4) == ("1", "0", "0", "0") and float(found.group(5)) == 0
    assert float(found.group(6)) > 0 and float(found.group(7)) > 0
    assert found.group(9, 10, 11) == (published, "0", "1")
    assert "at SDK 2.33.1: re-verify passed" in unhashed
    missed = re.search(REVERIFIED, hashed, re.M)
    assert missed, hashed
    # the first key missed: not attested, nothing compiled, no smoke
    assert missed.group(1, 2, 3, 4) == ("1", "0", "0", "0") and float(missed.group(6)) > 0
    assert missed.group(9, 10, 11) == ("0", "1", "0") and float(missed.group(7)) == 0
    # its attest line names the key and says what follows
    failed = re.search(
        r"^  build [0-9a-f]{12} at SDK 2\.33\.1: re-verify FAILED .*; missing ([0-9a-f]{32}) .*"
        r"; rebuild it on a profile version for SDK 2\.33\.1$",
        hashed,
        re.M,
    )
    assert failed, hashed
    assert "NOT MEASURED: a neuronx-cc compile" in part
    # (2) per store: the baseline and the store grown 2x, each with its requests and what they read
    for where, unit in (("file store (local disk)", "store calls"), ("S3 (moto on 127.0.0.1)", "requests")):
        table = out.split(f"== (2) {where}: `recompile CATALOG --sdk 2.33.9 --dry-run --json`, 80 targets\n", 1)[1]
        head, base, grown, ratio = table.splitlines()[:4]
        assert unit in head
        assert re.match(r"^201 builds \(the baseline\)\s+\|\s+\d+\s+[\d.]+\s+\d+\s+[\d.]+ \| .*80 fresh", base)
        assert re.match(r"^401 builds \(2x\)\s+\|\s+\d+\s+[\d.]+\s+\d+\s+[\d.]+ \| .*80 fresh", grown)
        assert re.match(rf"^ratio 2x store / baseline: {unit} [\d.]+x, seconds [\d.]+x", ratio)
    # (3) a PASS/FAIL line per goal
    goals = out.split("\nGoals\n", 1)[1].splitlines()
    assert sum(line.startswith(("  PASS ", "  FAIL ")) for line in goals) == 6
    assert any(
        line.startswith(f"  PASS re-verify, LNL's version not hashed: every key found ({published} of {published} ")
        and "1 of 1 build(s) attested at 2.33.1, 0 compile call(s), 0 cache entries added" in line
        for line in goals
    )
    assert any(
        line.startswith("  PASS re-verify, LNL's version hashed: fails closed, 1 of 1 build(s) not attested, 1 naming")
        and f"({failed.group(1)[:12]}), 0 compile call(s)" in line
        and "a rebuild then needs a profile version for 2.33.1" in line
        for line in goals
    )
    assert any(line.startswith("  PASS re-smoke compiles 0 times: 0 compile call(s), 0 graph(s)") for line in goals)
    assert any(line.startswith("  PASS a compiler change rebuilds every target: 1 of 1") for line in goals)
    assert sum(line.startswith("  PASS deciding is bounded by the catalog, not the store") for line in goals) == 2
