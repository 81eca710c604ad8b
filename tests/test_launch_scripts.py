"""What a serving host runs is what `tests/data/launch-scripts/` holds, byte for byte: every launch script
and the Kubernetes manifests that carry them, as the profiles and a release channel render them
(`tests/launch_scripts.py`). A change to a script is a change to those files, reviewed as a diff."""

from __future__ import annotations

from tests.launch_scripts import FIXTURES, rendered


def test_every_launch_script_renders_exactly_its_fixture() -> None:
    now = rendered()
    files = (p for p in FIXTURES.rglob("*") if p.is_file() and p.name != "README.md")
    kept = {p.relative_to(FIXTURES).as_posix(): p.read_text() for p in files}
    assert sorted(now) == sorted(kept), "regenerate: python -m tests.launch_scripts write"
    differ = [rel for rel in now if now[rel] != kept[rel]]
    assert not differ, f"{differ} render otherwise than their fixtures (python -m tests.launch_scripts write)"
