"""Where a build's stages ran: the manifest's `hosts` part, as `common.hosts.host_report` writes it —
every stage with its seconds and the kind of host (`cpu`, `neuron`), and the seconds per kind. What
`show` and the catalog's artifact page print, the farm index's cpu/Neuron seconds, and which host a
channel's build was smoke-tested on all read it here, typed.

Tolerant as a shown part is (`parts`): a stage entry that is not one is left out, a seconds value that
is not a number reads as unknown, and a report of another shape reads as an empty one.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BeforeValidator

from neuronforge.records.parts import Part, Seconds, Text, WrittenPart, or_default

KnownSeconds = Annotated[Seconds | None, or_default(lambda: None)]


class StageHost(Part):
    stage: Text = ""
    seconds: KnownSeconds = None
    host: Text = ""  # "cpu" | "neuron"
    hostname: Text = ""


def _stage_entries(value: Any) -> Any:
    """The entries that are stages (an object naming its stage); anything else in the list is dropped."""
    if not isinstance(value, list):
        return None
    return [v for v in value if isinstance(v, dict) and isinstance(v.get("stage"), str) and v["stage"]]


class HostsReport(WrittenPart):
    stages: Annotated[list[StageHost] | None, BeforeValidator(_stage_entries), or_default(lambda: None)] = None
    cpu_seconds: KnownSeconds = None
    neuron_seconds: KnownSeconds = None

    @property
    def neuron_share(self) -> float | None:
        """Neuron-host seconds over all seconds (None: nothing recorded, or not as numbers)."""
        cpu, neuron = self.cpu_seconds, self.neuron_seconds
        if cpu is None or neuron is None or not cpu + neuron:
            return None
        return neuron / (cpu + neuron)

    def hostnames(self, stage: str) -> list[str]:
        """The hosts `stage` ran on, in order (a retried stage ran more than once)."""
        return [s.hostname for s in self.stages or [] if s.stage == stage]

    def describe(self) -> list[str]:
        """Lines for people (`neuronforge show`, the catalog page): the seconds per kind of host, then
        each stage with where it ran. Empty for a manifest written before hosts were recorded."""
        stages = [s for s in self.stages or [] if s.seconds is not None]
        if self.cpu_seconds is None or self.neuron_seconds is None or not stages:
            return []
        share = self.neuron_share
        return [
            f"CPU hosts {self.cpu_seconds:.1f}s, Neuron hosts {self.neuron_seconds:.1f}s"
            + (f" ({share:.0%} of the build on a Neuron host)" if share is not None else ""),
            ", ".join(f"{s.stage} {s.seconds:.1f}s ({s.host or '?'})" for s in stages),
        ]


HostsPart = Annotated[HostsReport, or_default(HostsReport)]
