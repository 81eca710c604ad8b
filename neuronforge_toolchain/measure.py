"""The smoke test's measurement protocol, one loop for every backend (the cpu backend's child runs it
too), so that every build's figures are measured the same way.

After the correctness generation, in the same process that loaded the payload (its load is the cold
one: one sample), `warmup` unrecorded rounds, then `repetitions` recorded rounds of:
- time to first token of the short prompt, and its per-output-token latency over the following tokens
  (the decode, at the compiled batch size);
- time to first token of the long prompt (ids filling the largest context bucket that leaves room for
  the new tokens; the worker builds them).

The request (`spec["measure"]`, built by `neuronforge.pipeline.stages.measure.plan`): {"warmup",
"repetitions", "short_ids", "long_ids", "new_tokens", "batch_size"}. The result: raw samples in
seconds by figure name ({"load_s": [...], "ttft_short_s": [...], "ttft_long_s": [...],
"per_token_s": [...]}), summarized by the worker. A consumer that is one of neuronforge's test fakes
(its module has `FAKE_OF`, naming the release it imitates; the real packages never have it) makes the
numbers `synthetic`: they prove the mechanism, not a Neuron device.
"""

import importlib
import time

from neuronforge_toolchain.detect import installed_version

FAKE_MARKER = "FAKE_OF"  # the attribute a fake consumer's top module has; the real package never does


def measure(spec, sample, load_s):
    """Raw samples of the protocol. `sample(ids, n)`: one generation of `n` new tokens from `ids`
    (replicated over the batch), returning (seconds to the first token, seconds per later token or
    None when n == 1)."""
    short, long_ids, new = spec["short_ids"], spec["long_ids"], spec["new_tokens"]
    samples = {"load_s": [load_s], "ttft_short_s": [], "ttft_long_s": [], "per_token_s": []}
    for i in range(spec["warmup"] + spec["repetitions"]):
        first, per_token = sample(short, new)
        long_first, _ = sample(long_ids, 1)
        if i < spec["warmup"]:
            continue
        samples["ttft_short_s"].append(first)
        samples["ttft_long_s"].append(long_first)
        if per_token is not None:
            samples["per_token_s"].append(per_token)
    return samples


def two_point(run):
    """`sample` for a consumer whose generation yields no per-step times: `run(ids, n)` generates `n`
    new tokens from `ids` (at the compiled batch size); the first token is a generation of one token,
    the per-token latency (t(n) - t(1)) / (n - 1)."""

    def timed(ids, n):
        started = time.perf_counter()
        run(ids, n)
        return time.perf_counter() - started

    def sample(ids, n):
        first = timed(ids, 1)
        if n == 1:
            return first, None
        return first, max(0.0, timed(ids, n) - first) / (n - 1)

    return sample


def hf_sample(generate, batch_size):
    """`sample` for a transformers-style `generate(input_ids, attention_mask=..., max_new_tokens=...,
    do_sample=False)`, the prompt replicated over the batch."""
    import torch

    def run(ids, n):
        batch = torch.tensor([ids] * batch_size)
        generate(batch, attention_mask=torch.ones_like(batch), max_new_tokens=n, do_sample=False)

    return two_point(run)


def is_fake(module_name):
    """Whether the consumer's module `module_name` is one of neuronforge's test fakes (`FAKE_MARKER`)."""
    try:
        module = importlib.import_module(module_name)
    except ImportError:
        return False
    return bool(getattr(module, FAKE_MARKER, None))


def runtime(packages):
    """{package: version} of the installed ones among `packages`, in their order (the consumer first)."""
    return {name: version for name in packages if (version := installed_version(name))}


def result(spec, sample, load_s, consumer, packages):
    """The `measurement` of a toolchain's `generate` result, or None when the worker asked for none."""
    if not spec.get("measure"):
        return None
    return {
        "samples": measure(spec["measure"], sample, load_s),
        "synthetic": is_fake(consumer),
        "runtime": runtime(packages),
    }
