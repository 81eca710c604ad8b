"""The reliability suite's one way to run the CLI as a user would and judge the outcome.

`cli(argv)` runs `neuronforge.interfaces.cli.main` in this process (the console script's entry point) with
stdout/stderr captured. Any exception that escapes `main` is what the user would have seen as a
traceback: `Outcome.traceback` holds it, and `expect_error` fails on it. `snapshot(folder)` and
`assert_unchanged` tell whether a failed command left a store exactly as it was.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import subprocess
import time
import traceback
from dataclasses import dataclass
from pathlib import Path


@dataclass
class Outcome:
    code: int | None
    out: str
    err: str
    traceback: str | None = None

    @property
    def text(self) -> str:
        return self.out + self.err


def cli(argv: list[str]) -> Outcome:
    from neuronforge.interfaces.cli import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main([str(a) for a in argv])
        except SystemExit as exc:  # argparse's own usage errors
            code = exc.code if isinstance(exc.code, int) else 2
        except BaseException:
            return Outcome(None, out.getvalue(), err.getvalue(), traceback.format_exc())
    return Outcome(code, out.getvalue(), err.getvalue())


def expect_error(outcome: Outcome, code: int, *words: str, secret: str | None = None) -> None:
    """A clean failure: the exit code, no traceback, every word in the message, never the secret."""
    assert outcome.traceback is None, outcome.traceback
    assert outcome.code == code, (outcome.code, outcome.text)
    assert "Traceback (most recent call last)" not in outcome.text, outcome.text
    for word in words:
        assert word in outcome.text, (word, outcome.text)
    if secret is not None:
        assert secret not in outcome.text, outcome.text


def snapshot(folder: Path) -> dict[str, str]:
    """Every file below `folder` (relative path -> sha256); empty when the folder does not exist."""
    if not folder.exists():
        return {}
    return {
        str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


def mount(*args: str) -> str | None:
    """Run mount (a tmpfs for a full disk, a read-only bind mount); the reason it failed, or None
    (the disk cases then skip with that reason)."""
    done = subprocess.run(["mount", *args], capture_output=True, text=True, check=False)
    return None if done.returncode == 0 else (done.stderr.strip() or f"mount exited {done.returncode}")


def gone(pid: int, within_s: float) -> bool:
    """Whether `pid` exits within `within_s` (a zombie has: its parent died first, and whoever
    inherited it here may not reap it)."""
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (FileNotFoundError, ProcessLookupError):
            return True
        if state in ("Z", "X"):
            return True
        time.sleep(0.05)
    return False
