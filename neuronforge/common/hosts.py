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

from neuronforge.common.stored_numbers import finite


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


def _seconds(value: Any) -> float | None:
    """A duration as `host_report` records it (a finite number >= 0), else None."""
    return finite(value, minimum=0)


def neuron_share(report: dict[str, Any] | None) -> float | None:
    """Neuron-host seconds over all seconds of a report (None: nothing recorded, or not as numbers)."""
    if not isinstance(report, dict):
        return None
    cpu, neuron = _seconds(report.get("cpu_seconds", 0)), _seconds(report.get("neuron_seconds", 0))
    if cpu is None or neuron is None or not cpu + neuron:
        return None
    return neuron / (cpu + neuron)


def describe(report: dict[str, Any] | None) -> list[str]:
    """Lines for people (`neuronforge show`, the catalog page): the seconds per kind of host, then
    each stage with where it ran. Empty for a manifest written before hosts were recorded, or one
    whose report is not what `host_report` writes (a manifest is read as the store holds it)."""
    if not isinstance(report, dict) or not isinstance(report.get("stages"), list):
        return []
    cpu, neuron = _seconds(report.get("cpu_seconds")), _seconds(report.get("neuron_seconds"))
    runs = [r for r in report["stages"] if isinstance(r, dict) and r.get("stage")]
    stages = [(r, s) for r in runs if (s := _seconds(r.get("seconds"))) is not None]
    if cpu is None or neuron is None or not stages:
        return []
    share = neuron_share(report)
    lines = [
        f"CPU hosts {cpu:.1f}s, Neuron hosts {neuron:.1f}s"
        + (f" ({share:.0%} of the build on a Neuron host)" if share is not None else "")
    ]
    lines.append(", ".join(f"{r['stage']} {s:.1f}s ({r.get('host', '?')})" for r, s in stages))
    return lines
