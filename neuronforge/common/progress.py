"""Progress of long steps, one interface for every stage: downloads and uploads, quantization, a
compiled graph (tens of seconds here, hours on Neuron), the smoke test's model load. Whoever waits
should see that the step is alive, how far it got and how long it has run, never a frozen line.

Stage code only calls `step(what, total=...)` and, for work it can count (bytes, tensors),
`advance(n)` on what it yields. How that is shown is chosen once, at the edge (`use`):

- `RichReporter`: the CLI on a terminal. A rich progress display on stderr: a bar with bytes/s and
  the time left for transfers of known size, a spinner with the elapsed time for the others; a
  one-line summary per finished step stays on screen.
- `LogReporter` (the default): Airflow task logs, pipes, `--json`, `--quiet`. A one-line heartbeat
  through `logging` every `NEURONFORGE_HEARTBEAT_S` seconds (default 10) while a step runs, with
  the bytes and rate when it counts them, then its duration. Nothing is ever written to stdout.
  Its level is INFO (what a task log shows), or `HEARTBEAT` for the CLI with stderr not a terminal:
  a level of its own, between INFO and WARNING, that the CLI shows by default, so that a pipe, a
  CI log or `2> err.log` sees the step alive without every INFO line of `-v`. The end of a step
  that ended before its first heartbeat, or was interrupted (the CLI's one line says so), is logged
  at INFO only: a pipe hears of long steps alone.

rich is imported only when a reporter needs it, never when this module is imported (DAG files and
operators import the stages at parse time).
"""

from __future__ import annotations

import logging
import os
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import IO, Any

from neuronforge.common import settings
from neuronforge.common.secrets import mask_credentials

log = logging.getLogger("neuronforge.common.progress")

HEARTBEAT = logging.INFO + 5
"""The level of the CLI's heartbeat lines when stderr is not a terminal: above INFO, so the CLI's
default level (`HEARTBEAT`) shows them and not the INFO lines `-v` adds; below WARNING, so `-q`
(ERROR) silences them."""
logging.addLevelName(HEARTBEAT, "PROGRESS")

INTERVAL_ENV = settings.variable("heartbeat_s")  # NEURONFORGE_HEARTBEAT_S


def interval_s() -> float:
    """Seconds between two heartbeats: `NEURONFORGE_HEARTBEAT_S`, default 10 (a bad value: InvalidInput)."""
    return settings.current().heartbeat_s


class Step:
    """What a running step counts: `advance(n)` adds `n` units (bytes, tensors) done. Thread-safe:
    transfer threads call it concurrently."""

    def __init__(self, what: str, total: int | None, unit: str) -> None:
        self.what, self.total, self.unit = what, total, unit
        self.started = time.monotonic()
        self.done = 0
        self.last_note = ""
        self._lock = threading.Lock()

    def advance(self, n: int = 1) -> None:
        with self._lock:
            self.done += n

    def note(self, text: str) -> None:
        """What the step is doing now (a sub-step: the task an Airflow run is in). Shown at once."""
        self.last_note = text

    @property
    def elapsed(self) -> float:
        return time.monotonic() - self.started


def _amount(n: float, unit: str) -> str:
    if unit == "B":
        from rich.filesize import decimal  # a small pure function; rich/__init__ is light

        return decimal(int(n))
    return f"{int(n)} {unit}"


def describe(step: Step) -> str:
    """`what: 12.6 MB of 40.0 MB (31%), 4.2 MB/s, about 7s left (3s)`, or `what: still running (3s)`."""
    elapsed = step.elapsed
    if step.total is None and not step.done:
        return f"{step.what}: still running ({elapsed:.0f}s)"
    if step.unit == "B":
        text = f"{step.what}: {_amount(step.done, 'B')}"
        text += f" of {_amount(step.total, 'B')}" if step.total else ""
    else:
        text = f"{step.what}: {step.done}" + (f" of {step.total}" if step.total else "") + f" {step.unit}"
    if step.total:
        text += f" ({100 * step.done / step.total:.0f}%)"
    rate = step.done / elapsed if elapsed > 0 else 0.0
    if rate > 0:
        text += f", {_amount(rate, step.unit)}/s"
        if step.total and step.total > step.done:
            text += f", about {(step.total - step.done) / rate:.0f}s left"
    return f"{text} ({elapsed:.0f}s)"


class Reporter:
    """Shows steps. Subclasses implement `step`; stage code reaches the chosen one through the
    module-level `step()`. `terminal`: whether it draws on a terminal, where a library's own bars
    (huggingface_hub's) may draw too; elsewhere they are turned off (`\r` bars garble a log)."""

    terminal = False

    @contextmanager
    def step(
        self,
        what: str,
        total: int | None = None,
        unit: str = "B",
        logger: logging.Logger | None = None,
        own_bars: bool = False,
    ) -> Iterator[Step]:
        yield Step(what, total, unit)


class LogReporter(Reporter):
    """A heartbeat line through `logging` at `level` every `every_s` while a step runs, then its duration."""

    def __init__(self, every_s: float | None = None, level: int = logging.INFO) -> None:
        self.every_s = every_s
        self.level = level

    @contextmanager
    def step(
        self,
        what: str,
        total: int | None = None,
        unit: str = "B",
        logger: logging.Logger | None = None,
        own_bars: bool = False,
    ) -> Iterator[Step]:
        out = logger or log
        every = self.every_s or interval_s()
        level = self.level
        current = _LogStep(what, total, unit, out, level)
        stop = threading.Event()
        beats = 0

        def beat() -> None:
            nonlocal beats
            while not stop.wait(every):
                beats += 1
                out.log(level, "%s", describe(current))

        thread = threading.Thread(target=beat, name=f"heartbeat:{what}", daemon=True)
        thread.start()
        ok = interrupted = False
        try:
            yield current
            ok = True
        except Exception:
            raise
        except BaseException:  # an interrupt (SIGINT/SIGTERM): its own one line says what stopped
            interrupted = True
            raise
        finally:
            stop.set()
            thread.join()
            moved = f", {_amount(current.done, unit)}" if current.done and unit == "B" else ""
            # the end of a step that beat is news at its level; a short one's end, or an interrupted
            # one's, only at INFO (-v, task logs)
            end = level if beats and not interrupted else min(level, logging.INFO)
            out.log(end, "%s: %s in %.1fs%s", what, "done" if ok else "failed", current.elapsed, moved)


class _LogStep(Step):
    def __init__(self, what: str, total: int | None, unit: str, out: logging.Logger, level: int) -> None:
        super().__init__(what, total, unit)
        self._out, self._level = out, level

    def note(self, text: str) -> None:
        super().note(text)
        self._out.log(self._level, "%s: %s", self.what, text)


class RichReporter(Reporter):
    """A live rich progress display on a terminal (stderr): one line per running step."""

    terminal = True

    def __init__(self, console: Any = None) -> None:
        from rich.console import Console

        self.console = console or Console(stderr=True)
        self._progress: Any = None
        self._active = 0
        self._lock = threading.Lock()

    def _start(self) -> Any:
        from rich.progress import BarColumn, Progress, SpinnerColumn, TextColumn
        from rich.table import Column

        progress = Progress(
            SpinnerColumn(),
            # one line per step, however long the path in it: cut with an ellipsis, never markup
            TextColumn("{task.description}", markup=False, table_column=Column(no_wrap=True, overflow="ellipsis")),
            BarColumn(bar_width=30),
            _detail_column()(),
            console=self.console,
            transient=True,  # finished steps leave their one-line summary, not a frozen bar
            redirect_stdout=False,  # stdout is the command's result (JSON): never touched
            redirect_stderr=True,  # log warnings print above the display
        )
        progress.start()
        return progress

    @contextmanager
    def step(
        self,
        what: str,
        total: int | None = None,
        unit: str = "B",
        logger: logging.Logger | None = None,
        own_bars: bool = False,
    ) -> Iterator[Step]:
        if own_bars:  # the library draws its own bars on the terminal: only the summary line here
            plain = Step(what, total, unit)
            yield plain
            self._summary(True, what, f"{plain.elapsed:.1f}s")
            return
        with self._lock:
            if self._progress is None:
                self._progress = self._start()
            progress = self._progress
            task = progress.add_task(what, total=total, unit=unit)
            self._active += 1
        current = _RichStep(what, total, unit, progress, task)
        ok = False
        try:
            yield current
            ok = True
        finally:
            with self._lock:
                progress.remove_task(task)
                self._active -= 1
                if self._active == 0:
                    progress.stop()
                    self._progress = None
            moved = f", {_amount(current.done, unit)}" if current.done and unit == "B" else ""
            self._summary(ok, what, f"{current.elapsed:.1f}s{moved}")

    def _summary(self, ok: bool, what: str, detail: str) -> None:
        """The line a finished step leaves: `✓ what (12.3s, 40.0 MB)` (`✗` when it raised)."""
        from rich.text import Text

        line = Text.assemble(("✓ " if ok else "✗ ", "green" if ok else "red"), what, (f" ({detail})", "dim"))
        self.console.print(line, highlight=False)


class _RichStep(Step):
    def __init__(self, what: str, total: int | None, unit: str, progress: Any, task: Any) -> None:
        super().__init__(what, total, unit)
        self._progress, self._task = progress, task

    def advance(self, n: int = 1) -> None:
        super().advance(n)
        self._progress.advance(self._task, n)

    def note(self, text: str) -> None:
        super().note(text)
        self._progress.update(self._task, description=f"{self.what}: {text}")


def _detail_column() -> type:
    """The last column's class (defined here: rich is imported when a display starts, not before)."""
    from rich.progress import (
        DownloadColumn,
        ProgressColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
        TransferSpeedColumn,
    )
    from rich.text import Text

    class Detail(ProgressColumn):
        """Bytes, bytes/s and the time left for a transfer of known size; count and time left for
        counted work; the elapsed time for the rest."""

        def __init__(self) -> None:
            super().__init__()
            self.size, self.speed = DownloadColumn(), TransferSpeedColumn()
            self.left, self.elapsed = TimeRemainingColumn(), TimeElapsedColumn()

        def render(self, task: Any) -> Text:
            if task.total is None:
                if task.fields.get("unit") == "B" and task.completed:
                    return Text(" ").join(
                        [Text(_amount(task.completed, "B")), self.speed.render(task), self.elapsed.render(task)]
                    )
                return self.elapsed.render(task)
            if task.fields.get("unit") == "B":
                parts = [self.size.render(task), self.speed.render(task), self.left.render(task)]
            else:
                count = Text(f"{int(task.completed)}/{int(task.total)} {task.fields.get('unit', '')}")
                parts = [count, self.left.render(task)]
            return Text(" ").join(parts)

    return Detail


class StderrHandler(logging.StreamHandler):
    """A log handler writing to whatever `sys.stderr` is when a record is emitted: while rich's
    display runs, that is rich's proxy, which prints the line above the display instead of through it."""

    def __init__(self) -> None:
        super().__init__(sys.stderr)

    @property  # type: ignore[override]
    def stream(self) -> IO[str]:
        return sys.stderr

    @stream.setter
    def stream(self, value: IO[str]) -> None:  # StreamHandler sets it; the current stderr wins
        pass


_current: Reporter = LogReporter()


def use(reporter: Reporter) -> Reporter:
    """Make `reporter` the one every step reports to (the edge calls this once); returns the old one."""
    global _current
    old, _current = _current, reporter
    return old


def current() -> Reporter:
    return _current


def choose(*, quiet: bool = False, machine: bool = False, stream: IO[str] | None = None) -> Reporter:
    """The CLI's reporter, chosen by what stderr is. A terminal: rich's display, or nothing with
    `--json` (`machine`: the JSON on the same screen stays readable). Anything else (a pipe, a file, a
    CI log, a dumb terminal): heartbeat lines at `HEARTBEAT`, shown at the default verbosity.
    `--quiet`: lines at INFO, which its level (ERROR) hides."""
    if quiet:
        return LogReporter()
    from rich.console import Console

    console = Console(stderr=True, file=stream) if stream is not None else Console(stderr=True)
    if console.is_terminal and not console.is_dumb_terminal:
        return LogReporter() if machine else RichReporter(console)
    return LogReporter(level=HEARTBEAT)


def for_cli(*, quiet: bool, machine: bool) -> Reporter:
    """`choose`, and huggingface_hub's own bars off where they would not draw on a terminal. A bad
    `NEURONFORGE_HEARTBEAT_S` is refused here, before any work."""
    interval_s()
    reporter = choose(quiet=quiet, machine=machine)
    if not reporter.terminal:
        os.environ["HF_HUB_DISABLE_PROGRESS_BARS"] = "1"  # read when huggingface_hub is imported (later)
    return reporter


def step(
    what: str,
    total: int | None = None,
    unit: str = "B",
    logger: logging.Logger | None = None,
    own_bars: bool = False,
) -> AbstractContextManager[Step]:
    """Report a long step to the chosen reporter: `with step("compiling graph x"): ...`, or with a
    known size `with step("uploading", total=n) as s: ... s.advance(k)`. `own_bars`: the work draws
    its own progress bars (huggingface_hub downloads); on a terminal only the summary is added.
    `what` is shown masked (`common.secrets`): a display's line is no log record, which `mask_logs` masks."""
    what = mask_credentials(what)
    return _current.step(what, total=total, unit=unit, logger=logger, own_bars=own_bars)


def heartbeat(what: str, logger: logging.Logger | None = None) -> AbstractContextManager[Step]:
    """A step with nothing to count (a compile, a model load): a spinner, or log heartbeats."""
    return step(what, logger=logger)
