"""How the bench tests run a bench: as a user does, `python bench/NAME.py --quick` from the repo root."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def quick_run(bench: Path, timeout: int) -> str:
    """`bench --quick`'s stdout, once it exited 0 (else the failure shows its stdout and stderr's tail)."""
    proc = subprocess.run(
        [sys.executable, str(bench), "--quick"], cwd=ROOT, capture_output=True, text=True, timeout=timeout
    )
    assert proc.returncode == 0, f"{proc.stdout}\n{proc.stderr[-3000:]}"
    return proc.stdout
