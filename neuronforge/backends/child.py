"""Run a toolchain step in a fresh child process, with a timeout, streaming its log.

Why a child: the Neuron runtime keeps the NeuronCores it opened until its process exits, and a
compiler crash or host OOM must not take the Airflow task process down with it. The child's
output is relayed line by line into our log, prefixed with the elapsed time, so a long compile
shows progress (the current graph / bucket, as the toolchain prints it) in the task log.
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import threading
import time
from collections import deque
from pathlib import Path

from neuronforge.errors import NeuronforgeError

log = logging.getLogger(__name__)


class ChildFailed(NeuronforgeError):
    """The child process exited non-zero or ran out of time; `tail` holds its last output lines."""

    def __init__(self, message: str, tail: list[str]) -> None:
        super().__init__(message + ("\n" + "\n".join(tail) if tail else ""))
        self.tail = tail


def run_child(
    module: str,
    args: list[str],
    *,
    env: dict[str, str] | None = None,
    timeout_s: float,
    what: str,
    cwd: Path | None = None,
) -> list[str]:
    """`python -m module args…` in a new process group; returns its output lines."""
    started = time.monotonic()
    proc = subprocess.Popen(
        [sys.executable, "-m", module, *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, **(env or {})},
        cwd=cwd,
        start_new_session=True,  # so a timeout kills the compiler's own children too
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
        os.killpg(proc.pid, 9)
        proc.wait()
        reader.join(5)
        raise ChildFailed(f"{what} did not finish within {timeout_s:.0f}s; killed", list(tail)) from None
    reader.join(5)
    if rc != 0:
        raise ChildFailed(f"{what} failed (exit {rc}) after {time.monotonic() - started:.0f}s", list(tail))
    return lines


RESULT = "RESULT "


def report_generations(generate, prompt_ids: list[list[int]], max_new_tokens: int, load_s: float) -> None:
    """In a toolchain child: greedily generate for each prompt with `generate` (transformers'
    `generate(input_ids, attention_mask=…, max_new_tokens=…, do_sample=False)` signature, which both
    optimum-neuron models and NxD's HuggingFaceGenerationAdapter have) and print one RESULT line each."""
    import json

    import torch

    for ids in prompt_ids:
        started = time.perf_counter()
        out = generate(
            torch.tensor([ids]),
            attention_mask=torch.ones(1, len(ids), dtype=torch.long),
            max_new_tokens=max_new_tokens,
            do_sample=False,
        )
        seconds = time.perf_counter() - started
        tokens = out[0, len(ids) :].tolist()
        print(RESULT + json.dumps({"tokens": tokens, "load_s": load_s, "seconds": seconds}), flush=True)


def generation_results(lines: list[str]) -> list[dict]:
    """The parent's side of `report_generations`: the RESULT lines of the child's output."""
    import json

    return [json.loads(line.removeprefix(RESULT)) for line in lines if line.startswith(RESULT)]


def child_entry(actions: dict, argv: list[str]) -> int:
    """`python -m <backend module> ACTION SPEC.json` in a toolchain child: run ACTION on the spec."""
    import json

    action, spec_path = argv
    actions[action](json.loads(Path(spec_path).read_text()))
    return 0


def generation_rows(prompt_ids: list[list[int]], results: list[dict]) -> dict:
    """A Neuron child's results in the shape the smoke judge reads (tokens only, no logits)."""
    rows = [
        {"prompt_ids": ids, "tokens": r["tokens"], "ttft": None, "tpot": r["seconds"] / max(1, len(r["tokens"]))}
        for ids, r in zip(prompt_ids, results, strict=True)
    ]
    return {"load_s": results[0]["load_s"] if results else None, "rows": rows}


def cache_graphs(use) -> list[dict]:
    """One record per persistent-cache entry a Neuron compile used (graph = cache entry)."""
    return [{"name": n, "entry": n, "cached": n not in use.created, "seconds": None} for n in use.used]


def copy_served_files(checkpoint: Path, out: Path) -> None:
    """The checkpoint's `config.json` and tokenizer into a build, for loaders that read them from the
    compiled folder (vLLM, the HF generation adapter, LMI's split model)."""
    import shutil

    from neuronforge.backends.cpu import TOKENIZER_FILES

    for name in ("config.json", *TOKENIZER_FILES):
        if (checkpoint / name).exists():
            shutil.copyfile(checkpoint / name, out / name)
