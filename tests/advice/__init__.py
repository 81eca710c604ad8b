"""Every command a message suggests runs in a test, in the state the message describes.

Each call site of `neuronforge.common.advice.command` (a function in the package that builds a
suggestion) is covered by a scenario here: a test decorated `@covers("module:function")` that builds the
state, takes the message, checks the suggestion came from that site (`suggested`), runs it and asserts
it does what the message says. `test_sites.py` checks the call sites and the scenarios agree both
ways, so a new suggestion without a scenario, or a scenario whose site is gone, fails.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TypeVar

from neuronforge.common import advice

COVERED: dict[str, str] = {}  # call site -> the scenario (test module:function) that runs its advice
F = TypeVar("F", bound=Callable[..., object])
_BACKTICKED = re.compile(r"`(neuronforge [^`]+)`")


def covers(*sites: str) -> Callable[[F], F]:
    """Declare the call sites whose suggestion this scenario follows."""

    def mark(test: F) -> F:
        for site in sites:
            COVERED[site] = f"{test.__module__}:{test.__qualname__}"
        return test

    return mark


def suggested(message: str, site: str) -> list[str]:
    """The commands `message` suggests (its backticked `neuronforge …`), after checking `site` built one
    of them in this process (in-process messages), so a scenario cannot claim a site it never reached."""
    commands = _BACKTICKED.findall(message)
    assert commands, f"no suggested command in: {message}"
    built = {cmd for where, cmd in advice.recent() if where == site}
    assert built & set(commands), f"{site} built none of {commands} (it built {sorted(built)})"
    return commands


def in_message(message: str) -> list[str]:
    """The commands `message` suggests, for a message printed by a child process (its site cannot be
    seen from here: the scenario's own assertions on the outcome say which message it was)."""
    commands = _BACKTICKED.findall(message)
    assert commands, f"no suggested command in: {message}"
    return commands


def follow(
    command: str, env: Mapping[str, str] | None = None, cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    """Run a suggested command as a user pasting it would: split as a shell splits it, the CLI in a
    fresh process of this interpreter, in `env` (default: this one)."""
    argv = shlex.split(command)
    assert argv[0] == advice.PROGRAM, command
    return subprocess.run(
        [sys.executable, "-m", "neuronforge.interfaces.cli", *argv[1:]],
        env=dict(os.environ if env is None else env),
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=300,
    )


def follow_on_terminal(command: str, answer: str, env: Mapping[str, str] | None = None) -> tuple[int, str]:
    """`follow` for a command that asks before it acts (`lease break`): run with a terminal as its stdin,
    `answer` typed once it asks (`[y/N]` on stderr); the exit code and everything it printed."""
    import pty
    import select
    import time

    argv = shlex.split(command)
    assert argv[0] == advice.PROGRAM, command
    main, child = pty.openpty()
    proc = subprocess.Popen(
        [sys.executable, "-m", "neuronforge.interfaces.cli", *argv[1:]],
        stdin=child,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=dict(os.environ if env is None else env),
    )
    os.close(child)
    assert proc.stderr is not None
    err, deadline = b"", time.monotonic() + 120
    while b"[y/N]" not in err and proc.poll() is None and time.monotonic() < deadline:
        if select.select([proc.stderr], [], [], 0.5)[0]:
            err += os.read(proc.stderr.fileno(), 4096)
    os.write(main, answer.encode() + b"\n")
    out, rest = proc.communicate(timeout=120)
    os.close(main)
    return proc.returncode, (err + rest).decode() + out.decode()
