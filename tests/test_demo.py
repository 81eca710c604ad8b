"""`make demo` runs the core on the embedded default; a second run reuses the stored checkpoint."""

from __future__ import annotations

from pathlib import Path

import pytest

from neuronforge import demo


def test_demo_fetches_plans_and_reuses(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    monkeypatch.setenv("NEURONFORGE_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("NEURONFORGE_STORE", f"file://{tmp_path / 'store'}")
    demo.main()
    first = capsys.readouterr().out
    assert "fetched and verified" in first
    assert "tp=1: does not fit" in first and "use tp=2 (inf2.xlarge has 2 cores)" in first
    assert "[key]" in first and "/cpu-inf2.xlarge-tp1-b1-s256-bf16/" in first
    demo.main()
    assert "already in the store, checked against its manifest" in capsys.readouterr().out
    assert any(p.name == "MANIFEST.json" for p in (tmp_path / "store").rglob("*"))
