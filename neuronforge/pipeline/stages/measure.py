"""The smoke stage's measurement protocol, worker side: what the load's process is asked to measure
(`plan`), and how its raw samples become the smoke record's typed `Measurement` (`summarize`,
`measurement`) and its fixed prompts' logits the bounded `Numerics` (`numerics`).

The loop itself runs where the payload was loaded, after the correctness generation, the same for
every backend (`neuronforge_toolchain.measure`): warm-up, then R repetitions of time to first token
at a short and a long prompt and of per-output-token latency at the compiled batch size; the load,
cold from the published payload, is its one sample. Tokens per second are derived here from each
per-token sample (batch size / per-token latency), so their median, p10/p90 and spread are measured
figures like the others.
"""

from __future__ import annotations

import os
from typing import Any

from neuronforge.records.smoke import (
    LOAD,
    NUMERICS_TOKENS,
    NUMERICS_TOP,
    PER_TOKEN,
    TOKENS_PER_S,
    TTFT_LONG,
    TTFT_SHORT,
    Figure,
    MeasureHost,
    Measurement,
    Numerics,
    PromptNumerics,
)
from neuronforge.spec.target import TargetSpec

MIN_SAMPLES_FOR_SPREAD = 3  # fewer samples (a cold load) give a figure that is shown, never judged
DIGITS = 6  # significant digits a kept logit has: enough to compare builds, small enough to store


def long_prompt_tokens(target: TargetSpec, new_tokens: int) -> int:
    """The long prompt's length: the largest context bucket that leaves room for `new_tokens` in the
    sequence (the context length when the target names no buckets), else all the room there is."""
    buckets = target.context_encoding_buckets or (target.context_length,)
    room = target.sequence_length - new_tokens
    fitting = [b for b in buckets if b <= room]
    return max(1, max(fitting) if fitting else min(max(buckets), room))


def plan(
    target: TargetSpec, prompt_ids: list[list[int]], new_tokens: int, warmup: int, repetitions: int
) -> dict[str, Any]:
    """The request the load's process runs (`neuronforge_toolchain.measure`): the shortest fixed prompt,
    and a long prompt of `long_prompt_tokens` ids, the first prompt's repeated (deterministic: every
    build of the target measures the same ids)."""
    short = min(prompt_ids, key=len)
    length = long_prompt_tokens(target, new_tokens)
    seed = prompt_ids[0] or [1]
    return {
        "warmup": warmup,
        "repetitions": repetitions,
        "short_ids": list(short),
        "long_ids": [seed[i % len(seed)] for i in range(length)],
        "new_tokens": new_tokens,
        "batch_size": target.batch_size,
    }


def _quantile(ordered: list[float], q: float) -> float:
    """The q-quantile by linear interpolation between the closest ranks (numpy's default)."""
    pos = q * (len(ordered) - 1)
    low = int(pos)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (pos - low)


def summarize(samples: list[float]) -> Figure:
    """One figure of `samples` (at least one): median, p10 and p90 by linear interpolation, and the
    spread (p90 - p10) / median, None below `MIN_SAMPLES_FOR_SPREAD` samples or at a zero median."""
    if not samples:
        raise ValueError("a figure needs at least one sample")
    ordered = sorted(samples)
    median, p10, p90 = (_quantile(ordered, q) for q in (0.5, 0.1, 0.9))
    spread = (p90 - p10) / median if len(ordered) >= MIN_SAMPLES_FOR_SPREAD and median else None
    return Figure(samples=len(ordered), median=median, p10=p10, p90=p90, spread=spread)


def host_of(probed: dict[str, Any] | None, runtime: dict[str, str], load_average: float) -> MeasureHost:
    """Where the measurement ran: the Neuron host `neuron-ls` described (`probed`; None on a CPU worker,
    "cpu"), this machine's cores, the load average when the smoke started and the runtime the load ran
    with; its line is the first package's major.minor (the consumer, or torch on the cpu backend)."""
    instance = "cpu" if probed is None else str(probed.get("instance_type") or "")  # "": neuron-ls named none
    line = ""
    if runtime:
        package, version = next(iter(runtime.items()))
        line = f"{package} {'.'.join(version.split('.')[:2])}"
    return MeasureHost(
        instance_type=instance,
        cores=os.cpu_count() or 0,
        load_average=round(load_average, 2),
        runtime=dict(runtime),
        runtime_line=line,
    )


def measurement(child: dict[str, Any], asked: dict[str, Any], host: MeasureHost) -> Measurement:
    """The typed measurement of the raw samples the load's process returned (`child`: {"samples",
    "synthetic", "runtime"}) for the request `asked` (`plan`)."""
    samples = {name: [float(s) for s in values] for name, values in child["samples"].items() if values}
    batch = asked["batch_size"]
    per_token = [s for s in samples.get(PER_TOKEN, []) if s > 0]
    if per_token:
        samples[TOKENS_PER_S] = [batch / s for s in per_token]
    figures = {name: summarize(samples[name]) for name in (LOAD, TTFT_SHORT, TTFT_LONG, PER_TOKEN, TOKENS_PER_S)
               if samples.get(name)}  # fmt: skip
    return Measurement(
        synthetic=bool(child.get("synthetic")),
        warmup=asked["warmup"],
        repetitions=asked["repetitions"],
        batch_size=batch,
        short_prompt_tokens=len(asked["short_ids"]),
        long_prompt_tokens=len(asked["long_ids"]),
        new_tokens=asked["new_tokens"],
        figures=figures,
        host=host,
    )


def _rounded(value: float) -> float:
    return float(f"{value:.{DIGITS}g}")


def numerics(prompts: list[str], rows: list[dict[str, Any]]) -> Numerics:
    """Per fixed prompt its first `NUMERICS_TOKENS` generated tokens and, per step, the top
    `NUMERICS_TOP` token ids and logits (largest first, `DIGITS` significant digits) from the
    correctness run's per-step logits; a backend that returns none keeps the tokens only."""
    kept = []
    for prompt, row in zip(prompts, rows, strict=True):
        top_ids: list[list[int]] = []
        top_logits: list[list[float]] = []
        logits = row.get("logits")
        if logits is not None:
            values, ids = logits[:NUMERICS_TOKENS].float().topk(min(NUMERICS_TOP, logits.shape[-1]), dim=-1)
            top_ids = [[int(i) for i in step] for step in ids.tolist()]
            top_logits = [[_rounded(v) for v in step] for step in values.tolist()]
        kept.append(
            PromptNumerics(
                prompt=prompt,
                prompt_ids=list(row["prompt_ids"]),
                tokens=list(row["tokens"][:NUMERICS_TOKENS]),
                top_ids=top_ids,
                top_logits=top_logits,
            )
        )
    return Numerics(prompts=kept)
