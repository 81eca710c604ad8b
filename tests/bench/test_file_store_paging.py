"""The instrument of `bench/file_store_paging.py`: it builds the farm as publishing lays it out, checks
that the walk and the baseline give the same answers, and prints one row per operation and size (no
timing is judged here: the bench reports, a test never times)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "bench" / "file_store_paging.py"


def test_the_bench_compares_the_same_answers_and_prints_each_row(capsys, monkeypatch) -> None:
    spec = importlib.util.spec_from_file_location("file_store_paging", BENCH)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    monkeypatch.setattr(sys, "argv", ["file_store_paging.py", "--sizes", "40", "--rounds", "1"])
    assert module.main() == 0
    rows = [ln for ln in capsys.readouterr().out.splitlines() if ln.strip().startswith("40 ")]
    assert [r.split()[1] for r in rows] == ["store", "one"] and all("x  <= " in r for r in rows)


def test_the_farm_is_laid_out_as_publishing_lays_it_out(tmp_path: Path) -> None:
    spec = importlib.util.spec_from_file_location("file_store_paging", BENCH)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    keys = module.farm(tmp_path, 3)
    assert sorted(p.name for p in (tmp_path / "index").iterdir()) == sorted(f"{k}.json" for k in keys)
    manifests = sorted(tmp_path.glob("artifacts/*/*/*/*/*/manifest.json"))
    assert sorted(m.parent.name for m in manifests) == sorted(k[:12] for k in keys)
