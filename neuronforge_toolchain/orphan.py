"""A toolchain child ends with the worker that started it, even when the worker is SIGKILLed.

Why: the worker starts this interpreter in a session of its own (`neuronforge.common.interrupts.start`)
so that a terminal's Ctrl+C reaches only the worker, which then stops the child's group itself. A
worker killed with SIGKILL (the OOM killer, `kill -9`, a pod evicted) stops nothing: the compile went
on orphaned, holding both cores for up to an hour, while the identical rerun (which takes the dead
worker's lease over within seconds) started a second one. Linux's parent-death signal
(`prctl(PR_SET_PDEATHSIG)`, man 2 prctl) delivers SIGTERM to us when the worker dies; our handler then
kills our whole process group (the compiler's own subprocesses included), which we lead.

Only when the worker asked for it (`PARENT_ENV` holds its pid): run by hand, this does nothing.
Runs in the SDK image's own Python (3.10+), standard library only.
"""

import ctypes
import os
import signal
import sys

PARENT_ENV = "NEURONFORGE_PARENT_PID"
PR_SET_PDEATHSIG = 1  # linux/prctl.h


def _end_group(signum, frame):
    """Our group (we lead it: a session of our own) and so every process the toolchain started."""
    if os.getpgid(0) == os.getpid():
        os.killpg(0, signal.SIGKILL)
    os._exit(128 + signum)


def end_with_parent():
    """Arm the parent-death signal if the worker asked for it; end at once if it is already gone.
    Returns whether it is armed (False off Linux, or when not started by a worker)."""
    parent = os.environ.get(PARENT_ENV, "")
    if not parent.isdigit() or not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.prctl(PR_SET_PDEATHSIG, int(signal.SIGTERM), 0, 0, 0) != 0:
            return False
    except (OSError, AttributeError):
        return False
    signal.signal(signal.SIGTERM, _end_group)
    if os.getppid() != int(parent):  # the worker died before the signal was armed
        _end_group(int(signal.SIGTERM), None)
    return True
