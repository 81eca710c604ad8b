"""Greedy generation for the smoke test, the same loop for every toolchain whose model exposes
transformers' `generate(input_ids, attention_mask=..., max_new_tokens=..., do_sample=False)`
(optimum-neuron's models, NxD Inference's HuggingFaceGenerationAdapter), then the measurement
protocol through the same `generate` (`measure`)."""

import time

from neuronforge_toolchain import measure


def greedy(generate, spec, load_s, consumer, packages):
    """{"load_s", "rows": [{"prompt_ids", "tokens", "seconds"}], "measurement"}: the new tokens of
    each prompt of `spec`, then, when `spec` asks, the protocol's samples (`consumer`: the module
    whose load is measured; `packages`: the runtime it loads with, the consumer's first)."""
    import torch

    max_new_tokens = spec["max_new_tokens"]
    rows = []
    for ids in spec["prompt_ids"]:
        started = time.perf_counter()
        out = generate(
            torch.tensor([ids]),
            attention_mask=torch.ones(1, len(ids), dtype=torch.long),
            max_new_tokens=max_new_tokens,
            do_sample=False,
        )
        rows.append(
            {"prompt_ids": ids, "tokens": out[0, len(ids) :].tolist(), "seconds": time.perf_counter() - started}
        )
    batch = (spec.get("measure") or {}).get("batch_size", 1)
    measured = measure.result(spec, measure.hf_sample(generate, batch), load_s, consumer, packages)
    return {"load_s": load_s, "rows": rows, "measurement": measured}


def timed(load):
    """(what `load()` returns, the seconds it took)."""
    started = time.perf_counter()
    value = load()
    return value, time.perf_counter() - started
