"""What a sweep knows about candidates it has not tried, from those it has.

Two monotonicity facts about compile-and-load (memory per NeuronCore is what fails):

- more tensor parallelism never needs more memory per core, a smaller batch or a shorter sequence
  never more: a valid (tp, b, s) makes every (tp' >= tp, b' <= b, s' <= s) valid;
- so, conversely, a failed (tp, b, s) makes every (tp' <= tp, b' >= b, s' >= s) fail.

The document's own rule ("a valid sequence length validates the shorter ones for the same tp and
batch") is the special case tp' = tp, b' = b. `Knowledge` applies the rules to every outcome
recorded so far; a sweep asks it before spending a compile.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from neuronforge.farm.sweep.space import Candidate


@dataclass(frozen=True)
class Verdict:
    valid: bool
    because: Candidate  # the recorded outcome it follows from
    how: str  # "tried", "planner", "resume", ...


@dataclass
class Knowledge:
    """Outcomes recorded so far (tried, predicted by the planner, or read back on resume)."""

    valid: dict[Candidate, str] = field(default_factory=dict)
    failed: dict[Candidate, str] = field(default_factory=dict)
    # Only the document's rule (same tp and batch, shorter sequence): what its method may assume.
    same_pair_only: bool = False

    def add(self, candidate: Candidate, valid: bool, how: str) -> None:
        (self.valid if valid else self.failed)[candidate] = how

    def verdict(self, c: Candidate) -> Verdict | None:
        for v, how in self.valid.items():
            if self._implies_valid(v, c):
                return Verdict(True, v, how)
        if self.same_pair_only:
            return None
        for f, how in self.failed.items():
            if (
                c.tensor_parallel_size <= f.tensor_parallel_size
                and c.batch_size >= f.batch_size
                and (c.sequence_length >= f.sequence_length)
            ):
                return Verdict(False, f, how)
        return None

    def _implies_valid(self, v: Candidate, c: Candidate) -> bool:
        if self.same_pair_only:
            return (c.tensor_parallel_size, c.batch_size) == (
                v.tensor_parallel_size,
                v.batch_size,
            ) and c.sequence_length <= v.sequence_length
        return (
            c.tensor_parallel_size >= v.tensor_parallel_size
            and c.batch_size <= v.batch_size
            and c.sequence_length <= v.sequence_length
        )
