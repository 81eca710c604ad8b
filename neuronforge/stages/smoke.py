"""Stage `smoke`: load the compiled artifact the way a consumer would, in a separate process with a
timeout, generate tokens greedily for fixed prompts, and compare with transformers eager on the
same weights. A failed smoke test means nothing is published for that target.

The target's backend (`Backend.generate`) runs the child, which imports only the artifact's own
loader, like a serving process would; the cpu backend also returns the per-step logits. The
parent computes the reference (`transformers`, eager, CPU, the target dtype) and judges: the
first `match_tokens` tokens must be equal; the largest logit difference over the steps
before the first disagreement is reported.
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from neuronforge.progress import heartbeat

DEFAULT_PROMPTS = ("Hello, my name is", "The capital of France is")
SMOKE_JSON = "smoke.json"


@dataclass
class SmokeInput:
    artifact_dir: Path
    checkpoint_dir: Path
    dtype: str
    backend: str = "cpu"  # the backend (name) whose loader generates: the target's profile's
    prompts: list[str] = field(default_factory=lambda: list(DEFAULT_PROMPTS))
    max_new_tokens: int = 8
    match_tokens: int = 4
    timeout_s: float = 600.0
    # Quantized targets: the artifact must reproduce the dequantized weights (`reference_dir`); how
    # far its tokens agree with the unquantized model (`unquantized_dir`) is reported, not judged.
    reference_dir: Path | None = None
    unquantized_dir: Path | None = None
    # The compile cache the consumer loads NEFFs from (backends with `loads_from_cache`).
    cache: Any = None  # CompileCache | None


@dataclass
class SmokeResult:
    passed: bool
    reason: str
    prompts: list[dict[str, Any]] = field(default_factory=list)
    load_s: float | None = None
    time_to_first_token_s: float | None = None
    per_token_s: float | None = None
    seconds: float = 0.0
    unquantized_agreement: float | None = None  # share of generated tokens equal to the unquantized model's

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def _encode(folder: Path, prompts: list[str]) -> list[list[int]]:
    """Token ids via the artifact's tokenizer.json (the `tokenizers` library, as servers use)."""
    tok_file = folder / "tokenizer.json"
    if not tok_file.exists():  # no tokenizer shipped: fixed ids, same on both sides
        return [[1 + (i + j) % 50 for j in range(6)] for i in range(len(prompts))]
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(tok_file))
    return [tok.encode(p).ids for p in prompts]


def _reference_model(checkpoint: Path, dtype: str):
    """transformers eager on the CPU, in the target dtype: the reference the artifact must match."""
    import torch
    from transformers import AutoModelForCausalLM

    from neuronforge.target import TORCH_DTYPE_NAMES

    return AutoModelForCausalLM.from_pretrained(checkpoint, dtype=getattr(torch, TORCH_DTYPE_NAMES[dtype])).eval()


def _reference(model, prompt_ids: list[int], n_tokens: int):
    import torch

    ids = torch.tensor([prompt_ids])
    steps = []
    with torch.no_grad():  # plain greedy loop: no logits processors, no early stop at EOS
        for _ in range(n_tokens):
            step = model(input_ids=ids).logits[0, -1].float()
            steps.append(step)
            ids = torch.cat([ids, step.argmax().view(1, 1)], dim=1)
    return ids[0, len(prompt_ids) :].tolist(), torch.stack(steps)


def _generate(inp: SmokeInput) -> tuple[dict[str, Any] | None, str]:
    """The backend loads the build as its consumer does, in a child process, and generates."""
    from neuronforge.backends import get_backend
    from neuronforge.backends.base import GenerateJob
    from neuronforge.backends.child import ChildFailed

    config = json.loads((inp.checkpoint_dir / "config.json").read_text())
    # The artifact's own tokenizer when it carries one (as a server would use), else the checkpoint's.
    tokenizer_dir = inp.artifact_dir if (inp.artifact_dir / "tokenizer.json").exists() else inp.checkpoint_dir
    job = GenerateJob(
        build_dir=inp.artifact_dir,
        checkpoint_dir=inp.checkpoint_dir,
        model_type=config["model_type"],
        prompt_ids=_encode(tokenizer_dir, inp.prompts),
        max_new_tokens=inp.max_new_tokens,
        timeout_s=inp.timeout_s,
        cache=inp.cache,
    )
    try:
        with heartbeat("smoke test: loading the artifact and generating in a child process"):
            return get_backend(inp.backend).generate(job), ""
    except ChildFailed as exc:
        return None, f"the artifact failed to load or run: {exc}"


def smoke_test(inp: SmokeInput) -> SmokeResult:
    started = time.monotonic()
    child, error = _generate(inp)
    if child is None:
        return SmokeResult(False, error, seconds=round(time.monotonic() - started, 3))
    if child.get("compiled"):
        reason = (
            f"loading the artifact compiled {len(child['compiled'])} graph(s) the published cache lacks "
            f"({', '.join(child['compiled'])}): its consumer would compile at start-up"
        )
        return SmokeResult(False, reason, seconds=round(time.monotonic() - started, 3))

    rows, failures = [], []
    reference = _reference_model(inp.reference_dir or inp.checkpoint_dir, inp.dtype)  # once for every prompt
    unquantized = _reference_model(inp.unquantized_dir, inp.dtype) if inp.unquantized_dir else None
    same = total = 0
    for prompt, row in zip(inp.prompts, child["rows"], strict=True):
        ref_tokens, ref_logits = _reference(reference, row["prompt_ids"], inp.max_new_tokens)
        got = row["tokens"]
        agree = next((j for j, (a, b) in enumerate(zip(got, ref_tokens, strict=False)) if a != b), len(got))
        compared = max(1, agree)
        diff = float((row["logits"][:compared] - ref_logits[:compared]).abs().max()) if "logits" in row else None
        record = {"prompt": prompt, "tokens": got, "reference": ref_tokens, "matching_prefix": agree}
        record["max_logit_diff"] = diff
        if unquantized is not None:
            plain, _ = _reference(unquantized, row["prompt_ids"], inp.max_new_tokens)
            record["unquantized"] = plain
            same, total = same + sum(a == b for a, b in zip(got, plain, strict=False)), total + len(plain)
        rows.append(record)
        if agree < min(inp.match_tokens, inp.max_new_tokens):
            failures.append(f"prompt {prompt!r}: first {agree} tokens match the reference, {inp.match_tokens} required")
    result = SmokeResult(
        passed=not failures,
        reason="; ".join(failures) or f"first {inp.match_tokens} tokens match the eager reference for every prompt",
        prompts=rows,
        load_s=child["load_s"],
        time_to_first_token_s=max((r["ttft"] for r in child["rows"] if r["ttft"] is not None), default=None),
        per_token_s=max(r["tpot"] for r in child["rows"]),
        seconds=round(time.monotonic() - started, 3),
        unquantized_agreement=round(same / total, 4) if total else None,
    )
    return result
