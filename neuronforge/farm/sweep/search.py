"""The sweep loop: the document's method, and ours (the same order and rules, plus the planner and
monotonicity), over one candidate space.

Both walk the candidates in the document's order and append each (tp, batch)'s longest valid
sequence length to the cache-config file. They differ in what they may know without a compile:

- `document`: after a valid (tp, b, s), shorter sequences of (tp, b) are skipped; on resume, pairs
  with a valid entry are skipped, and so are batches above a tp's largest valid batch.
- `planned` (the default): also, the planner rules out candidates that need more than
  `planner_margin` times a NeuronCore's memory (by its estimate: a margin, because the planner is an
  estimate, not the compiler), and every outcome recorded so far decides others by monotonicity
  (`knowledge.Knowledge`). The valid entries are the same; the compiles are fewer.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

from neuronforge.common.errors import InvalidInput
from neuronforge.farm.sweep.knowledge import Knowledge
from neuronforge.farm.sweep.records import CacheConfig, Record, RecordLog
from neuronforge.farm.sweep.space import Candidate, Space
from neuronforge.farm.sweep.trials import Trial
from neuronforge.pipeline.planner import activation_bytes, gib, kv_cache_bytes, per_core_bytes, weight_bytes
from neuronforge.spec.instances import InstanceType
from neuronforge.spec.modelconfig import ModelArch
from neuronforge.spec.target import Quantization

log = logging.getLogger(__name__)
METHODS = ("planned", "document")
PLANNER_MARGIN = 1.5


@dataclass
class SweepResult:
    valid: list[Candidate]
    records: list[Record]
    attempts: int  # compiles spent in this run
    method: str
    skipped_by: dict[str, int] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "method": self.method,
            "attempts": self.attempts,
            "valid": [c.to_json() for c in self.valid],
            "decided": len(self.records),
            "skipped_by": self.skipped_by,
        }


def planner_need(arch: ModelArch, c: Candidate, dtype: str = "bf16") -> int:
    """The planner's bytes per NeuronCore for a candidate (weights, KV cache, activations, reserve)."""
    _, weights = weight_bytes(arch, dtype, Quantization(), None)
    kv = kv_cache_bytes(arch, c.tensor_parallel_size, c.batch_size, c.sequence_length, dtype)
    act = activation_bytes(arch, c.batch_size, c.sequence_length, dtype)
    return per_core_bytes(weights, kv, act, c.tensor_parallel_size)


def sweep(
    arch: ModelArch,
    instance: InstanceType,
    space: Space,
    trial: Trial,
    out: CacheConfig,
    log_file: RecordLog,
    earlier: list[Record] | None = None,
    *,
    method: str = "planned",
    planner_margin: float = PLANNER_MARGIN,
    retry_failed: bool = False,
    dtype: str = "bf16",
    until: Candidate | None = None,
) -> SweepResult:
    """Decide every candidate in order (compiling through `trial` only what nothing decides), or,
    with `until`, the candidates up to and including that one: what one mapped task of the sweep
    DAG does, each task picking up from the records the earlier ones left."""
    planned = method == "planned"
    order = space.candidates("planned" if planned else "document")
    if until is not None:
        if until not in order:
            raise InvalidInput(f"{until} is not a candidate of this sweep")
        order = order[: order.index(until) + 1]

    knows = Knowledge()
    before = {r.candidate: r for r in (earlier or []) if r.tried}
    # Resume from the cache-config file, as the document says.
    resumed = out.mine()
    resumed_pairs = {(c.tensor_parallel_size, c.batch_size): c for c in resumed}
    resumed_max_batch: dict[int, int] = {}
    for c in resumed:
        tp = c.tensor_parallel_size
        resumed_max_batch[tp] = max(resumed_max_batch.get(tp, 0), c.batch_size)
        knows.add(c, True, "resume")
    for r in before.values():  # an earlier run's compiles decide others from the start
        if r.outcome == "valid" or not retry_failed:
            knows.add(r.candidate, r.outcome == "valid", "earlier run")
    done_pairs: dict[tuple[int, int], Candidate] = {}
    hbm = instance.hbm_per_core()
    attempts = 0
    valid: list[Candidate] = list(resumed)

    def decide(rec: Record) -> None:
        log_file.add(rec)
        log.info("%s: %s (%s) %s", rec.candidate, rec.outcome, rec.by, rec.reason)

    def accept(c: Candidate, rec: Record) -> None:
        decide(rec)
        done_pairs[(c.tensor_parallel_size, c.batch_size)] = c
        knows.add(c, True, rec.by)
        if c not in valid:
            valid.append(c)
        out.append(c)

    for c in order:
        pair = (c.tensor_parallel_size, c.batch_size)
        if pair in done_pairs:
            decide(Record(c, "skipped", "rule", f"valid at {done_pairs[pair]}: a shorter sequence loads too"))
            continue
        prior = before.get(c)  # what an earlier run compiled: never compiled again (failures: unless asked)
        if prior is not None and (prior.outcome == "valid" or not retry_failed):
            rec = Record(c, prior.outcome, "earlier run", prior.reason, prior.seconds)
            if prior.outcome == "valid":
                accept(c, rec)
            else:
                decide(rec)
            continue
        # The document's resume rules read the cache-config file alone (no record of failures):
        # not when failures are to be retried, and the batch rule only in the document's order
        # (batch down), where a larger batch was tried before a smaller one was found valid.
        if pair in resumed_pairs and not retry_failed:
            decide(Record(c, "skipped", "resume", f"{out.path} has {resumed_pairs[pair]} for this tp and batch"))
            continue
        if not planned and not retry_failed and c.batch_size > resumed_max_batch.get(c.tensor_parallel_size, 10**9):
            decide(
                Record(
                    c,
                    "skipped",
                    "resume",
                    f"{out.path}: tp={c.tensor_parallel_size}'s largest valid batch "
                    f"is {resumed_max_batch[c.tensor_parallel_size]}, so larger ones failed",
                )
            )
            continue
        if planned:
            verdict = knows.verdict(c)
            if verdict is not None and verdict.valid:
                accept(c, Record(c, "valid", "inferred", f"valid because {verdict.because} is ({verdict.how})"))
                continue
            if verdict is not None:
                decide(Record(c, "skipped", "inferred", f"fails because {verdict.because} failed ({verdict.how})"))
                continue
            need = planner_need(arch, c, dtype)
            if need > planner_margin * hbm:
                decide(
                    Record(
                        c,
                        "skipped",
                        "planner",
                        f"needs about {gib(need)} per NeuronCore, more than "
                        f"{planner_margin:g} x the {gib(hbm)} of {instance.name}",
                    )
                )
                knows.add(c, False, "planner")
                continue
        attempts += 1
        result = trial(c)
        if result.ok:
            accept(c, Record(c, "valid", "tried", result.message, result.seconds))
        else:
            decide(Record(c, "failed", "tried", result.message, result.seconds))
            knows.add(c, False, "tried")
    decided = {r.candidate for r in log_file.records}
    log_file.save(finished=all(c in decided for c in space.candidates()))
    counts: dict[str, int] = {}
    for r in log_file.records:
        if r.outcome == "skipped":
            counts[r.by] = counts.get(r.by, 0) + 1
    return SweepResult(valid, log_file.records, attempts, method, counts)
