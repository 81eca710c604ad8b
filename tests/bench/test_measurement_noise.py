"""`bench/measurement_noise.py --quick` runs end to end on the embedded model: one build, its smoke
repeated at R = 1 and 3, the noise table, the false alarms and the goals printed. The numbers are the
bench's to report, not asserted; that every figure of the protocol is reported at each R is."""

from __future__ import annotations

import re

from neuronforge.records.smoke import FIGURE_TITLES
from tests.bench.running import ROOT, quick_run

BENCH = ROOT / "bench" / "measurement_noise.py"


def test_quick_run_prints_the_noise_of_every_figure_and_the_goals() -> None:
    out = quick_run(BENCH, timeout=900)
    for r in (1, 3):
        for title in FIGURE_TITLES.values():
            assert re.search(rf"^\s+{r} {re.escape(title)}\s+\S+\s+[\d.]+%\s+\S+$", out, re.M), (r, title)
        assert re.search(rf"^\s+{r}\s+\d+ of 2\s+[\d.]+\s+[\d.]+x$", out, re.M), r
    goals = out.split("\nGoals\n", 1)[1].splitlines()
    assert sum(line.startswith(("  PASS ", "  FAIL ")) for line in goals) == 1
