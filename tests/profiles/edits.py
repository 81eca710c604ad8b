"""Edits that break one rule of an assembled artifact (the contract tests' BROKEN tables): each
returns a function applied to a fresh copy of the artifact's root."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

Edit = Callable[[Path], None]


def assert_named(profile, artifact, broken: dict[str, tuple[Edit, str]], case: str) -> None:
    """Break one rule of `artifact` (`broken[case]`: the edit and the words preflight must say)."""
    breaks, expected = broken[case]
    breaks(artifact.root)
    problems = profile.preflight(artifact)
    assert any(expected in p for p in problems), problems


def edit_json(rel: str, change: Callable[[dict], None]) -> Edit:
    def apply(root: Path) -> None:
        path = root / rel
        data = json.loads(path.read_text())
        change(data)
        path.write_text(json.dumps(data))

    return apply


def edit_text(rel: str, old: str, new: str) -> Edit:
    def apply(root: Path) -> None:
        text = (root / rel).read_text()
        assert old in text, old  # the edit must change something, or the case tests nothing
        (root / rel).write_text(text.replace(old, new))

    return apply


def delete(rel: str) -> Edit:
    return lambda root: (root / rel).unlink()
