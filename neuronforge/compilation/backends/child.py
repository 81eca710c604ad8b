"""Run a toolchain step in a fresh child process, with a timeout, streaming its log.

Why a child: the Neuron runtime keeps the NeuronCores it opened until its process exits, and a
compiler crash or host OOM must not take the Airflow task process down with it. The child's
output is relayed line by line into our log, prefixed with the elapsed time, so a long compile
shows progress (the current graph / bucket, as the toolchain prints it) in the task log.
"""

from __future__ import annotations

import logging
import subprocess
import threading
import time
from collections import deque
from pathlib import Path

from neuronforge.common import interrupts
from neuronforge.common.errors import NeuronforgeError

log = logging.getLogger(__name__)


class ChildFailed(NeuronforgeError):
    """The child process exited non-zero or ran out of time; `tail` holds its last output lines (the
    message's), `output` every line it wrote when the caller has them (what a re-trace reads its keys
    from: a trace logs one line per graph before it fails)."""

    def __init__(self, message: str, tail: list[str], output: list[str] | None = None) -> None:
        super().__init__(message + ("\n" + "\n".join(tail) if tail else ""))
        self.tail = tail
        self.output = list(tail) if output is None else output


# The tokenizer files a served model folder carries beside its weights (every backend copies them).
TOKENIZER_FILES = (
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "tokenizer.model",
    "generation_config.json",
)


def run_process(
    argv: list[str],
    *,
    env: dict[str, str],
    timeout_s: float,
    what: str,
    cwd: Path | None = None,
) -> tuple[int, list[str]]:
    """`argv` in a session of its own with exactly `env`; returns (exit status, output lines).
    A timeout kills the whole group (the compiler's own children too) and raises ChildFailed; an
    interrupt (`interrupts.Interrupted`) stops the group (SIGTERM, a short grace, SIGKILL) on its way up."""
    started = time.monotonic()
    proc = interrupts.start(
        argv,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        errors="replace",
        env=env,
        cwd=cwd,
    )
    lines: list[str] = []
    tail: deque[str] = deque(maxlen=20)

    def relay() -> None:
        assert proc.stdout is not None
        for raw in proc.stdout:
            line = raw.rstrip("\n")
            lines.append(line)
            tail.append(line)
            log.info("[%s +%.0fs] %s", what, time.monotonic() - started, line)

    reader = threading.Thread(target=relay, daemon=True)
    reader.start()
    try:
        rc = proc.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        interrupts.stop(proc, grace_s=0)
        reader.join(5)
        raise ChildFailed(f"{what} did not finish within {timeout_s:.0f}s; killed", list(tail)) from None
    except BaseException:  # interrupted: the child's group goes with us (it is in a session of its own)
        interrupts.stop(proc)
        raise
    interrupts.forget(proc)
    reader.join(5)
    return rc, lines


def generation_rows(results: dict) -> dict:
    """A toolchain's `generate` result in the shape the smoke judge reads (tokens only, no logits; the
    measurement's raw samples as the toolchain returned them)."""
    rows = [
        {
            "prompt_ids": r["prompt_ids"],
            "tokens": r["tokens"],
            "ttft": None,
            "tpot": r["seconds"] / max(1, len(r["tokens"])),
        }
        for r in results["rows"]
    ]
    return {"load_s": results.get("load_s"), "rows": rows, "measurement": results.get("measurement")}


def cache_graphs(use) -> list[dict]:
    """One record per persistent-cache entry a Neuron compile used (graph = cache entry)."""
    return [{"name": n, "entry": n, "cached": n not in use.created, "seconds": None} for n in use.used]


def copy_served_files(checkpoint: Path, out: Path, *, config: bool = True) -> None:
    """The checkpoint's tokenizer (and `config.json`) into a build, for loaders that read them from
    the compiled folder (vLLM, the HF generation adapter, LMI's split model, optimum-cli)."""
    import shutil

    for name in (*(("config.json",) if config else ()), *TOKENIZER_FILES):
        if (checkpoint / name).exists():
            shutil.copyfile(checkpoint / name, out / name)
