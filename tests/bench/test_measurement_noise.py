"""`bench/measurement_noise.py --quick` runs end to end on the embedded model: one build, its smoke
repeated at R = 1 and 3, the noise table, the false alarms and the goals printed. The numbers are the
bench's to report, not asserted; that every figure of the protocol is reported at each R is."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from neuronforge.records.smoke import FIGURE_TITLES

ROOT = Path(__file__).resolve().parents[2]
BENCH = ROOT / "bench" / "measurement_noise.py"


def test_quick_run_prints_the_noise_of_every_figure_and_the_goals() -> None:
    proc = subprocess.run(
        [sys.executable, str(BENCH), "--quick"], cwd=ROOT, capture_output=True, text=True, timeout=900
    )
    out = proc.stdout
    assert proc.returncode == 0, f"{out}\n{proc.stderr[-3000:]}"
    for r in (1, 3):
        for title in FIGURE_TITLES.values():
            assert re.search(rf"^\s+{r} {re.escape(title)}\s+\S+\s+[\d.]+%\s+\S+$", out, re.M), (r, title)
        assert re.search(rf"^\s+{r}\s+\d+ of 2\s+[\d.]+\s+[\d.]+x$", out, re.M), r
    goals = out.split("\nGoals\n", 1)[1].splitlines()
    assert sum(line.startswith(("  PASS ", "  FAIL ")) for line in goals) == 1
