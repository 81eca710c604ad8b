"""Without `--try-command`, each tried candidate is an ordinary build of the pipeline (the real
local backend here): the sweep leaves the artifacts published and the compile cache warm, and a
second sweep reuses both."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.reliability.harness import cli


def test_a_sweep_builds_and_publishes_each_valid_candidate(
    served_llama: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("NEURONFORGE_HOME", str(tmp_path / "home"))
    store = tmp_path / "store"
    out = tmp_path / "tiny.json"
    argv = [
        "sweep",
        "--model",
        served_llama,
        "--instance",
        "inf2.xlarge",
        "--profile",
        "cpu",
        "--dtype",
        "fp32",
        "--batch-sizes",
        "2",
        "1",
        "--seq-lens",
        "128",
        "64",
        "--out",
        out,
        "--store",
        f"file://{store}",
        "--json",
    ]
    result = cli(argv)
    assert result.traceback is None and result.code == 0, result.text
    summary = json.loads(result.out)
    assert summary["attempts"] == 2  # (tp 2, batch 1, 128) and (2, 2, 128); the 64s follow by rule
    entries = json.loads(out.read_text())[str(served_llama)]
    assert {(e["batch_size"], e["sequence_length"]) for e in entries} == {(1, 128), (2, 128)}
    records = json.loads((tmp_path / "tiny.records.json").read_text())["candidates"]
    tried = [r for r in records if r["by"] == "tried"]
    assert all(r["outcome"] == "valid" and r["reason"].startswith("published: file://") for r in tried)
    listed = cli(["ls", f"file://{store}", "--json"])
    assert len(json.loads(listed.out)) == 2
    # a fresh record (deleted), same store: the builds are cache hits, nothing compiles again
    (tmp_path / "tiny.records.json").unlink()
    out.unlink()
    again = json.loads(cli(argv).out)
    assert again["attempts"] == 2
    records = json.loads((tmp_path / "tiny.records.json").read_text())["candidates"]
    assert all(r["reason"].startswith("cache-hit") for r in records if r["by"] == "tried")
