"""The two files a sweep keeps, both rewritten whole (temporary file, then rename) after every
candidate, so an interrupted sweep loses at most the candidate it was trying:

- `--out FILE.json`: optimum-neuron's inference-cache-config format,
  `{"<model_id>": [{"batch_size", "sequence_length", "tensor_parallel_size", "instance_type"}, ...]}`,
  one entry per (tp, batch) with the longest valid sequence length, in the order found; other
  models' and instances' entries already in the file are kept. `instance_type` is the instance
  family, as optimum-neuron spells it: one of `SUPPORTED_INSTANCE_TYPES = ["trn1", "inf2", "trn1n",
  "trn2"]` (huggingface/optimum-neuron, optimum/neuron/utils/instance.py @213224e6; its reader,
  tools/cache/auto_fill_llm_cache.py, passes it to `optimum-cli export neuron --instance_type`, which
  takes only those), never a full name like `inf2.48xlarge`. Entries of one family are shared by its
  instance sizes (the same NeuronCore), so a sweep on inf2.48xlarge resumes from inf2.xlarge's.
- `FILE.records.json` beside it: every candidate the sweep decided, with its outcome (valid, failed
  with the compiler's or loader's message, skipped by a rule or by the planner with the reason), so a
  resumed or repeated sweep never repeats a failure unless asked to.
"""

from __future__ import annotations

import json
import os
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from neuronforge.common import stored_json
from neuronforge.common.errors import InvalidInput
from neuronforge.farm.sweep.space import Candidate
from neuronforge.records.base import RecordError
from neuronforge.records.local import read_local
from neuronforge.records.sweep import DecidedCandidate, SweepRecords, SweepSpace

OUTCOMES = ("valid", "failed", "skipped")
CONFIG_MAX_BYTES = 16 * 1024 * 1024  # the `--out` file: ~150 bytes per entry of every model in it


@dataclass
class Record:
    candidate: Candidate
    outcome: str  # valid | failed | skipped
    by: str  # tried | rule | planner | inferred | resume | earlier run
    reason: str
    seconds: float = 0.0

    def decided(self) -> DecidedCandidate:
        """The record file's line for this candidate."""
        return DecidedCandidate(
            **self.candidate.to_json(),
            outcome=self.outcome,
            by=self.by,
            reason=self.reason,
            seconds=round(self.seconds, 3),
        )

    @classmethod
    def of(cls, d: DecidedCandidate) -> Record:
        return cls(
            Candidate(d.tensor_parallel_size, d.batch_size, d.sequence_length), d.outcome, d.by, d.reason, d.seconds
        )

    @property
    def tried(self) -> bool:
        return self.by in ("tried", "earlier run")


def records_path(out: Path) -> Path:
    return out.with_name(out.name.removesuffix(".json") + ".records.json")


def write_atomic(path: Path, data: bytes) -> None:
    """`data` into `path` whole or not at all (a temporary file, then rename)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex[:8]}.tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)


def write_json_atomic(path: Path, obj: Any) -> None:
    write_atomic(path, (json.dumps(obj, indent=2) + "\n").encode())


def read_json(path: Path, what: str) -> Any:
    """The JSON file at `path` (None: there is none), read under the bounds of stored JSON."""
    try:
        with open(path, "rb") as f:
            raw = f.read(CONFIG_MAX_BYTES + 1)
        return stored_json.loads(raw, CONFIG_MAX_BYTES)
    except FileNotFoundError:
        return None
    except IsADirectoryError:
        raise InvalidInput(f"{what} {path} is a folder, not a file; give a file's path") from None
    except ValueError as exc:  # not JSON, not UTF-8, outside the bounds
        raise InvalidInput(f"{what} {path} is not valid JSON ({exc}); move it away or fix it") from None


@dataclass
class CacheConfig:
    """The `--out` file: entries of every model in it, this sweep's under `model_id`."""

    path: Path
    model_id: str
    instance_type: str
    data: dict[str, list[dict[str, Any]]] = field(default_factory=dict)

    @classmethod
    def load(cls, path: Path, model_id: str, instance_type: str) -> CacheConfig:
        data = read_json(path, "--out") or {}
        if not isinstance(data, dict) or not all(isinstance(v, list) for v in data.values()):
            raise InvalidInput(
                f"--out {path} is not an inference-cache-config file ({{model_id: [entries]}}); use another path"
            )
        return cls(path, model_id, instance_type, data)

    def mine(self) -> list[Candidate]:
        """This model's entries for this instance (what a resumed sweep starts from)."""
        out = []
        for e in self.data.get(self.model_id, []):
            if isinstance(e, dict) and e.get("instance_type") == self.instance_type:
                try:
                    out.append(Candidate.from_json(e))
                except (KeyError, TypeError, ValueError):
                    raise InvalidInput(
                        f"--out {self.path}: entry {e!r} lacks batch_size, sequence_length or tensor_parallel_size"
                    ) from None
        return out

    def append(self, c: Candidate) -> None:
        entry = {
            "batch_size": c.batch_size,
            "sequence_length": c.sequence_length,
            "tensor_parallel_size": c.tensor_parallel_size,
            "instance_type": self.instance_type,
        }
        entries = self.data.setdefault(self.model_id, [])
        if entry not in entries:
            entries.append(entry)
        write_json_atomic(self.path, self.data)


@dataclass
class RecordLog:
    """The per-candidate record beside `--out`."""

    path: Path
    header: dict[str, Any]
    records: list[Record] = field(default_factory=list)

    @classmethod
    def load(cls, path: Path, header: dict[str, Any]) -> tuple[RecordLog, list[Record]]:
        """A fresh log with `header`, and the records of an earlier sweep of the same model, instance
        and profile (those of another sweep in the same file are refused, not mixed)."""
        earlier: list[Record] = []
        try:
            stored = read_local(SweepRecords, path)
        except FileNotFoundError:
            stored = None
        except RecordError as exc:
            raise InvalidInput(f"{exc}; move it away or use another --out") from None
        if stored is not None:
            if (stored.model, stored.instance, stored.profile) != (
                header["model"],
                header["instance"],
                header["profile"],
            ):
                raise InvalidInput(f"{path} records a sweep of another model, instance or profile; use another --out")
            earlier = [Record.of(r) for r in stored.candidates]
        # Kept as they are until decided again: a sweep that stops at a candidate (one DAG task)
        # must not drop what a task that ran before it decided beyond it.
        return cls(path, header, list(earlier)), earlier

    def add(self, record: Record) -> None:
        self.records = [r for r in self.records if r.candidate != record.candidate] + [record]
        self.save()

    def save(self, finished: bool = False) -> None:
        body = SweepRecords(
            model=self.header["model"],
            instance=self.header["instance"],
            profile=self.header["profile"],
            method=self.header["method"],
            space=SweepSpace.model_validate(self.header["space"]),
            updated_at=_now(),
            finished=finished,
            candidates=[r.decided() for r in self.records],
        )
        write_atomic(self.path, body.to_bytes())  # its record's writer: what `load` reads back is what it was


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
