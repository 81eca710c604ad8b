"""Each task's wall seconds per worker, as Airflow itself recorded them: the deployment test's
measurement of where a build's seconds go (bench/neuron_host_time.py reads it).

A `StageTime` is one task instance as the api-server's REST API returns it
(`/api/v2/dags/{dag_id}/dagRuns/{run_id}/taskInstances`): its queue, the worker that ran it (its
`hostname`: each worker of the deployment names itself, `nf_deploy_hostname`) and its duration, which
Airflow measures from the task's start to its end on that worker — task start-up included, as a host
pays it. The scenario that places compile and smoke on different workers writes its runs' records to
the file named by `NF_DEPLOY_STAGE_TIMES` (unset in CI), one JSON document:

    {"schema": 1, "neuron_hosts": ["nf-neuron"],
     "runs": [{"label": "placed", "dag_id": ..., "run_id": ..., "wall_s": ..., "builds": [profile, ...],
               "tasks": [{"task_id": ..., "map_index": ..., "queue": ..., "hostname": ..., "duration_s": ...,
                          "start_date": ..., "end_date": ..., "state": ...}, ...]}, ...]}

`builds[i]` names the target of map index i (its profile); `neuron_hosts` are the workers with
Neuron devices (every other worker is a CPU host).
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

SCHEMA = 1
ENV = "NF_DEPLOY_STAGE_TIMES"  # a path: write the scenario's records there (the bench sets it)


@dataclass(frozen=True)
class StageTime:
    """One task instance: where it ran and for how long (seconds, Airflow's own `duration`)."""

    task_id: str
    map_index: int
    queue: str
    hostname: str
    duration_s: float
    start_date: str
    end_date: str
    state: str

    @classmethod
    def from_ti(cls, ti: dict[str, Any]) -> StageTime:
        return cls(
            task_id=ti["task_id"],
            map_index=int(ti["map_index"]),
            queue=ti.get("queue") or "",
            hostname=ti.get("hostname") or "",
            duration_s=float(ti.get("duration") or 0.0),
            start_date=ti.get("start_date") or "",
            end_date=ti.get("end_date") or "",
            state=ti.get("state") or "",
        )

    @property
    def group(self) -> str:
        """The task group (`neuron_2_26_1_target`), or "" for a run-level task (`expand_targets`)."""
        return self.task_id.rpartition(".")[0]

    @property
    def stage(self) -> str:
        return self.task_id.rpartition(".")[2]


@dataclass(frozen=True)
class RunTimes:
    """One DAG run's task instances that ran (skipped ones have no worker and no seconds)."""

    label: str  # what the run stands for: "placed", "baseline", …
    dag_id: str
    run_id: str
    wall_s: float  # the run's start to its end, as Airflow recorded them
    tasks: tuple[StageTime, ...] = field(default_factory=tuple)
    builds: tuple[str, ...] = ()  # what map index i builds (its target's profile)

    @classmethod
    def from_api(
        cls, label: str, run: dict[str, Any], tis: list[dict[str, Any]], builds: tuple[str, ...] = ()
    ) -> RunTimes:
        ran = [StageTime.from_ti(ti) for ti in tis if ti.get("hostname") and ti.get("state") == "success"]
        ran.sort(key=lambda t: (t.start_date, t.task_id, t.map_index))
        wall = _seconds(run.get("start_date"), run.get("end_date"))
        return cls(label, run["dag_id"], run["dag_run_id"], wall, tuple(ran), tuple(builds))

    def hosts(self, group: str) -> dict[tuple[str, int], StageTime]:
        """(stage, map index) -> its record, for the tasks of one group."""
        return {(t.stage, t.map_index): t for t in self.tasks if t.group == group}

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "tasks": [asdict(t) for t in self.tasks], "builds": list(self.builds)}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> RunTimes:
        return cls(
            data["label"],
            data["dag_id"],
            data["run_id"],
            float(data["wall_s"]),
            tuple(StageTime(**t) for t in data["tasks"]),
            tuple(data.get("builds", ())),
        )


@dataclass(frozen=True)
class StageTimes:
    """What one deployment run of the scenario recorded: its runs, and which workers are Neuron hosts."""

    runs: tuple[RunTimes, ...]
    neuron_hosts: tuple[str, ...]

    def run(self, label: str) -> RunTimes:
        found = [r for r in self.runs if r.label == label]
        if not found:
            raise ValueError(f"no run labelled {label!r} (runs: {', '.join(r.label for r in self.runs) or 'none'})")
        return found[-1]


def _seconds(start: str | None, end: str | None) -> float:
    """Seconds between two of the REST API's ISO timestamps (0 when either is missing)."""
    if not start or not end:
        return 0.0
    return (_when(end) - _when(start)).total_seconds()


def _when(stamp: str) -> datetime:
    return datetime.fromisoformat(stamp.replace("Z", "+00:00"))


def requested() -> Path | None:
    """The file the records go to, when asked (`NF_DEPLOY_STAGE_TIMES`)."""
    value = os.environ.get(ENV)
    return Path(value) if value else None


def write(path: Path, times: StageTimes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    doc = {"schema": SCHEMA, "neuron_hosts": list(times.neuron_hosts), "runs": [r.to_json() for r in times.runs]}
    tmp.write_text(json.dumps(doc, indent=1) + "\n")
    tmp.replace(path)


def read(path: Path) -> StageTimes:
    """The runs of a file `write` wrote; a file of another schema or shape: ValueError saying so."""
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise ValueError(f"{path}: not a stage-times file ({exc})") from None
    schema = data.get("schema") if isinstance(data, dict) else None
    if schema != SCHEMA:
        raise ValueError(f"{path}: stage-times schema {schema}, expected {SCHEMA}")
    try:
        return StageTimes(tuple(RunTimes.from_json(r) for r in data["runs"]), tuple(data["neuron_hosts"]))
    except (KeyError, TypeError, ValueError) as exc:
        raise ValueError(f"{path}: not a stage-times file ({exc!r})") from None
