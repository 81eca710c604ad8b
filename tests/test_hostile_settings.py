"""Every setting (`settings.SETTINGS`: each `NEURONFORGE_*` variable, the per-release interpreter too) set
to each hostile value: `neuronforge config` and a command that reads the store (`ls`) either take it or
refuse it in one line naming the variable, exit 2 — no traceback, nothing written (issue 54). The
variables are read from the settings model: a new setting is covered without editing this file.

A NUL cannot be in an environment variable (the kernel's environ is NUL-terminated strings; Python's
`os.environ` refuses one), so that class is left out here."""

from __future__ import annotations

import logging
import os
from pathlib import Path

import pytest

from neuronforge.common import settings
from neuronforge.interfaces.cli import main
from tests import hostile

VARIABLES = [
    settings.toolchain_python_var("2.21.1") if name == "toolchain_pythons" else settings.variable(name)
    for name in settings.SETTINGS
]
VALUES = {kind: value for kind, value in hostile.HOSTILE.items() if "\x00" not in value}
# Values no setting takes: each is refused naming its variable.
NEVER_VALID = {"newline", "escape", "c1", "separator", "long"}


@pytest.fixture
def place(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    (tmp_path / "home" / "store").mkdir(parents=True)
    (tmp_path / "cwd" / "here").mkdir(parents=True)
    for var in [v for v in os.environ if v.startswith(settings.ENV_PREFIX)]:
        monkeypatch.delenv(var)
    monkeypatch.setenv("NEURONFORGE_HOME", str(tmp_path / "home"))
    monkeypatch.chdir(tmp_path / "cwd" / "here")
    # `main` configures logging once per process (`basicConfig`): a handler an earlier test's `main` left
    # would write to that test's closed capture. Each test's first `main` installs its own.
    monkeypatch.setattr(logging.root, "handlers", [])
    return tmp_path


def test_every_setting_is_walked() -> None:
    assert len(VARIABLES) == len(settings.SETTINGS) >= 25
    assert {"NEURONFORGE_HOME", "NEURONFORGE_HEARTBEAT_S", "NEURONFORGE_TOOLCHAIN_PYTHON_2_21_1"} <= set(VARIABLES)


@pytest.mark.parametrize("variable", VARIABLES)
def test_a_hostile_setting_is_taken_or_refused_in_one_line_naming_it(
    variable: str, place: Path, monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    failures = []
    for kind, value in VALUES.items():
        monkeypatch.setenv(variable, value)
        for command in (["config"], ["ls"]):
            before = hostile.tree(place)
            try:
                code = main(command)
            except SystemExit as exc:
                code = exc.code
            except Exception as exc:  # what `main` leaves unexplained: a traceback for a user
                code = f"a traceback: {type(exc).__name__}: {str(exc)[:200]}"
            err = capsys.readouterr().err
            said = hostile.error_lines(err)
            problem = hostile.problem(code, said, err, hostile.changed(before, hostile.tree(place)))
            if not problem and code == 2 and variable not in said[0] and command == ["config"]:
                problem = "refused without naming the variable"
            if not problem and kind in NEVER_VALID and code != 2:
                problem = "taken"
            if problem:
                failures.append(f"{' '.join(command)} [{kind}] {problem}: exit {code}: {err[-300:]!r}")
                hostile.undo(place, before)
    assert not failures, f"{variable}:\n" + "\n".join(failures)
