"""Fixtures of the DAG tests."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.conftest import Compiled


@pytest.fixture
def home(compiled: Compiled, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A NEURONFORGE_HOME whose compile cache already holds the session's graphs (no recompiling)."""
    home = tmp_path / "home"
    shutil.copytree(compiled.work_dir / "compile-cache", home / "work" / "compile-cache")
    monkeypatch.setenv("NEURONFORGE_HOME", str(home))
    return home
