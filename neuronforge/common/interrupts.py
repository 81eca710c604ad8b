"""SIGINT and SIGTERM: a command stops its children, unwinds (the build lease released on the way) and
ends with one line and 130 / 143, within `DEADLINE_S` of the signal whatever blocks.

Why an exception: the cleanup that matters (the lease keeper's `__exit__`, a child's process group
stopped) is in `with` blocks and `except BaseException` clauses along the stack; the signal handler
raises `Interrupted` in the main thread and the stack unwinds through them. It is a `BaseException`,
like `KeyboardInterrupt`, so that no `except Exception` on the way mistakes it for a failure of the
stage (no failure record, no retry), and a dedicated one so that SIGTERM unwinds the same way.

Why a watcher thread as well: Python runs a signal's handler only when the main thread is back in the
interpreter loop, which a C call (a store client, a tensor op) can delay. The C-level handler writes
the signal's number to a pipe (`signal.set_wakeup_fd`) at once; the watcher reads it, and if the
command has not ended `DEADLINE_S` after the first signal, or on a second one (Ctrl+C pressed again
while cleaning up), it prints the same one line, kills the children and exits at once.

Why children in their own session (`start`, `run`): a terminal's Ctrl+C goes to its whole foreground
process group; a child in ours would get it too and die in its own words (a traceback) before we
stop it. In a session of its own only we signal it: SIGTERM to its group, `GRACE_S`, then SIGKILL.

Where it is installed: the CLI's `main` (every command), and `neuronforge airflow`'s own loop keeps
its handler (`local_airflow`) with the process-group stop it shares with this module (`stop_group`).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from neuronforge.common.errors import ExitCode
from neuronforge.common.secrets import mask_credentials

GRACE_S = 0.5  # a child's group: SIGTERM, this long, then SIGKILL
DEADLINE_S = 1.8  # after the first signal, the process is gone by then whatever blocks (the promise: 2 s)
SIGNALS = (signal.SIGINT, signal.SIGTERM)
PARENT_ENV = "NEURONFORGE_PARENT_PID"  # = neuronforge_toolchain.orphan.PARENT_ENV (the two sides share no import)


class Interrupted(BaseException):
    """SIGINT or SIGTERM arrived: unwind (leases released, children stopped), exit 128 + the signal."""

    def __init__(self, signum: int) -> None:
        self.signum = signum
        super().__init__(signal.Signals(signum).name)

    @property
    def exit_code(self) -> ExitCode:
        return ExitCode(128 + self.signum)  # INTERRUPTED (SIGINT) or TERMINATED (SIGTERM)


# -- what the command is doing, for the one line -----------------------------------------------------
@dataclass
class Activity:
    """The running command, the stage it is in (the runner says), and what it has published so far
    (`publishes`: whether it is one that publishes, so that "nothing was published" is a claim it can make)."""

    what: str = ""  # what stopped, as the line says it: "`neuronforge run`", "the task"
    publishes: bool = False
    next_step: str = "run it again to build"  # said after "nothing was published"
    stage: str | None = None
    published: list[str] = field(default_factory=list)
    stage_at_signal: str | None = None  # the stage that ran when the signal came (unwinding leaves it)

    def signalled(self) -> None:
        if self.stage_at_signal is None:
            self.stage_at_signal = self.stage

    def line(self, signum: int) -> str:
        """The one line, masked (`common.secrets`): it is written from a signal's thread with
        `os.write` as well as printed, so it is masked where it is made."""
        name = signal.Signals(signum).name
        stage = self.stage_at_signal or self.stage
        where = f" during {stage}" if stage else ""
        said = f"interrupted by {name}: {self.what} stopped{where}"
        if self.published:
            said = f"{said}; already published: {', '.join(self.published)}"
        elif self.publishes:
            said = f"{said}; nothing was published ({self.next_step})"
        return mask_credentials(said)


_activity = Activity()


@contextlib.contextmanager
def stage(name: str) -> Iterator[None]:
    """Say which stage runs (the one line names it)."""
    before, _activity.stage = _activity.stage, name
    try:
        yield
    finally:
        _activity.stage = before


def note_published(what: str) -> None:
    """An artifact is in the store for readers now (its manifest written): the line says so."""
    _activity.published.append(what)


# -- children in their own session ---------------------------------------------------------------------
_children: set[subprocess.Popen] = set()
_children_lock = threading.Lock()


def start(argv: Sequence[str], **kwargs: Any) -> subprocess.Popen:
    """`subprocess.Popen` in a session (and process group) of its own, known to `stop_children`."""
    # Our pid for the toolchain child: it ends itself when we die, even by SIGKILL (`neuronforge_toolchain.orphan`).
    kwargs["env"] = {**(os.environ if kwargs.get("env") is None else kwargs["env"]), PARENT_ENV: str(os.getpid())}
    proc = subprocess.Popen(argv, start_new_session=True, **kwargs)
    with _children_lock:
        _children.add(proc)
    return proc


def stop(proc: subprocess.Popen, grace_s: float = GRACE_S) -> None:
    """Stop a child started by `start` and everything in its group: SIGTERM, `grace_s`, SIGKILL."""
    if proc.poll() is None:
        stop_group(proc.pid, grace_s, lambda: proc.poll() is not None)
    stop_group(proc.pid, 0.0)  # what it started in its group may outlive it
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=1.0)
    forget(proc)


def forget(proc: subprocess.Popen) -> None:
    with _children_lock:
        _children.discard(proc)


def stop_group(pgid: int, grace_s: float, gone=None) -> None:
    """SIGTERM to the process group `pgid`, up to `grace_s` for it to go (`gone()`), then SIGKILL."""
    if grace_s > 0:
        kill_group(pgid, signal.SIGTERM)
        deadline = time.monotonic() + grace_s
        while time.monotonic() < deadline and not (gone() if gone else not _group_alive(pgid)):
            time.sleep(0.02)
    kill_group(pgid, signal.SIGKILL)


def stop_children(grace_s: float = GRACE_S) -> None:
    """Every child `start` started that still runs, and its group."""
    with _children_lock:
        procs = list(_children)
    for proc in procs:
        stop(proc, grace_s)


def run(argv: Sequence[str], *, timeout: float | None = None, **kwargs: Any) -> subprocess.CompletedProcess:
    """`subprocess.run(argv, capture_output=True, text=True, ...)` with the child in its own session:
    an interrupt or the timeout stops its whole group (subprocess.run would kill only the child)."""
    input_ = kwargs.pop("input", None)
    kwargs.setdefault("text", True)
    proc = start(argv, stdin=subprocess.PIPE if input_ is not None else None, **_captured(kwargs))
    try:
        out, err = proc.communicate(input_, timeout=timeout)
    except BaseException:
        stop(proc)
        raise
    forget(proc)
    return subprocess.CompletedProcess(list(argv), proc.returncode, out, err)


def _captured(kwargs: dict[str, Any]) -> dict[str, Any]:
    if kwargs.pop("capture_output", True):
        kwargs.setdefault("stdout", subprocess.PIPE)
        kwargs.setdefault("stderr", subprocess.PIPE)
    return kwargs


def kill_group(pgid: int, sig: signal.Signals) -> None:
    """`sig` to a process group that may be gone already (`neuronforge airflow`'s components too)."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except (ProcessLookupError, PermissionError):
        return False
    return True


# -- the handlers ------------------------------------------------------------------------------------
class _Watcher:
    """The signal handlers of one command and the thread that enforces the deadline."""

    def __init__(self, deadline_s: float) -> None:
        self.deadline_s = deadline_s
        self.first: int | None = None  # the first signal's number
        self.said = threading.Event()  # the one line is out: nobody prints another
        self.lock = threading.Lock()
        self.read_fd, self.write_fd = os.pipe()
        os.set_blocking(self.write_fd, False)
        self.thread = threading.Thread(target=self._watch, daemon=True, name="interrupt-watcher")

    def handler(self, signum: int, frame: object) -> None:
        if self.first is None:
            self.first = signum
            _activity.signalled()
            raise Interrupted(signum)
        # a second signal: the watcher thread ends the process (it saw the byte already)

    def _watch(self) -> None:
        first_at: float | None = None
        while True:
            timeout = None if first_at is None else max(0.0, first_at + self.deadline_s - time.monotonic())
            ready = _readable(self.read_fd, timeout)
            if not ready:  # the deadline passed with the command still unwinding
                self.end_now()
                return
            data = os.read(self.read_fd, 16)
            if not data or 0 in data:  # closed, or `uninstall`'s wake-up: the command ended
                return
            if first_at is None:
                first_at = time.monotonic()
                _activity.signalled()
                if len(data) > 1:  # two signals at once: the second is a second Ctrl+C
                    self.end_now(signum=data[0])
                    return
            else:
                self.end_now()
                return

    def end_now(self, signum: int | None = None) -> None:
        """Print the line (unless it is out), kill the children, exit with the first signal's code."""
        signum = self.first or signum or signal.SIGINT
        if self.claim():
            with contextlib.suppress(OSError):
                os.write(2, (_activity.line(signum) + "\n").encode())
            for proc in list(_children):
                kill_group(proc.pid, signal.SIGKILL)
            os._exit(128 + signum)

    def claim(self) -> bool:
        """Whether the caller is the one to print the line (once: the other side is ending the process)."""
        with self.lock:
            if self.said.is_set():
                return False
            self.said.set()
            return True


def _readable(fd: int, timeout: float | None) -> bool:
    import select

    while True:
        try:
            return bool(select.select([fd], [], [], timeout)[0])
        except InterruptedError:  # pragma: no cover - PEP 475 retries select itself
            continue


@contextlib.contextmanager
def handled(command: str, *, publishes: bool = False, deadline_s: float = DEADLINE_S) -> Iterator[_Watcher | None]:
    """Turn SIGINT / SIGTERM into `Interrupted` while the body runs (main thread only; elsewhere a
    no-op), with the deadline and the second-signal exit of the watcher; `finish` ends the command."""
    global _activity
    if threading.current_thread() is not threading.main_thread():
        yield None
        return
    watcher = _Watcher(deadline_s)
    before_activity, _activity = _activity, Activity(f"`neuronforge {command}`", publishes)
    previous = {s: signal.signal(s, watcher.handler) for s in SIGNALS}
    previous_fd = signal.set_wakeup_fd(watcher.write_fd, warn_on_full_buffer=False)
    watcher.thread.start()
    try:
        yield watcher
    finally:
        for s, h in previous.items():
            signal.signal(s, h)
        signal.set_wakeup_fd(previous_fd)
        with contextlib.suppress(OSError):
            os.write(watcher.write_fd, b"\0")
        watcher.thread.join(1.0)
        for fd in (watcher.read_fd, watcher.write_fd):
            with contextlib.suppress(OSError):
                os.close(fd)
        _activity = before_activity


@contextlib.contextmanager
def raising(what: str, *, publishes: bool = False, next_step: str = "") -> Iterator[Activity]:
    """For a body whose process is someone else's (an Airflow task: the supervisor stops it with SIGINT
    or SIGTERM, and the task runner's own SIGTERM handler only calls the operator's `on_kill`, leaving
    the task running until SIGKILL 5 s later): while the body runs, SIGINT / SIGTERM call the handler
    there was (if any) and raise `Interrupted`, so the body unwinds (children stopped, the lease
    keeper left) and its caller can say so; main thread only, elsewhere a no-op. Yields what the line
    is made of (`Activity.line`)."""
    global _activity
    before_activity, _activity = _activity, Activity(what, publishes, next_step or Activity.next_step)
    if threading.current_thread() is not threading.main_thread():
        try:
            yield _activity
        finally:
            _activity = before_activity
        return
    previous = {s: signal.getsignal(s) for s in SIGNALS}

    def handler(signum: int, frame: Any) -> None:
        chained = previous.get(signal.Signals(signum))
        if callable(chained):
            chained(signum, frame)
        _activity.signalled()
        raise Interrupted(signum)

    for s in SIGNALS:
        signal.signal(s, handler)
    try:
        yield _activity
    finally:
        for s, h in previous.items():
            signal.signal(s, h if h is not None else signal.SIG_DFL)
        _activity = before_activity


def finish(watcher: _Watcher | None, exc: Interrupted, *, exit_process: bool = False) -> None:
    """After the body unwound from `exc`: stop the children left, print the one line (the caller
    returns `exc.exit_code`).
    `exit_process` (the process's own entry point): end the process here, once stdout and stderr are
    flushed — the interpreter's teardown of what the command imported (torch's C++ objects) can take
    seconds more, and the promise is the 2 s from the signal to the exit."""
    stop_children()
    if watcher is not None and not watcher.claim():  # the watcher is ending the process with the line
        time.sleep(DEADLINE_S * 3)
    print(_activity.line(exc.signum), file=sys.stderr, flush=True)
    if exit_process:
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):
                stream.flush()
        os._exit(exc.exit_code)
