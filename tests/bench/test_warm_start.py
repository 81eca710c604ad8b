"""`bench/warm_start.py` at a tiny size runs end to end against rclone on 127.0.0.1: every client leaves
every byte, the second start is counted through the bench's proxy (one request: the manifest), and the
goals are printed. Speeds and ratios are the bench's to report, not asserted."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
BENCH = ROOT / "bench" / "warm_start.py"


def test_a_tiny_run_prints_each_client_the_second_start_and_the_goals(tmp_path: Path) -> None:
    args = ["--shards", "1", "--shard-mib", "20", "--entries", "10", "--cache-mib", "8", "--rounds", "1"]
    proc = subprocess.run(
        [sys.executable, str(BENCH), *args, "--second-starts", "1", "--dir", str(tmp_path)],
        cwd=ROOT, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    out = proc.stdout
    assert proc.returncode == 0, f"{out}\n{proc.stderr[-3000:]}"
    assert "warning" not in out, out  # every client left every byte; the second start fetched nothing
    for client in ("sync.sh", "s5cmd sync", "s5cmd+sha256", "aws s3 sync"):
        line = rf"^{re.escape(client)} +MB/s per round \[\d+\]; client CPU [\d.]+ s per GB, endpoint [\d.]+$"
        assert re.search(line, out, re.M), client
        assert re.search(rf"^sync.sh / {re.escape(client)} +[\d.]+x$", out, re.M) or client == "sync.sh"
    assert re.search(r"^sha256 alone: [\d.]+ s of CPU per GB here", out, re.M), out
    assert re.search(r"^sync.sh said: sync.sh: 35 files fetched, .* MB/s \(up to \d+ reads", out, re.M), out
    assert re.search(r"^second start: [\d.]+ s .*, 1 requests \(each run: \[1\]\)$", out, re.M), out
    assert re.search(r"^  (met    |NOT MET)  second start <= 3 requests \(1\)$", out, re.M)
    assert len(re.findall(r"^  (met    |NOT MET)  ", out, re.M)) == 3
