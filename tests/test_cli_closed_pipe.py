"""A reader that goes away (`neuronforge profiles | head -1`): the command stops quietly with 141
(128 + SIGPIPE, in the exit-code table), no traceback — issue 39's "a closed pipe ends quietly"."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from neuronforge.common.errors import ExitCode

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("argv", [["profiles"], ["config"], ["worker-queues", "--sdk", "2.26.1", "--role", "compile"]])
def test_a_closed_stdout_ends_the_command_quietly(argv: list[str], tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "NEURONFORGE_HOME": str(tmp_path)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "neuronforge.interfaces.cli", *argv],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
        cwd=tmp_path,
    )
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()  # the reader is gone before the first line is written
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=60) == ExitCode.CLOSED_PIPE, err
    assert "Traceback" not in err and "BrokenPipeError" not in err, err


def test_a_broken_pipe_that_is_not_stdout_is_not_silenced(monkeypatch: pytest.MonkeyPatch) -> None:
    """Only stdout's own reader going away is quiet: a BrokenPipeError from elsewhere (a socket to a
    store) with stdout intact is not mistaken for it."""
    from neuronforge.interfaces import cli
    from neuronforge.interfaces.cli import environment

    def broken(_args: object) -> int:
        raise BrokenPipeError(32, "Broken pipe")

    monkeypatch.setattr(environment, "cmd_profiles", broken)
    monkeypatch.setattr(cli, "_stdout_closed", lambda: False)
    try:
        code = cli.main(["profiles"])
    except BrokenPipeError:
        code = None  # unexplained: raised with its traceback, as any bug
    assert code != ExitCode.CLOSED_PIPE
