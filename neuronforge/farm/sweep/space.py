"""The candidate space of an export-configuration sweep, as optimum-neuron's maintainers define it
("Optimal export configurations", huggingface/optimum-neuron@ec894b4c tools/export/AGENTS.md):

- tensor parallel sizes: at least 2, a multiple of the NeuronCores per device, at most the
  instance's cores, dividing the attention heads;
- batch sizes: [1, 4, 8, 16, 32, 64, 128];
- sequence lengths: powers of two, at least 1024, at most the model's max positions;

visited in the document's order: tp increasing, batch decreasing, sequence length decreasing.

A sweep for a profile that compiles with transformers-neuronx (`lmi-neuronx`) takes its tp sizes
from the transformers-neuronx guide instead: the tensor-parallel degrees its Neuron runtime supports
(trn1: 1, 2, 8, 32; inf2: 1, 2, 4, 8, 24) up to the instance's cores (1 included: gpt2-xl's 25
heads "run without tensor-parallelism only") that divide the attention heads. A model with ALiBi
(BLOOM) has no position limit in its config: its default sequence lengths stop at BloomForSampling's
default n_positions (2048).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from neuronforge.common.errors import InvalidInput
from neuronforge.compilation.backends.tnx_classes import BLOOM_DEFAULT_N_POSITIONS, guide_tps
from neuronforge.spec.instances import InstanceType
from neuronforge.spec.modelconfig import ModelArch

if TYPE_CHECKING:
    from neuronforge.profiles.base import ServingProfile

BATCH_SIZES = (1, 4, 8, 16, 32, 64, 128)
MIN_SEQUENCE_LENGTH = 1024
# NeuronCores per Neuron device (physical): Inferentia2 and Trainium1 devices hold 2, Trainium2 8.
CORES_PER_DEVICE = {"inf2": 2, "trn1": 2, "trn1n": 2, "trn2": 8}


@dataclass(frozen=True, order=True)
class Candidate:
    tensor_parallel_size: int
    batch_size: int
    sequence_length: int

    @property
    def key(self) -> tuple[int, int, int]:
        return (self.tensor_parallel_size, self.batch_size, self.sequence_length)

    def to_json(self) -> dict[str, int]:
        return {
            "tensor_parallel_size": self.tensor_parallel_size,
            "batch_size": self.batch_size,
            "sequence_length": self.sequence_length,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Candidate:
        return cls(int(data["tensor_parallel_size"]), int(data["batch_size"]), int(data["sequence_length"]))

    def __str__(self) -> str:
        return f"tp={self.tensor_parallel_size} batch={self.batch_size} seq={self.sequence_length}"


def cores_per_device(instance: InstanceType) -> int:
    """Logical cores per device at the instance's default LNC (Trainium2: 8 physical = 4 logical)."""
    return max(1, CORES_PER_DEVICE[instance.family] // instance.default_lnc)


def default_tps(arch: ModelArch, instance: InstanceType, tnx: bool = False) -> list[int]:
    per_device, cores = cores_per_device(instance), instance.cores()
    if tnx:  # the transformers-neuronx guide's rules: supported degrees that divide the heads
        allowed = guide_tps(instance.family, cores) or instance.supported_tp()
        return [tp for tp in allowed if tp in instance.supported_tp() and tp <= cores and arch.num_heads % tp == 0]
    return [tp for tp in range(2, cores + 1) if tp % per_device == 0 and arch.num_heads % tp == 0]


def seq_limit(arch: ModelArch) -> int:
    """The longest default sequence length: the config's limit, else (ALiBi) BloomForSampling's default."""
    return arch.max_position_embeddings or BLOOM_DEFAULT_N_POSITIONS


def default_seq_lens(arch: ModelArch) -> list[int]:
    out, s = [], MIN_SEQUENCE_LENGTH
    while s <= seq_limit(arch):
        out.append(s)
        s *= 2
    return out


@dataclass(frozen=True)
class Space:
    """The lists a sweep walks, each checked against the document's rules: a user may narrow the tp
    and batch lists; sequence lengths given explicitly must be powers of two up to the max positions
    but may go below 1024 (small models, tests)."""

    tps: tuple[int, ...]
    batch_sizes: tuple[int, ...]
    seq_lens: tuple[int, ...]

    @classmethod
    def build(
        cls,
        arch: ModelArch,
        instance: InstanceType,
        tps: list[int] | None = None,
        batch_sizes: list[int] | None = None,
        seq_lens: list[int] | None = None,
        profile: ServingProfile | None = None,
    ) -> Space:
        tnx = profile is not None and profile.backend.name == "tnx"
        allowed_tps = default_tps(arch, instance, tnx)
        tps = sorted(set(tps)) if tps else allowed_tps
        bad = [tp for tp in tps if tp not in allowed_tps]
        if bad:
            raise InvalidInput(
                f"--tp {bad} not allowed for {instance.name} ({instance.cores()} cores, "
                f"{cores_per_device(instance)} per device) and {arch.num_heads} attention heads: "
                + (
                    "a tp must be a degree the Neuron runtime supports there and divide the heads; "
                    if tnx
                    else "a tp must be at least 2, a multiple of the cores per device, at most the cores and "
                    "divide the heads; "
                )
                + f"allowed: {allowed_tps or 'none'}"
            )
        batches = sorted(set(batch_sizes or BATCH_SIZES), reverse=True)
        if any(b < 1 for b in batches):
            raise InvalidInput(f"--batch-sizes {batches}: batch sizes are whole numbers from 1")
        seqs = sorted(set(seq_lens or default_seq_lens(arch)), reverse=True)
        limit = arch.max_position_embeddings
        bad = [s for s in seqs if s < 1 or (limit is not None and s > limit) or s & (s - 1)]
        if bad:
            raise InvalidInput(
                f"--seq-lens {bad}: sequence lengths are powers of two up to the model's max positions "
                f"({limit if limit is not None else 'no limit: ALiBi'})"
            )
        if not tps or not seqs:
            what = "tensor parallel size" if not tps else "sequence length"
            raise InvalidInput(f"no candidate {what} for this model on {instance.name}: nothing to sweep")
        return cls(tuple(tps), tuple(batches), tuple(seqs))

    def candidates(self, order: str = "document") -> list[Candidate]:
        """Every candidate in the document's order (tp up, batch down, sequence length down), or in
        the planned sweep's order, batch up: then a failure at (tp, b, s) decides (tp, b' > b, s)
        before it is reached, so each tp costs about one compile per step of its batch x sequence
        staircase instead of one per failing candidate."""
        batches = self.batch_sizes if order == "document" else tuple(sorted(self.batch_sizes))
        return [Candidate(tp, b, s) for tp in self.tps for b in batches for s in self.seq_lens]

    def to_json(self) -> dict[str, list[int]]:
        return {"tps": list(self.tps), "batch_sizes": list(self.batch_sizes), "seq_lens": list(self.seq_lens)}


def refuse_profile(profile: ServingProfile, instance: InstanceType, arch: ModelArch, space: Space) -> None:
    """A sweep for a profile that cannot serve this instance or model is refused before any candidate
    is tried (the CLI and the sweep DAG): the profile's own problems for the sweep's first candidate."""
    from neuronforge.spec.target import TargetSpec

    probe = TargetSpec(
        instance_type=instance.name,
        tp_degree=space.tps[0],
        sequence_length=space.seq_lens[-1],
        profile=profile.ref,
    )
    from neuronforge.profiles.registry import target_problems

    problems = target_problems(profile, probe, arch.model_type)
    if problems:
        raise InvalidInput(f"cannot sweep {instance.name} for profile {profile.ref}: " + "; ".join(problems))
