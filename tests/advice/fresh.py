"""A fresh home for a scenario: nothing of the machine's own settings reaches the command it follows."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """NEURONFORGE_HOME in the test's temp dir, no NEURONFORGE_STORE: the default store is under it, so a
    suggestion about another store must name it (`--store`) to be followed here."""
    monkeypatch.setenv("NEURONFORGE_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("NEURONFORGE_STORE", raising=False)
    return tmp_path / "home"
