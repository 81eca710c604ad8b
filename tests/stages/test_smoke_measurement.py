"""The smoke stage's measurement protocol and numerics (issue 53): every build's smoke record carries
its figures (median, p10/p90, spread over the configured repetitions; the cold load as one sample),
the host and runtime they were measured on, and its fixed prompts' first tokens with their top-k
logits. A slower build measures slower; a fake Neuron consumer's numbers are marked synthetic."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import torch

from neuronforge.common import settings
from neuronforge.compilation.compile_cache import CompileCache
from neuronforge.pipeline.stages import measure
from neuronforge.pipeline.stages.smoke import SmokeInput, SmokeResult, smoke_test
from neuronforge.profiles import get_profile
from neuronforge.records.smoke import FIGURES, NUMERICS_TOKENS, NUMERICS_TOP, PER_TOKEN, TOKENS_PER_S, TTFT_SHORT
from neuronforge.spec.target import TargetSpec
from tests.conftest import NEURON_TARGET, TARGET, Compiled


# -- the summary ------------------------------------------------------------------------------------
def test_a_figure_is_the_median_and_p10_p90_by_linear_interpolation_with_its_spread() -> None:
    f = measure.summarize([5.0, 1.0, 4.0, 2.0, 3.0])
    assert (f.samples, f.median, f.p10, f.p90) == (5, 3.0, pytest.approx(1.4), pytest.approx(4.6))
    assert f.spread == pytest.approx((4.6 - 1.4) / 3.0)
    even = measure.summarize([1.0, 2.0, 3.0, 4.0])
    assert (even.median, even.p10, even.p90) == (2.5, pytest.approx(1.3), pytest.approx(3.7))


def test_fewer_than_three_samples_have_no_spread() -> None:
    one = measure.summarize([7.5])
    assert (one.samples, one.median, one.p10, one.p90, one.spread) == (1, 7.5, 7.5, 7.5, None)
    assert measure.summarize([1.0, 3.0]).spread is None
    assert measure.summarize([1.0, 2.0, 3.0]).spread is not None
    with pytest.raises(ValueError, match="at least one sample"):
        measure.summarize([])


def test_tokens_per_second_is_the_batch_over_each_per_token_sample() -> None:
    asked = {"warmup": 1, "repetitions": 3, "short_ids": [1] * 4, "long_ids": [1] * 20, "new_tokens": 8,
             "batch_size": 4}  # fmt: skip
    child = {
        "samples": {"load_s": [2.0], TTFT_SHORT: [0.1] * 3, "ttft_long_s": [0.3] * 3, PER_TOKEN: [0.01, 0.02, 0.04]},
        "synthetic": True,
        "runtime": {"neuronx-distributed-inference": "0.6.10598", "neuronx-cc": "2.21.33363.0"},
    }
    m = measure.measurement(child, asked, measure.host_of({"instance_type": "inf2.xlarge"}, child["runtime"], 1.5))
    assert m.synthetic and (m.batch_size, m.short_prompt_tokens, m.long_prompt_tokens) == (4, 4, 20)
    assert m.figures[TOKENS_PER_S].median == pytest.approx(200.0)  # 4 / 0.02
    assert m.figures[PER_TOKEN].median == pytest.approx(0.02) and m.figures["load_s"].samples == 1
    assert (m.host.instance_type, m.host.runtime_line) == ("inf2.xlarge", "neuronx-distributed-inference 0.6")


def test_the_long_prompt_fills_the_largest_bucket_that_leaves_room_for_the_new_tokens() -> None:
    target = TargetSpec.parse({**TARGET, "max_context_length": None, "context_encoding_buckets": [16, 32, 60]})
    asked = measure.plan(target, [[5, 6, 7], [8, 9]], new_tokens=8, warmup=1, repetitions=5)
    assert asked["short_ids"] == [8, 9] and len(asked["long_ids"]) == 32  # 60 + 8 > 64
    assert asked["long_ids"][:7] == [5, 6, 7, 5, 6, 7, 5]  # the first prompt repeated: the same ids every build
    assert measure.long_prompt_tokens(TargetSpec.parse(TARGET), 8) == 32  # no buckets: the context length


def test_numerics_keep_the_first_tokens_and_the_top_logits_of_each_step() -> None:
    logits = torch.zeros(10, 50)
    logits[:, 7], logits[:, 3] = 2.123456789, 1.0
    rows = [{"prompt_ids": [1, 2], "tokens": [7] * 10, "logits": logits}, {"prompt_ids": [3], "tokens": [4, 5]}]
    n = measure.numerics(["a", "b"], rows)
    first, second = n.prompts
    assert first.tokens == [7] * NUMERICS_TOKENS and len(first.top_ids) == NUMERICS_TOKENS
    assert first.top_ids[0][:2] == [7, 3] and len(first.top_ids[0]) == NUMERICS_TOP
    assert first.top_logits[0][:2] == [2.12346, 1.0]  # six significant digits
    assert (second.tokens, second.top_ids, second.top_logits) == ([4, 5], [], [])  # a backend without logits


# -- the protocol, run by the smoke stage -------------------------------------------------------------
def test_a_published_cpu_build_carries_all_five_figures_its_host_and_numerics(compiled: Compiled) -> None:
    smoke = compiled.first.published.manifest.smoke
    m = smoke.measurement
    assert m is not None and not m.synthetic
    assert set(m.figures) == set(FIGURES)
    repetitions = settings.default("smoke_repetitions")
    assert (m.repetitions, m.warmup) == (repetitions, settings.default("smoke_warmup"))
    assert m.figures["load_s"].samples == 1 and m.figures["load_s"].spread is None
    assert all(m.figures[f].samples == repetitions for f in FIGURES if f != "load_s")
    assert all(f.p10 <= f.median <= f.p90 and f.median > 0 for f in m.figures.values())
    assert m.host.instance_type == "cpu" and m.host.cores >= 1 and m.host.runtime_line.startswith("torch ")
    assert m.long_prompt_tokens == 32 > m.short_prompt_tokens  # the target's context length: 32 of 64
    assert smoke.numerics is not None and len(smoke.numerics.prompts) == len(smoke.prompts)
    for kept, row in zip(smoke.numerics.prompts, smoke.prompts, strict=True):
        assert kept.tokens == row["tokens"][:NUMERICS_TOKENS]
        assert [ids[0] for ids in kept.top_ids] == kept.tokens  # greedy: the top logit is the token generated
        assert all(len(step) == NUMERICS_TOP and step == sorted(step, reverse=True) for step in kept.top_logits)


def _measured(payload: Path, target: TargetSpec, cache: Path) -> SmokeResult:
    profile = get_profile(target.profile)
    load = profile.smoke_load(payload)
    store_cache = CompileCache(cache, "torch-inductor", "0.0.0", None)
    return smoke_test(SmokeInput(payload, load, "cpu", store_cache, profile.python(), target=target))


def test_the_test_delay_hook_makes_the_same_build_measure_slower(
    compiled: Compiled, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """NEURONFORGE_TEST_DECODE_DELAY_S sleeps in each forward pass of the smoke child: per-token latency
    and time to first token grow by about the delay; the repetitions follow the setting."""
    payload = tmp_path / "payload"
    shutil.copytree(compiled.build_dir, payload)
    monkeypatch.setenv("NEURONFORGE_SMOKE_REPETITIONS", "3")
    monkeypatch.setenv("NEURONFORGE_SMOKE_WARMUP", "0")
    plain = _measured(payload, compiled.target, tmp_path / "cache-plain")
    delay = 0.1
    monkeypatch.setenv("NEURONFORGE_TEST_DECODE_DELAY_S", str(delay))
    slow = _measured(payload, compiled.target, tmp_path / "cache-slow")
    assert plain.passed and slow.passed and plain.measurement is not None and slow.measurement is not None
    assert slow.measurement.repetitions == 3 and slow.measurement.figures[PER_TOKEN].samples == 3
    for name in (PER_TOKEN, TTFT_SHORT):
        fast, slower = plain.measurement.figures[name], slow.measurement.figures[name]
        # every slow sample holds the sleep; the tiny model's own forward pass takes milliseconds (the
        # fast p10, not its median: a loaded 2-core machine can stall two of three samples)
        assert slower.p10 >= delay > 2 * fast.p10, (name, fast, slower)
    assert slow.measurement.figures[TOKENS_PER_S].median < 1 / delay < plain.measurement.figures[TOKENS_PER_S].p90


def test_a_fake_neuron_consumer_measures_by_the_same_protocol_but_synthetic(
    fake_neuron: Path, served_llama: Path, tmp_path: Path
) -> None:
    """NxD Inference's load through the fake SDK 2.26.1 (tests/fakes): the same figures, through the
    consumer's own generate, marked synthetic — nothing pretends to be a Neuron measurement."""
    from neuronforge.pipeline.runner import run_target
    from neuronforge.stores import open_store

    store = open_store(f"file://{tmp_path / 'store'}")
    target = TargetSpec.parse({**NEURON_TARGET, "profile": "vllm-neuron@2.26.1"})
    out = run_target(str(served_llama), target, store, tmp_path / "work")
    assert out.status == "published"
    m = out.published.manifest.smoke.measurement
    assert m is not None and m.synthetic and set(m.figures) == set(FIGURES)
    assert m.host.runtime_line.startswith("neuronx-distributed-inference ") and m.host.instance_type != "cpu"
    assert all(f.median > 0 for f in m.figures.values())
    numerics = out.published.manifest.smoke.numerics
    assert numerics is not None and all(p.tokens and not p.top_ids for p in numerics.prompts)  # tokens, no logits


def test_the_delay_hook_is_off_unless_set_and_refuses_what_is_not_seconds() -> None:
    from neuronforge.common.errors import InvalidInput

    var = settings.TEST_DECODE_DELAY_VAR
    assert settings.test_decode_delay_s({}) == 0.0 == settings.test_decode_delay_s({var: " "})
    assert settings.test_decode_delay_s({var: "0.25"}) == 0.25
    with pytest.raises(InvalidInput, match=r"NEURONFORGE_TEST_DECODE_DELAY_S='soon' is not a number of seconds"):
        settings.test_decode_delay_s({var: "soon"})
