"""Where each stage of a build ran, and for how long: what the build cost in CPU-host and
Neuron-host seconds.

A Neuron host (inf2/trn1/trn2) costs many times a CPU host per hour, and a compile takes hours. The
pipeline places a stage on a Neuron host only when it needs NeuronCores (the profile's
`device_stages`: the smoke load; compiling only where the toolchain cannot compile without a device).
Each stage's run is recorded as it ends — its seconds and the kind of host its placement is (`cpu` or
`neuron`) — in the build state, and the manifest keeps the report (`hosts`), which `neuronforge show`
and the catalog page display.
"""

from __future__ import annotations

import socket
from typing import Any

from pydantic import BaseModel


class StageRun(BaseModel):
    """One stage of one build: how long it ran and on what kind of host."""

    stage: str
    seconds: float
    host: str  # "cpu" | "neuron"
    hostname: str = ""

    @classmethod
    def now(cls, stage: str, seconds: float, host: str) -> StageRun:
        return cls(stage=stage, seconds=round(seconds, 3), host=host, hostname=socket.gethostname())


def host_report(runs: list[StageRun]) -> dict[str, Any]:
    """The manifest's `hosts`: every stage run, and the seconds per kind of host."""
    totals = {"cpu": 0.0, "neuron": 0.0}
    for r in runs:
        totals[r.host] = totals.get(r.host, 0.0) + r.seconds
    return {
        "stages": [r.model_dump() for r in runs],
        "cpu_seconds": round(totals["cpu"], 3),
        "neuron_seconds": round(totals["neuron"], 3),
    }
