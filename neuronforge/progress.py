"""Heartbeats for long silent steps: a compiled graph can take tens of seconds (hours on Neuron),
loading a model in the smoke test tens of seconds; whoever reads the task log should see that the
step is alive and how long it has run, not a frozen line."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

log = logging.getLogger("neuronforge.progress")


@contextmanager
def heartbeat(what: str, every_s: float = 10.0, logger: logging.Logger | None = None) -> Iterator[None]:
    """Log `what: still running (Ns)` every `every_s` while the block runs, then its duration."""
    out = logger or log
    stop = threading.Event()
    started = time.monotonic()

    def beat() -> None:
        while not stop.wait(every_s):
            out.info("%s: still running (%.0fs)", what, time.monotonic() - started)

    thread = threading.Thread(target=beat, name=f"heartbeat:{what}", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()
        out.info("%s: done in %.1fs", what, time.monotonic() - started)
