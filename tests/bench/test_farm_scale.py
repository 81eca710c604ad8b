"""`bench/farm_scale.py --quick` runs end to end: a farm of 40 artifacts cloned from the session's
real build, in a file store and in S3 (moto), every reader through the farm index and through the
ported full scans, the table printed. Timings and ratios are the bench's to report, not asserted."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.conftest import Compiled

ROOT = Path(__file__).resolve().parents[2]
BENCH = ROOT / "bench" / "farm_scale.py"
READERS = (
    "ls, first page (50)",
    "catalog page (50 rows)",
    "filtered: --model (1 model)",
    "filtered: --instance (1/5)",
    "one artifact (catalog JSON)",
    "  the same by its key12",
    "show KEY --json",
    "catalog stale (20 targets)",
    "gc --dry-run",
    "publish: index requests",
)


def test_quick_run_prints_the_table(compiled: Compiled) -> None:
    proc = subprocess.run(
        [sys.executable, str(BENCH), "--quick", "--artifact-store", compiled.store.root_uri],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    out = proc.stdout
    assert proc.returncode == 0, f"{out}\n{proc.stderr[-3000:]}"
    assert "== file store (local disk): 40 published artifacts" in out
    assert "== S3 (moto on 127.0.0.1): 40 published artifacts" in out
    for header in ("NEW calls", "NEW req", "BASELINE req", "@20ms"):
        assert header in out
    for reader in READERS:
        assert out.count(reader) >= 2, reader  # a row in both tables
    assert "ERROR" not in out
    assert "catalog stale (20 targets): baseline 20 fresh" in out  # the baseline reads the same farm
    assert "verify --store (index against every manifest): ok" in out
    assert out.count("ok=True") == 3  # two file-store clones and one S3 clone verify
    assert "Goals at 40 on S3" in out and "Goals at 40 on the file store" in out
    # S3: page, one artifact twice, stale, ls, publish, stale constant in N; file store: 3 timings + stale
    assert out.count("met    ") + out.count("NOT MET") == 7 + 4
    assert "peak RSS" in out
