"""What a stage is: its declaration (`Stage`: name, the `BuildState` fields it reads and writes,
where it runs) and where it runs (`Context`). Each stage module of `neuronforge.pipeline.stages`
declares its own `STAGE` next to its adapter; `neuronforge.pipeline.runner` lists them and runs them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from neuronforge.artifacts.hub_registry import ConnectionReader
    from neuronforge.artifacts.leases import LeaseKeeper
    from neuronforge.artifacts.published import Published
    from neuronforge.pipeline.buildstate import BuildState
    from neuronforge.stores import ArtifactStore


@dataclass
class Context:
    """Where a stage runs: the store (shared by every host) and this host's work dir."""

    store: ArtifactStore
    work_dir: Path
    keeper: LeaseKeeper | None = None  # the lease's heartbeat (`leases.keeping`), checked before publishing
    run_id: str = ""  # the Airflow run, for failure records
    stage_started: float | None = None  # monotonic start of the running stage (`execute` sets it)
    # The artifact a lookup of this build found (prepare's, or the claim's wait): the CLI's outcome,
    # without reading the index again.
    published: Published | None = None
    # Reads a named connection's Hub credentials (the Airflow layer passes its connections; None: the
    # environment's HF_ENDPOINT / HF_TOKEN): a token never travels in the build state.
    connections: ConnectionReader | None = None


@dataclass(frozen=True)
class Stage:
    """One stage and what it needs from where it runs (the DAG turns this into task settings).

    `reads` are the `BuildState` fields it cannot run without (the runner refuses to start it when
    one is missing, naming the stage and the field); `writes` the ones it always sets (checked after
    it ran). A field a stage reads or writes only sometimes (quantize's `quantized`) is in neither."""

    name: str  # the task id in the DAG
    run: Callable[[BuildState, Context], BuildState] | None  # None: the claim (CLI/DAG specific)
    doc: str
    # What it needs of its host, placed by the target's profile (`ServingProfile.placement`):
    # "toolchain" | "compile" | "smoke"; None: any worker.
    kind: str | None = None
    holds_lease: bool = True  # runs under the target's compile lease (heart-beats it)
    skip_on_hit: bool = True  # a cache hit passes through it untouched
    final: bool = False  # ends the build: its result is the artifact, and the lease is released after it
    reads: tuple[str, ...] = ()
    writes: tuple[str, ...] = ()
