"""The README's farm-index section: every command of its shell block runs, on a store the pipeline
published into (STORE in the README is that store's path), and exits 0."""

from __future__ import annotations

import re
import shlex
import shutil
from pathlib import Path

import pytest

from neuronforge.cli import main
from tests.conftest import Compiled

README = Path(__file__).resolve().parents[1] / "README.md"
HEADING = "## The farm index: a read costs what it shows, not what the store holds"


def _commands() -> list[str]:
    text = README.read_text()
    section = text[text.index(HEADING) :]
    section = section[: section.index("\n## ", 1)]
    (block,) = re.findall(r"```bash\n(.*?)```", section, re.S)
    return [line.split("#", 1)[0].strip() for line in block.splitlines() if line.strip()]


def test_the_section_has_its_examples() -> None:
    assert len(_commands()) == 5 and all(c.startswith("neuronforge ") for c in _commands())


@pytest.mark.parametrize("command", _commands())
def test_readme_farm_index_example(
    command: str, compiled: Compiled, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = tmp_path / "store"
    shutil.copytree(Path(compiled.store.root_uri.removeprefix("file://")), store)
    argv = [str(store) if a == "STORE" else a for a in shlex.split(command)[1:]]
    assert main(argv) == 0, capsys.readouterr()
    out = capsys.readouterr().out
    if argv[0] == "ls" and "--json" not in argv:
        assert "published artifact(s)" in out
