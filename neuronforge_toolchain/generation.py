"""Greedy generation for the smoke test, the same loop for every toolchain whose model exposes
transformers' `generate(input_ids, attention_mask=..., max_new_tokens=..., do_sample=False)`
(optimum-neuron's models, NxD Inference's HuggingFaceGenerationAdapter)."""

import time


def greedy(generate, prompt_ids, max_new_tokens, load_s):
    """{"load_s", "rows": [{"prompt_ids", "tokens", "seconds"}]}: the new tokens of each prompt."""
    import torch

    rows = []
    for ids in prompt_ids:
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
    return {"load_s": load_s, "rows": rows}


def timed(load):
    """(what `load()` returns, the seconds it took)."""
    started = time.perf_counter()
    value = load()
    return value, time.perf_counter() - started
