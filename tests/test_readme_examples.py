"""The README's shell examples of the sections listed here run as written and print what the README
shows (a console block: `$ command` lines, then the output expected)."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[1] / "README.md"
# Sections whose console blocks are checked (a heading, up to the next heading of its level or above).
SECTIONS = ("### Where each stage runs: CPU workers compile, Neuron hosts load",)


def _section(text: str, heading: str) -> str:
    start = text.index(heading + "\n")
    level = heading.split(" ", 1)[0]
    end = re.search(rf"^#{{1,{len(level)}}} ", text[start + len(heading) :], re.M)
    return text[start : start + len(heading) + (end.start() if end else len(text))]


def _examples() -> list[tuple[str, str]]:
    """(command, expected output) for every `$ ` line of the sections' console blocks."""
    text = README.read_text()
    out = []
    for heading in SECTIONS:
        for block in re.findall(r"```console\n(.*?)```", _section(text, heading), re.S):
            for chunk in re.split(r"^\$ ", block, flags=re.M)[1:]:
                command, _, expected = chunk.partition("\n")
                out.append((command, expected))
    return out


@pytest.mark.parametrize(("command", "expected"), _examples(), ids=lambda v: v if "\n" not in v else "")
def test_readme_example(command: str, expected: str) -> None:
    argv = shlex.split(command)
    assert argv[0] == "neuronforge"
    done = subprocess.run(
        [str(Path(sys.executable).parent / "neuronforge"), *argv[1:]],
        capture_output=True,
        text=True,
        env={**os.environ},
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == expected


def test_the_sections_have_examples() -> None:
    assert len(_examples()) >= 3
