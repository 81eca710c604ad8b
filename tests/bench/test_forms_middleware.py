"""bench/forms_middleware.py runs (a few requests per kind) and prints one row per request kind
for both inner apps, each with the middleware's answer checked (200 or our 400)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "bench" / "forms_middleware.py"


def test_the_bench_prints_both_tables() -> None:
    out = subprocess.run(
        [sys.executable, str(BENCH), "--rounds", "1", "--requests", "20"],
        capture_output=True,
        text=True,
        check=True,
        timeout=300,
    ).stdout
    for title in ("== a null ASGI app", "== a FastAPI app"):
        table = out.split(title, 1)[1].split("==", 1)[0]
        rows = [line for line in table.splitlines() if "µs" in line]
        assert [r.split("|")[0].strip() for r in rows] == [
            "other DAG",
            "other route",
            "nf trigger ok",
            "nf trigger bad",
            "nf 512 KiB",
        ], out
