"""`make demo`: Airflow runs the DAG on the embedded default; the second run is a cache hit."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from neuronforge.interfaces import demo
from neuronforge.stores import open_store
from tests.conftest import Compiled


def test_demo_publishes_then_hits(compiled: Compiled, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    home = tmp_path / "home"
    # Same seeded model and target as the session's compile: seed the cache so no graph is rebuilt.
    shutil.copytree(compiled.work_dir / "compile-cache", home / "work" / "compile-cache")
    monkeypatch.setenv("NEURONFORGE_HOME", str(home))
    monkeypatch.delenv("NEURONFORGE_STORE", raising=False)
    monkeypatch.setenv("NEURONFORGE_HEARTBEAT_S", "0.5")  # the smoke test's child runs for seconds
    assert demo.main() == 0
    out = capsys.readouterr().out
    assert "Airflow's metadata DB: migrated (airflow db migrate)" in out
    assert f"run 1: {demo.INTRO_FIRST[False]}" in out  # an empty store: announced as the cold build it is
    assert "run 1: compiled and published" in out
    assert "run 2: cache hit: nothing fetched or compiled" in out
    # While a run works: the task it is in, and the steps' heartbeats from the task logs.
    assert "  run 1: task cpu_target.compile_graphs" in out
    smoke = "smoke test: loading the published payload and generating in a child process: still running ("
    assert f"  run 1: {smoke}" in out
    # A heartbeat is in the task log itself, logged by the task that ran the step.
    log = (home / "airflow" / "demo-run-1.log").read_text()
    assert smoke in log
    # The artifact shown and verified is the one this run published (its key, from the run's result).
    store = open_store(f"file://{home / 'store'}")
    (entry,) = store.list("index")
    key = entry.key.removeprefix("index/").removesuffix(".json")
    assert f"This demo's artifact (cache key {key}):" in out and f"cache key  {key}" in out
    assert re.search(r"Timings: cold build \d+s, cache hit \d+s", out)
    assert "1 published artifact(s) in file://" in out and "smoke      passed" in out
    assert "tp=1: does not fit" in out and "use tp=2 (inf2.xlarge has 2 cores)" in out
    assert "ok: the files match and the consumer's load-time rules hold" in out  # neuronforge verify
    assert "lmi-neuronx@2.21.1" in out and "not supported: tgi-neuron" in out  # neuronforge profiles --brief
    assert out.rstrip().endswith(demo.NEXT.strip()) and "Status of each line" not in out  # ends with what next
    assert (home / "store" / "index").is_dir()

    # `make demo` again: the database is current (not migrated), and run 1 is announced as the cache
    # hit it is
    migrate_log = home / "airflow" / "db-migrate.log"
    migrated_at = migrate_log.stat().st_mtime_ns
    assert demo.main() == 0
    again = capsys.readouterr().out
    assert "Airflow's metadata DB: current (revision " in again and migrate_log.stat().st_mtime_ns == migrated_at
    assert f"run 1: {demo.INTRO_FIRST[True]}" in again and "cold build" not in again.split("run 1: cache hit")[0]
    assert "run 1: cache hit: nothing fetched or compiled" in again
    assert re.search(r"Timings: cache hit \d+s and \d+s: the store already held this artifact", again)
