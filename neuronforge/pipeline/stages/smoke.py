"""Stage `smoke`: load the published payload the way its consumer would, in a fresh process with
compiling forbidden, generate greedily for fixed prompts, and compare with what transformers eager
generates from the same weights. A failed smoke test means nothing is published for that target.

Two halves on two hosts:
- `write_expected` runs on the compile host (a CPU worker): the reference — transformers eager on
  the CPU, in the target dtype, on the weights the artifact must reproduce — goes into the payload as
  `smoke/expected.json` (prompt ids, expected tokens; for backends that return logits also
  `smoke/reference-logits.safetensors`). The payload thus carries its own acceptance test, and the
  Neuron host needs nothing but the payload.
- `smoke_test` runs where the consumer would (a Neuron host for the Neuron profiles): the profile
  reads from the payload's own launch files how its consumer loads it (`ServingProfile.smoke_load`:
  the model folder, the settings, the compile-cache entries it is pointed at), the backend loads that
  folder alone in a child process, through a fresh compile cache holding only those entries (none,
  for consumers that read no cache). A graph the load adds to that cache is one the consumer would
  compile at start-up: the test fails. The first `match_tokens` tokens must equal the expected ones;
  the largest logit difference before the first disagreement is reported where logits exist.
  Then, in the same process (its load the cold one), the measurement protocol (`measure`): warm-up
  and `NEURONFORGE_SMOKE_REPETITIONS` repetitions of time to first token at a short and a long
  prompt and of per-token latency at the target's batch size, summarized with the host and runtime
  as the record's `measurement`; the fixed prompts' first tokens and top-k logits as its `numerics`.

`run` is the stage's adapter (what it reads from the `BuildState`, what it writes back) and `STAGE`
its declaration, listed in `neuronforge.pipeline.runner.STAGES`.
"""

from __future__ import annotations

import logging
import os
import shutil
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from neuronforge.artifacts.localcache import materialize
from neuronforge.common import settings
from neuronforge.common.errors import ExitCode, NeuronforgeError
from neuronforge.common.progress import heartbeat
from neuronforge.pipeline.buildstate import BuildState
from neuronforge.pipeline.stage import Context, Stage
from neuronforge.pipeline.stages import measure
from neuronforge.records.base import RecordError
from neuronforge.records.local import write_local
from neuronforge.records.smoke import Measurement, Numerics, SmokeRecord
from neuronforge.records.smoke_reference import SmokeReference
from neuronforge.spec.target import TargetSpec

DEFAULT_PROMPTS = ("Hello, my name is", "The capital of France is")
SMOKE_JSON = "smoke.json"
EXPECTED = "smoke/expected.json"
REFERENCE_LOGITS = "smoke/reference-logits.safetensors"

log = logging.getLogger(__name__)


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
    host: dict[str, Any] | None = None  # the Neuron host as `neuron-ls` described it (`host_probe`); None: cpu
    measurement: Measurement | None = None  # the protocol's figures (`measure`); None: not asked or failed
    numerics: Numerics | None = None  # the fixed prompts' first tokens and top-k logits

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


# -- on the compile host: the reference ----------------------------------------------------------------
def encode(folder: Path, prompts: list[str]) -> list[list[int]]:
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

    from neuronforge.spec.target import TORCH_DTYPE_NAMES

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


def write_expected(
    payload: Path,
    *,
    reference_dir: Path,
    tokenizer_dir: Path,
    dtype: str,
    prompts: list[str],
    max_new_tokens: int,
    unquantized_dir: Path | None = None,
    with_logits: bool = False,
) -> SmokeReference:
    """Compute the reference on this (CPU) host and write it into the payload (see module doc).
    `reference_dir`: the weights the artifact must reproduce (dequantized for a quantized target);
    `unquantized_dir`: the original weights, whose agreement is reported, never judged."""
    import transformers

    prompt_ids = encode(tokenizer_dir, prompts)
    with heartbeat("smoke reference: transformers eager on the CPU"):
        model = _reference_model(reference_dir, dtype)
        runs = [_reference(model, ids, max_new_tokens) for ids in prompt_ids]
        plain = None
        if unquantized_dir is not None:
            unquantized = _reference_model(unquantized_dir, dtype)
            plain = [_reference(unquantized, ids, max_new_tokens)[0] for ids in prompt_ids]
    expected = SmokeReference(
        reference=f"transformers {transformers.__version__} eager on the CPU, {dtype}, greedy",
        prompts=list(prompts),
        prompt_ids=prompt_ids,
        max_new_tokens=max_new_tokens,
        tokens=[tokens for tokens, _ in runs],
        unquantized_tokens=plain,
    )
    (payload / EXPECTED).parent.mkdir(parents=True, exist_ok=True)
    write_local(expected, payload / EXPECTED)
    if with_logits:
        from safetensors.torch import save_file

        save_file({f"p{i}": logits.contiguous() for i, (_, logits) in enumerate(runs)}, payload / REFERENCE_LOGITS)
    return expected


# -- where the consumer runs: the load and the judgement ---------------------------------------------
@dataclass
class SmokeInput:
    payload: Path  # the materialized payload: exactly what will be published
    load: Any  # SmokeLoad: how the consumer loads it (from its launch files)
    backend: str  # the backend (name) whose loader generates: the target's profile's
    cache: Any  # CompileCache: fresh, holding only `load.cache_entries`; must not grow
    python: Any = None  # ToolchainPython of the profile (Neuron backends)
    match_tokens: int = 4
    timeout_s: float = 600.0
    target: TargetSpec | None = None  # the target measured (`measure.plan`); None: correctness only
    host: dict[str, Any] | None = None  # `probe_host`'s Neuron host; None: a CPU worker


def _plan(inp: SmokeInput, expected: SmokeReference) -> dict[str, Any] | None:
    """What the load's process is asked to measure after generating (`measure.plan`), as the settings say."""
    if inp.target is None:
        return None
    s = settings.current()
    return measure.plan(inp.target, expected.prompt_ids, expected.max_new_tokens, s.smoke_warmup, s.smoke_repetitions)


def _generate(
    inp: SmokeInput, expected: SmokeReference, asked: dict[str, Any] | None
) -> tuple[dict[str, Any] | None, str]:
    """The backend loads the payload's model folder as its consumer does, in a child process."""
    from neuronforge.common.errors import InvalidInput
    from neuronforge.compilation.backends import get_backend
    from neuronforge.compilation.backends.base import GenerateJob
    from neuronforge.compilation.backends.child import ChildFailed

    job = GenerateJob(
        model_dir=inp.payload / inp.load.model_dir,
        prompt_ids=expected.prompt_ids,
        max_new_tokens=expected.max_new_tokens,
        timeout_s=inp.timeout_s,
        cache=inp.cache,
        settings=dict(inp.load.settings),
        python=inp.python,
        measure=asked,
    )
    try:
        with heartbeat("smoke test: loading the published payload and generating in a child process"):
            return get_backend(inp.backend).generate(job), ""
    except (ChildFailed, InvalidInput) as exc:
        return None, f"the artifact failed to load or run: {exc}"


def _entries(cache: Any) -> set[str]:
    """The cache's complete entries (a compile that failed leaves no model.done and loads nothing)."""
    from neuronforge.compilation.compile_cache import DONE

    return {p.name for p in cache.entries() if (p / DONE).exists()}


def smoke_test(inp: SmokeInput) -> SmokeResult:
    started, load_average = time.monotonic(), os.getloadavg()[0]

    def failed(reason: str) -> SmokeResult:
        return SmokeResult(False, reason, seconds=round(time.monotonic() - started, 3), host=inp.host)

    try:
        expected = SmokeReference.from_bytes((inp.payload / EXPECTED).read_bytes(), EXPECTED)
    except (OSError, RecordError) as exc:
        return failed(f"the payload has no readable {EXPECTED} (the reference written at compile time): {exc}")
    inp.cache.local.mkdir(parents=True, exist_ok=True)
    before = _entries(inp.cache)
    asked = _plan(inp, expected)
    child, error = _generate(inp, expected, asked)
    compiled = sorted(_entries(inp.cache) - before) + list((child or {}).get("compiled") or [])
    if compiled:
        return failed(
            f"loading the artifact compiled {len(compiled)} graph(s) the published payload lacks "
            f"({', '.join(compiled)}): its consumer would compile at start-up"
        )
    if child is None:
        return failed(error)
    logits = _reference_logits(inp.payload)
    max_new = expected.max_new_tokens
    rows, failures = [], []
    same = total = 0
    plain_runs = expected.unquantized_tokens
    for i, (prompt, want, row) in enumerate(zip(expected.prompts, expected.tokens, child["rows"], strict=True)):
        got = row["tokens"]
        agree = next((j for j, (a, b) in enumerate(zip(got, want, strict=False)) if a != b), len(got))
        compared = max(1, agree)
        diff = None
        if "logits" in row and logits is not None:
            diff = float((row["logits"][:compared] - logits[f"p{i}"][:compared]).abs().max())
        record = {"prompt": prompt, "tokens": got, "reference": want, "matching_prefix": agree, "max_logit_diff": diff}
        if plain_runs is not None:
            plain = plain_runs[i]
            record["unquantized"] = plain
            same, total = same + sum(a == b for a, b in zip(got, plain, strict=False)), total + len(plain)
        rows.append(record)
        if agree < min(inp.match_tokens, max_new):
            failures.append(f"prompt {prompt!r}: first {agree} tokens match the reference, {inp.match_tokens} required")
    return SmokeResult(
        passed=not failures,
        reason="; ".join(failures) or f"first {inp.match_tokens} tokens match the eager reference for every prompt",
        prompts=rows,
        load_s=child["load_s"],
        time_to_first_token_s=max((r["ttft"] for r in child["rows"] if r["ttft"] is not None), default=None),
        per_token_s=max(r["tpot"] for r in child["rows"]),
        seconds=round(time.monotonic() - started, 3),
        unquantized_agreement=round(same / total, 4) if total else None,
        host=inp.host,
        measurement=_measurement(child, asked, inp.host, load_average),
        numerics=measure.numerics(expected.prompts, child["rows"]),
    )


def _measurement(
    child: dict[str, Any], asked: dict[str, Any] | None, probed: dict[str, Any] | None, load_average: float
) -> Measurement | None:
    """The protocol's samples the child returned, summarized (`measure.measurement`)."""
    found = child.get("measurement")
    if asked is None or not found:
        return None
    host = measure.host_of(probed, found.get("runtime") or {}, load_average)
    return measure.measurement(found, asked, host)


def _reference_logits(payload: Path) -> dict[str, Any] | None:
    if not (payload / REFERENCE_LOGITS).is_file():
        return None
    from safetensors.torch import load_file

    return load_file(payload / REFERENCE_LOGITS)


class SmokeFailed(NeuronforgeError):
    """The compiled artifact did not load or did not generate like the reference; nothing published."""

    exit_code = ExitCode.REJECTED


def probe_host(target: TargetSpec) -> dict[str, Any]:
    """Before anything is downloaded or loaded on a Neuron host: what host this is (`neuron-ls`, either
    JSON format) and whether it can run `target` — HostMismatch / HostProbeFailed in one line rather
    than a runtime error mid-load. A host without `neuron-ls` is recorded as not probed: the load
    itself then says whether it has devices."""
    from neuronforge.compilation import host_probe

    try:
        tool = host_probe.find_tool()
    except host_probe.HostProbeFailed as exc:
        log.warning("smoke: host not probed: %s", exc)
        return {"probed": False, "reason": str(exc)}
    host = host_probe.probe(tool)
    host_probe.check_host(host, target)
    log.info("smoke: on %s", host.describe())
    return {"probed": True, **host.to_json()}


def run(state: BuildState, ctx: Context) -> BuildState:
    """Load the staged payload — downloaded here, on a host that did not compile it — as its
    consumer does (the profile reads how from the payload's launch files), in a fresh process, through
    a compile cache holding only the entries the launch files name (pulled from the store): a graph the
    load has to compile fails the test. On a Neuron profile the host is probed first (`probe_host`)."""
    compiled = state.need("compiled")
    host = probe_host(state.target) if state.profile.neuron else None
    payload = materialize(ctx.store, compiled.build, ctx.work_dir)
    profile = state.profile
    load = profile.smoke_load(payload)
    cache = smoke_cache(state, ctx, load.cache_entries)
    result = smoke_test(
        SmokeInput(payload, load, profile.backend.name, cache, profile.python(), target=state.target, host=host)
    )
    log.info(
        "smoke: %s (load %.2fs, first token %.4fs, %.5fs/token)",
        result.reason,
        result.load_s or 0,
        result.time_to_first_token_s or 0,
        result.per_token_s or 0,
    )
    if result.measurement is not None:
        figures = result.measurement.figures
        log.info(
            "smoke: measured%s over %d repetitions: %s",
            " (SYNTHETIC: a fake consumer)" if result.measurement.synthetic else "",
            result.measurement.repetitions,
            ", ".join(f"{name} {f.median:.6g} (p10 {f.p10:.6g}, p90 {f.p90:.6g})" for name, f in figures.items()),
        )
    if not result.passed:
        raise SmokeFailed(f"{state.target.slug}: smoke test failed: {result.reason}")
    return state.model_copy(update={"smoke": SmokeRecord.model_validate(result.to_json())})


def smoke_cache(state: BuildState, ctx: Context, entries: tuple[str, ...] | None):  # -> CompileCache
    """A fresh compile cache for the smoke load: empty, or holding exactly the entries the payload's
    launch files point the consumer at, pulled from the store (an entry the store lacks stays
    missing, and the load that would compile it fails the test)."""
    from neuronforge.compilation.compile_cache import CompileCache

    root = ctx.work_dir / "smoke-cache" / state.need("key")[:12]
    shutil.rmtree(root, ignore_errors=True)
    toolchain = state.pinned_toolchain()
    cache = CompileCache(root, toolchain.compiler, toolchain.compiler_version, ctx.store)
    if entries:
        cache.preseed(list(entries))
    return cache


STAGE = Stage(
    "smoke",
    run,
    "load the staged payload as the consumer does, compiling forbidden; compare",
    "smoke",
    reads=("toolchain", "key", "compiled"),
    writes=("smoke",),
)
