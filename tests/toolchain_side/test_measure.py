"""The measurement loop every backend runs where it loaded the payload (`neuronforge_toolchain.measure`):
warm-up rounds are run and dropped, each repetition samples both prompts, a consumer without per-step
times is measured at two points, and only a module carrying the fakes' marker is called synthetic."""

import sys
import types

import pytest

from neuronforge_toolchain import measure

SPEC = {"warmup": 2, "repetitions": 3, "short_ids": [1, 2], "long_ids": [1, 2] * 8, "new_tokens": 5}


def test_warmup_rounds_run_but_are_not_recorded() -> None:
    calls: list[tuple[int, int]] = []

    def sample(ids: list[int], n: int) -> tuple[float, float | None]:
        calls.append((len(ids), n))
        return float(len(calls)), (0.5 if n > 1 else None)

    samples = measure.measure(SPEC, sample, load_s=7.0)
    assert calls == [(2, 5), (16, 1)] * 5  # warm-up and repetitions: the short prompt decodes, the long one prefills
    assert samples == {
        "load_s": [7.0],
        "ttft_short_s": [5.0, 7.0, 9.0],  # the 3rd, 4th and 5th rounds: the first two were warm-up
        "ttft_long_s": [6.0, 8.0, 10.0],
        "per_token_s": [0.5, 0.5, 0.5],
    }


def test_two_point_sampling_takes_the_first_token_from_a_one_token_generation(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """per token = (t(n) - t(1)) / (n - 1): t(1) = 12 s and t(5) = 20 s give 2 s per later token."""
    clock = iter([0.0, 12.0, 100.0, 120.0])  # one token: 0 → 12; five tokens: 100 → 120
    monkeypatch.setattr(measure.time, "perf_counter", lambda: next(clock))
    sample = measure.two_point(lambda ids, n: None)
    assert sample([1], 5) == (12.0, 2.0)


def test_only_a_module_marked_as_a_fake_makes_the_numbers_synthetic(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = types.ModuleType("nf_fake_consumer")
    fake.FAKE_OF = "some-consumer 1.0 (Neuron SDK 9.9)"  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "nf_fake_consumer", fake)
    assert measure.is_fake("nf_fake_consumer")
    assert not measure.is_fake("json") and not measure.is_fake("no_such_module_here")
    assert measure.result({"measure": None}, lambda ids, n: (0.0, None), 1.0, "json", ()) is None
