"""How one candidate is tried: compiled and loaded in a separate process, as the document requires
(the Neuron runtime releases devices only when its process ends).

- `CommandTrial`: `--try-command CMD` gets the candidate as one JSON object on stdin
  (`{"model", "instance_type", "tensor_parallel_size", "batch_size", "sequence_length"}`) and exits
  0 when it compiles and loads; what tests and benchmarks use. Its record says what the command
  said (its exit code and last line), not that anything compiled.
- `PipelineTrial`: an ordinary build of the pipeline (same cache key, same publish, smoke test in a
  child process), so a sweep leaves the compile cache warm and the artifacts published.
"""

from __future__ import annotations

import json
import shlex
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from neuronforge.artifacts.leases import LeaseLost
from neuronforge.common import interrupts
from neuronforge.common.errors import InvalidInput, NeuronforgeError, ServiceUnreachable, StoreError
from neuronforge.farm.sweep.space import Candidate

if TYPE_CHECKING:
    from neuronforge.stores import ArtifactStore


@dataclass
class TrialResult:
    ok: bool
    message: str
    seconds: float


class Trial(Protocol):
    def __call__(self, candidate: Candidate) -> TrialResult: ...


@dataclass
class CommandTrial:
    command: str
    model: str  # the --model value as given
    instance_type: str

    def __post_init__(self) -> None:
        try:
            self.argv = shlex.split(self.command)
        except ValueError as exc:
            raise InvalidInput(f"--try-command {self.command!r} cannot be split into arguments ({exc})") from None
        if not self.argv:
            raise InvalidInput("--try-command is empty")

    def __call__(self, candidate: Candidate) -> TrialResult:
        payload = {"model": self.model, "instance_type": self.instance_type, **candidate.to_json()}
        started = time.monotonic()
        try:
            done = interrupts.run(self.argv, input=json.dumps(payload))  # its own session: stopped on an interrupt
        except OSError as exc:
            raise InvalidInput(f"--try-command {self.argv[0]!r} cannot be run: {exc.strerror}") from None
        seconds = time.monotonic() - started
        # What the command said it did, never what neuronforge supposes (it may compile nothing at all):
        # its exit code and its last line, stdout's when it succeeded, stderr's when it failed.
        said = (done.stdout.strip() or done.stderr.strip()) if done.returncode == 0 else None
        said = said if said is not None else (done.stderr.strip() or done.stdout.strip())
        tail = said.splitlines()[-1:] or [""]
        return TrialResult(done.returncode == 0, f"exit {done.returncode}: {tail[0][:500]}".rstrip(": "), seconds)


# Failures that say nothing of a candidate: a store or the Hub unreachable, a build lease lost.
ENVIRONMENT: tuple[type[Exception], ...] = (StoreError, ServiceUnreachable, LeaseLost)


@dataclass
class PipelineTrial:
    """A candidate tried as an ordinary build of the pipeline, into `store`: opened once by the edge
    that runs the sweep (the CLI's `opened_store`, a DAG task's hook with its deployment's identity)."""

    model: str
    instance_type: str
    profile: str
    store: ArtifactStore
    work_dir: Path
    dtype: str = "bf16"

    def __call__(self, candidate: Candidate) -> TrialResult:
        from neuronforge.pipeline.runner import run_target
        from neuronforge.spec.target import TargetSpec

        started = time.monotonic()
        try:
            target = TargetSpec.parse(
                {
                    "instance_type": self.instance_type,
                    "tp_degree": candidate.tensor_parallel_size,
                    "batch_size": candidate.batch_size,
                    "sequence_length": candidate.sequence_length,
                    "dtype": self.dtype,
                    "profile": self.profile,
                }
            )
            outcome = run_target(self.model, target, self.store, self.work_dir)
        except ENVIRONMENT:
            # The store or the Hub failed, not the candidate: recorded as "failed" it would never be
            # tried again, and the sweep would report a result it does not have. The sweep stops.
            raise
        except NeuronforgeError as exc:  # refused, failed to compile, failed the smoke load
            return TrialResult(False, str(exc).splitlines()[0][:500], time.monotonic() - started)
        return TrialResult(True, f"{outcome.status}: {outcome.published.manifest_uri}", time.monotonic() - started)
