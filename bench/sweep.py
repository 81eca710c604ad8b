"""Compile attempts of the export-configuration sweep: the document's method vs neuronforge's.

For every real config the repo carries (tests/data/model-configs: Llama-3.1-8B, Mistral-7B,
Mixtral-8x7B, Qwen2.5-7B, Llama-3.1-70B, Qwen2.5-72B) on every instance whose candidate list is not
empty, both methods sweep the same candidates against the same simulated compile-and-load oracle,
in the same run, and the bench prints the attempts of each, the ratio, and whether the valid sets
(the cache-config entries) are equal.

The oracle is NOT the planner: it is its own memory model of a NeuronCore (weights counted from
the config with another formula, the KV cache with heads replicated up to tp, a compiler scratch
term growing with batch x sequence, a per-model runtime reserve) with per-model noise (a factor in
[0.85, 1.15] and a reserve in [1.5, 2.5] GiB drawn from the model's name), so the planner's
estimate is only a guide. A candidate "compiles and loads" when the oracle's bytes fit the core.

    .venv/bin/python bench/sweep.py [--models GLOB] [--instances NAME ...] [--margin 1.5]
    .venv/bin/python bench/sweep.py oracle < candidate.json   # the oracle as a --try-command
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from neuronforge.common.errors import InvalidInput  # noqa: E402
from neuronforge.farm.sweep import CacheConfig, Candidate, RecordLog, Space, TrialResult, records_path, sweep  # noqa: E402
from neuronforge.spec.instances import INSTANCES, InstanceType, get_instance  # noqa: E402
from neuronforge.spec.modelconfig import ModelArch, load_config  # noqa: E402

CONFIGS = REPO / "tests" / "data" / "model-configs"
GIB = 1024**3
BF16 = 2


def _noise(name: str, salt: str, low: float, high: float) -> float:
    h = int(hashlib.sha256(f"{salt}:{name}".encode()).hexdigest()[:8], 16) / 0xFFFFFFFF
    return low + (high - low) * h


def oracle_bytes(arch: ModelArch, name: str, c: Candidate) -> float:
    """Bytes per NeuronCore by the oracle's own model (see the module docstring)."""
    h, layers, hd = arch.hidden_size, arch.num_layers, arch.head_dim
    inter = arch.expert_intermediate_size * arch.num_experts if arch.is_moe else arch.intermediate_size
    attn = h * (arch.num_heads * hd) * 2 + h * (arch.num_kv_heads * hd) * 2
    params = layers * (attn + 3 * h * inter) + arch.vocab_size * h * (1 if arch.tie_word_embeddings else 2)
    tp, b, s = c.tensor_parallel_size, c.batch_size, c.sequence_length
    kv_heads = max(arch.num_kv_heads, tp)  # replicated up to tp when tp exceeds the kv heads
    kv = 2 * layers * kv_heads * hd * s * b * BF16
    scratch = b * s * h * BF16 * 6 + b * arch.vocab_size * 4
    factor = _noise(name, "factor", 0.85, 1.15)
    reserve = _noise(name, "reserve", 1.5, 2.5) * GIB
    return factor * (params * BF16 + kv + scratch) / tp + reserve


def loads(arch: ModelArch, name: str, instance: InstanceType, c: Candidate) -> bool:
    return oracle_bytes(arch, name, c) <= instance.hbm_per_core()


@dataclass
class OracleTrial:
    """The simulated compile-and-load of one candidate (in-process: the bench counts, never waits)."""

    arch: ModelArch
    name: str
    instance: InstanceType

    def __call__(self, c: Candidate) -> TrialResult:
        return TrialResult(loads(self.arch, self.name, self.instance, c), "oracle", 0.0)


def run(models: list[Path], instances: list[InstanceType], margin: float) -> int:
    print(f"{'model':<28} {'instance':<15} {'cands':>5} {'document':>8} {'planned':>8} {'ratio':>6}  same valid set")
    worst, all_same, total_doc, total_ours = 0.0, True, 0, 0
    with tempfile.TemporaryDirectory() as tmp:
        for path in models:
            arch = ModelArch.from_config(load_config(path))
            name = path.stem
            for inst in instances:
                try:
                    space = Space.build(arch, inst)
                except InvalidInput:
                    continue  # no tp the rules allow (e.g. 2-core instances and odd head counts)
                counts, valid = {}, {}
                for method in ("document", "planned"):
                    out = Path(tmp) / f"{name}-{inst.name}-{method}.json"

                    trial = OracleTrial(arch, name, inst)

                    log_file, _ = RecordLog.load(
                        records_path(out), {"model": name, "instance": inst.name, "profile": "bench", "method": method}
                    )
                    result = sweep(
                        arch,
                        inst,
                        space,
                        trial,
                        CacheConfig.load(out, name, inst.family),
                        log_file,
                        method=method,
                        planner_margin=margin,
                    )
                    counts[method], valid[method] = result.attempts, set(result.valid)
                doc, ours = counts["document"], counts["planned"]
                same = valid["document"] == valid["planned"]
                ratio = ours / doc if doc else 1.0
                worst, all_same = max(worst, ratio), all_same and same
                total_doc, total_ours = total_doc + doc, total_ours + ours
                n = len(space.candidates())
                print(
                    f"{name:<28} {inst.name:<15} {n:>5} {doc:>8} {ours:>8} {ratio:>6.2f}  {same}"
                    f" ({len(valid['document'])} valid)"
                )
    print(
        f"total: document {total_doc} attempts, planned {total_ours} ({total_ours / total_doc:.2f}x); "
        f"worst ratio {worst:.2f}; valid sets equal everywhere: {all_same}"
    )
    goal = worst <= 0.5 and all_same
    print("goal (>= 50% fewer attempts on every model x instance, identical valid sets):", "met" if goal else "NOT met")
    return 0


def oracle_command() -> int:
    """`--try-command` form: the candidate on stdin; model = a config.json path."""
    data = json.load(sys.stdin)
    path = Path(data["model"])
    arch = ModelArch.from_config(load_config(path))
    c = Candidate(data["tensor_parallel_size"], data["batch_size"], data["sequence_length"])
    ok = loads(arch, path.stem, get_instance(data["instance_type"]), c)
    if not ok:
        print(f"simulated: {c} does not fit a NeuronCore", file=sys.stderr)
    return 0 if ok else 1


def main() -> int:
    if sys.argv[1:2] == ["oracle"]:
        return oracle_command()
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", default="*.json", help="glob in tests/data/model-configs")
    parser.add_argument("--instances", nargs="+", default=[n for n in INSTANCES if n != "inf2.8xlarge"])
    parser.add_argument("--margin", type=float, default=1.5, help="planner margin (see neuronforge sweep)")
    args = parser.parse_args()
    models = sorted(CONFIGS.glob(args.models))
    return run(models, [get_instance(n) for n in args.instances], args.margin)


if __name__ == "__main__":
    sys.exit(main())
