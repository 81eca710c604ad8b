"""The release commands under any terminal (issue 54): with `LC_ALL=C PYTHONUTF8=0` (the locale's
encoding is ASCII: files neuronforge reads itself are still read as UTF-8) and with
`PYTHONIOENCODING=ascii` (a stream that cannot encode `·` or `é`: escaped, never a crash)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from neuronforge.stores import open_store
from tests.releases.builds import publish

ROOT = Path(__file__).resolve().parents[2]
TERMINALS = {
    "C locale": {"LC_ALL": "C", "LANG": "C", "PYTHONUTF8": "0"},
    "ASCII stream": {"PYTHONIOENCODING": "ascii"},
}


def _run(env: dict[str, str], *argv: str) -> subprocess.CompletedProcess[str]:
    full = {k: v for k, v in os.environ.items() if k not in ("PYTHONIOENCODING", "LC_ALL", "LANG")}
    full.update(env, PYTHONPATH=str(ROOT))
    return subprocess.run(
        [sys.executable, "-m", "neuronforge.interfaces.cli", *argv],
        cwd=ROOT,
        env=full,
        capture_output=True,
        timeout=120,
        check=False,
    )


@pytest.mark.parametrize("terminal", TERMINALS)
def test_approve_promote_channels_and_history_run_in_any_terminal(tmp_path: Path, terminal: str) -> None:
    store = open_store(f"file://{tmp_path / 'store'}")
    key = publish(store, 1)
    env = TERMINALS[terminal]
    steps = [
        ("approve", key[:12], "--reason", "vérifié · ok", "--store", store.root_uri),
        ("promote", "builtin:tiny-llama", "--profile", "cpu", "--channel", "stable", "--build", key[:12]),
        ("channels",),
        ("history", "builtin:tiny-llama", "--profile", "cpu", "--channel", "stable"),
    ]
    for argv in steps:
        if "--store" not in argv:
            argv = (*argv, "--store", store.root_uri)
        done = _run(env, *argv)
        out, err = done.stdout.decode("ascii", "replace"), done.stderr.decode("ascii", "replace")
        assert done.returncode == 0 and "Traceback" not in err, (argv, out, err)
        assert all(b < 0x80 for b in done.stdout), (argv, out)  # what the terminal cannot show is escaped
    assert "promote" in out and key[:12] in out
