"""`make demo`: Airflow runs the DAG on the embedded default; the second run is a cache hit."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from neuronforge import demo
from tests.conftest import Compiled


def test_demo_publishes_then_hits(compiled: Compiled, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    home = tmp_path / "home"
    # Same seeded model and target as the session's compile: seed the cache so no graph is rebuilt.
    shutil.copytree(compiled.work_dir / "compile-cache", home / "work" / "compile-cache")
    monkeypatch.setenv("NEURONFORGE_HOME", str(home))
    monkeypatch.delenv("NEURONFORGE_STORE", raising=False)
    assert demo.main() == 0
    out = capsys.readouterr().out
    assert "run 1: compiled and published" in out
    assert "run 2: cache hit: nothing fetched or compiled" in out
    assert "1 published artifact(s) in file://" in out and "smoke      passed" in out
    assert "tp=1: does not fit" in out and "use tp=2 (inf2.xlarge has 2 cores)" in out
    assert "ok: the files match and the consumer's load-time rules hold" in out  # neuronforge verify
    assert "lmi-neuronx@2.21.1" in out and "not supported: tgi-neuron" in out  # neuronforge profiles
    assert (home / "store" / "index").is_dir()
