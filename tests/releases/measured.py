"""A smoke result with a measurement and numerics written by hand, as the smoke stage's protocol records
them (`records.smoke`): what the comparison's, the gate's and the release DAG's tests build on, without
measuring anything. `measured(...)` is the manifest's `smoke` part as JSON; `tests.releases.builds.publish`
takes it."""

from __future__ import annotations

from typing import Any

from neuronforge.records.smoke import LOAD, PER_TOKEN, TOKENS_PER_S, TTFT_SHORT, SmokeRecord


def figure(median: float, spread: float | None = 0.02, samples: int = 5) -> dict[str, Any]:
    """One figure whose p10 and p90 lie `spread` (relative to the median) apart around it."""
    half = median * (spread or 0) / 2
    return {"samples": samples, "median": median, "p10": median - half, "p90": median + half, "spread": spread}


def measured(
    per_token: float = 0.010,
    spread: float | None = 0.02,
    *,
    ttft: float = 0.020,
    instance: str = "cpu",
    runtime: str = "torch 2.9",
    synthetic: bool = False,
    tokens: tuple[int, ...] = (5, 6, 7),
    logits: tuple[float, ...] = (9.0, 8.0, 7.0),
) -> dict[str, Any]:
    """A passed smoke result: `per_token` seconds per output token (tokens per second its inverse),
    `ttft` seconds to the first token and one cold load, each repeated figure of relative `spread`, measured on
    `instance` with `runtime`; one prompt's `tokens` and their top logits."""
    return {
        "passed": True,
        "reason": "tokens match",
        "measurement": {
            "synthetic": synthetic,
            "repetitions": 5,
            "figures": {
                TTFT_SHORT: figure(ttft, spread),
                PER_TOKEN: figure(per_token, spread),
                TOKENS_PER_S: figure(1 / per_token, spread),
                LOAD: figure(1.0, None, samples=1),
            },
            "host": {"instance_type": instance, "runtime_line": runtime},
        },
        "numerics": {
            "prompts": [
                {
                    "prompt_ids": [1, 2, 3],
                    "tokens": list(tokens),
                    "top_ids": [[t, 0] for t in tokens],
                    "top_logits": [[v, 0.0] for v in logits],
                }
            ]
        },
    }


def smoke(*args: Any, **kwargs: Any) -> SmokeRecord:
    """`measured(...)` as the typed record."""
    return SmokeRecord.model_validate(measured(*args, **kwargs))
