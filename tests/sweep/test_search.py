"""The sweep loop: the document's method as written, and the planned one finding the same valid
entries with fewer compiles, resumable without repeating a compile."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from neuronforge.farm.sweep import CacheConfig, Candidate, RecordLog, Space, TrialResult, records_path, sweep
from neuronforge.spec.instances import get_instance
from neuronforge.spec.modelconfig import ModelArch, load_config
from tests.test_planner import CONFIGS

LLAMA = ModelArch.from_config(load_config(CONFIGS / "meta-llama--Llama-3.1-8B.json"))
INF2 = get_instance("inf2.48xlarge")
NO_PLANNER = float("inf")  # oracles below are not memory models: only monotonicity may decide


@dataclass
class Staircase:
    """A monotone oracle: (tp, b, s) loads when b * s <= budget * tp. Counts its calls."""

    budget: int
    calls: list[Candidate] = field(default_factory=list)
    stop_after: int | None = None

    def __call__(self, c: Candidate) -> TrialResult:
        if self.stop_after is not None and len(self.calls) >= self.stop_after:
            raise KeyboardInterrupt  # the sweep killed midway
        self.calls.append(c)
        ok = c.batch_size * c.sequence_length <= self.budget * c.tensor_parallel_size
        return TrialResult(ok, "loaded" if ok else "NCC_EVRF009: out of device memory", 1.0)


def _header(method: str, space: Space) -> dict:
    """What the CLI and the sweep DAG give `RecordLog.load`: the sweep the record file is of."""
    return {"model": "m", "instance": INF2.name, "profile": "p", "method": method, "space": space.to_json()}


def run(tmp: Path, oracle, method: str, space: Space | None = None, retry_failed: bool = False, margin=NO_PLANNER):
    out = tmp / "llama.json"
    space = space or Space.build(LLAMA, INF2)
    log_file, earlier = RecordLog.load(records_path(out), _header(method, space))
    return sweep(
        LLAMA,
        INF2,
        space,
        oracle,
        CacheConfig.load(out, "meta-llama/Llama-3.1-8B", INF2.family),
        log_file,
        earlier,
        method=method,
        planner_margin=margin,
        retry_failed=retry_failed,
    )


def test_the_document_method_as_written(tmp_path: Path) -> None:
    space = Space.build(LLAMA, INF2, tps=[2], batch_sizes=[8, 4], seq_lens=[8192, 4096, 2048, 1024])
    oracle = Staircase(budget=8192)  # tp=2: b*s <= 16384
    result = run(tmp_path, oracle, "document", space)
    # tp up, batch down, sequence down; after a valid (tp, b, s) the shorter ones are skipped untried
    assert [c.key for c in oracle.calls] == [(2, 8, 8192), (2, 8, 4096), (2, 8, 2048), (2, 4, 8192), (2, 4, 4096)]
    out = json.loads((tmp_path / "llama.json").read_text())
    assert out == {
        "meta-llama/Llama-3.1-8B": [
            {"batch_size": 8, "sequence_length": 2048, "tensor_parallel_size": 2, "instance_type": "inf2"},
            {"batch_size": 4, "sequence_length": 4096, "tensor_parallel_size": 2, "instance_type": "inf2"},
        ]
    }
    records = {
        tuple(r[k] for k in ("tensor_parallel_size", "batch_size", "sequence_length")): r
        for r in json.loads(records_path(tmp_path / "llama.json").read_text())["candidates"]
    }
    assert records[(2, 8, 8192)]["outcome"] == "failed" and "NCC_EVRF009" in records[(2, 8, 8192)]["reason"]
    assert records[(2, 8, 1024)]["outcome"] == "skipped" and records[(2, 8, 1024)]["by"] == "rule"
    assert len(records) == len(space.candidates()) and result.attempts == 5


@settings(max_examples=25, deadline=None)
@given(budget=st.integers(min_value=256, max_value=2**20))
def test_planned_finds_the_same_valid_set_with_no_more_compiles(budget: int, tmp_path_factory) -> None:
    doc_dir, ours_dir = tmp_path_factory.mktemp("doc"), tmp_path_factory.mktemp("ours")
    doc = run(doc_dir, Staircase(budget), "document")
    ours = run(ours_dir, Staircase(budget), "planned")
    assert set(ours.valid) == set(doc.valid)
    assert ours.attempts <= doc.attempts
    doc_file = json.loads((doc_dir / "llama.json").read_text() or "{}") if (doc_dir / "llama.json").exists() else {}
    ours_file = json.loads((ours_dir / "llama.json").read_text()) if (ours_dir / "llama.json").exists() else {}
    key = "meta-llama/Llama-3.1-8B"
    assert sorted(map(json.dumps, doc_file.get(key, []))) == sorted(map(json.dumps, ours_file.get(key, [])))


def test_planned_is_at_least_twice_as_cheap_on_a_realistic_staircase(tmp_path: Path) -> None:
    doc = run(tmp_path / "d", Staircase(16384), "document")
    ours = run(tmp_path / "o", Staircase(16384), "planned")
    assert set(ours.valid) == set(doc.valid) and ours.attempts * 2 <= doc.attempts, (ours.attempts, doc.attempts)


def test_the_planner_rules_out_what_cannot_fit_and_says_why(tmp_path: Path) -> None:
    result = run(tmp_path, Staircase(10**9), "planned", margin=1.5)  # the oracle accepts all; planner decides
    by_planner = [r for r in result.records if r.by == "planner"]
    assert by_planner, "a 128 x 131072 batch of Llama-3.1-8B cannot fit 16 GiB at tp=2"
    assert all("more than 1.5 x the 16.0 GiB of inf2.48xlarge" in r.reason for r in by_planner)


@pytest.mark.parametrize("method", ["document", "planned"])
def test_an_interrupted_sweep_resumes_without_repeating_a_compile(method: str, tmp_path: Path) -> None:
    full = run(tmp_path / "full", Staircase(16384), method)
    first = Staircase(16384, stop_after=5)
    with pytest.raises(KeyboardInterrupt):
        run(tmp_path / "resumed", first, method)
    second = Staircase(16384)
    resumed = run(tmp_path / "resumed", second, method)
    assert not set(first.calls) & set(second.calls)
    assert len(first.calls) + len(second.calls) == full.attempts
    assert set(resumed.valid) == set(full.valid)
    # and a repeated sweep compiles nothing; failures are retried only when asked
    third = Staircase(16384)
    run(tmp_path / "resumed", third, method)
    assert third.calls == []
    again = Staircase(16384)
    run(tmp_path / "resumed", again, method, retry_failed=True)
    assert again.calls and all(
        not (c.batch_size * c.sequence_length <= 16384 * c.tensor_parallel_size) for c in again.calls
    )


def test_resume_from_a_cache_config_file_written_elsewhere(tmp_path: Path) -> None:
    """The document's resume rules: a (tp, batch) with a valid entry needs no more sequence lengths;
    batch sizes above a tp's largest valid batch are skipped."""
    out = tmp_path / "llama.json"
    entry = {"batch_size": 4, "sequence_length": 4096, "tensor_parallel_size": 2, "instance_type": "inf2"}
    out.write_text(json.dumps({"meta-llama/Llama-3.1-8B": [entry], "other/model": [{"batch_size": 1}]}))
    space = Space.build(LLAMA, INF2, tps=[2], batch_sizes=[8, 4, 1], seq_lens=[8192, 4096])
    oracle = Staircase(8192)
    run(tmp_path, oracle, "document", space)
    assert [c.key for c in oracle.calls] == [(2, 1, 8192)]  # batch 8 (> 4) and the (2, 4) pair skipped
    data = json.loads(out.read_text())
    assert data["other/model"] == [{"batch_size": 1}]  # other models' entries are kept
    assert entry in data["meta-llama/Llama-3.1-8B"]


@pytest.mark.parametrize("method", ["document", "planned"])
def test_deciding_one_candidate_at_a_time_equals_one_sweep(method: str, tmp_path: Path) -> None:
    """What the DAG's mapped tasks do: each decides up to its candidate from the records so far."""
    space = Space.build(LLAMA, INF2, tps=[2, 4], batch_sizes=[8, 4, 1], seq_lens=[8192, 4096, 2048, 1024])
    full = run(tmp_path / "full", Staircase(8192), method, space)
    oracle = Staircase(8192)
    out = tmp_path / "steps" / "llama.json"
    for c in space.candidates("planned" if method == "planned" else "document"):
        log_file, earlier = RecordLog.load(records_path(out), _header(method, space))
        before = len(oracle.calls)
        sweep(
            LLAMA,
            INF2,
            space,
            oracle,
            CacheConfig.load(out, "meta-llama/Llama-3.1-8B", INF2.family),
            log_file,
            earlier,
            method=method,
            planner_margin=NO_PLANNER,
            until=c,
        )
        assert len(oracle.calls) - before <= 1 and (len(oracle.calls) == before or oracle.calls[-1] == c)
    assert len(oracle.calls) == full.attempts
    assert json.loads(out.read_text()) == json.loads((tmp_path / "full" / "llama.json").read_text())
    assert json.loads(records_path(out).read_text())["finished"]
