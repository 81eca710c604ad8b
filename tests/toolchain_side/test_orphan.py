"""A toolchain child ends with its worker, even a worker killed with SIGKILL (neuronforge_toolchain.orphan)."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from neuronforge.common import interrupts
from neuronforge_toolchain import orphan
from tests.reliability.harness import gone

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="prctl(PR_SET_PDEATHSIG) is Linux's")

REPO = Path(__file__).resolve().parents[2]

# The worker: starts the child as the backends do (interrupts.start), the child a toolchain interpreter
# that arms the parent-death signal as `python -m neuronforge_toolchain` does first, starts a grandchild
# of its own (as the compiler starts its subprocesses) and compiles "forever".
WORKER = textwrap.dedent(
    """
    import sys, time
    from neuronforge.common import interrupts
    child = (
        "import subprocess, sys, time;"
        "from neuronforge_toolchain.orphan import end_with_parent;"
        "armed = end_with_parent();"
        "g = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)']);"
        "open(sys.argv[1] + '.tmp', 'w').write(f'{armed} {g.pid}');"
        "import os; os.rename(sys.argv[1] + '.tmp', sys.argv[1]); time.sleep(600)"
    )
    p = interrupts.start([sys.executable, "-c", child, sys.argv[1]])
    print(p.pid, flush=True)
    time.sleep(600)
    """
)


def test_a_sigkilled_worker_takes_its_toolchain_child_and_the_compilers_with_it(tmp_path: Path) -> None:
    marker = tmp_path / "child"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    worker = subprocess.Popen([sys.executable, "-c", WORKER, str(marker)], stdout=subprocess.PIPE, text=True, env=env)
    try:
        child = int(worker.stdout.readline())
        deadline = time.monotonic() + 30
        while not marker.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        armed, grandchild = marker.read_text().split()
        assert armed == "True"
        worker.send_signal(signal.SIGKILL)
        worker.wait(5)
        assert gone(child, 2.0), f"the toolchain child {child} outlived its SIGKILLed worker"
        assert gone(int(grandchild), 2.0), f"the compiler {grandchild} outlived its SIGKILLed worker"
    finally:  # never leak them, whatever the assertions said
        worker.kill()
        if marker.exists():
            for pid in marker.read_text().split()[1:]:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(int(pid), signal.SIGKILL)


def test_run_by_hand_it_arms_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    """`python -m neuronforge_toolchain` from a shell: no worker asked, the SIGTERM default stays."""
    monkeypatch.delenv(orphan.PARENT_ENV, raising=False)
    before = signal.getsignal(signal.SIGTERM)
    assert orphan.end_with_parent() is False
    assert signal.getsignal(signal.SIGTERM) is before  # SIGTERM keeps whatever it did (no group kill)


def test_the_worker_and_the_toolchain_name_the_same_variable() -> None:
    """The two sides share no import (the toolchain runs in the SDK image's Python): one name, checked here."""
    assert interrupts.PARENT_ENV == orphan.PARENT_ENV
