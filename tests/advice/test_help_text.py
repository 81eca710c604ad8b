"""Static advice, followed on a fresh home: help text, the trigger form's descriptions, the settings page
and the lifecycle tables name `profiles` or `config`; each, run, prints what the text says it does.

The target's field description and the form's are built once, when their module is imported (so another
test's suggestions may have pushed theirs out of `advice.recent()`): their command is read from the text
itself (`in_message`), the text as the surfaces show it."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from neuronforge.common import settings
from neuronforge.interfaces import lifecycle_table
from neuronforge.interfaces.cli import main, options, parser
from neuronforge.profiles import profile_names
from neuronforge.spec.target import TargetSpec, target_json_schema
from tests.advice import covers, follow, in_message, suggested
from tests.advice.fresh import home  # noqa: F401 (the fixture)

PROFILES = "`neuronforge profiles`"


def _lists_the_profiles(done: subprocess.CompletedProcess[str]) -> None:
    assert done.returncode == 0, done.stderr
    assert all(name in done.stdout for name in profile_names()), done.stdout


@pytest.fixture(scope="module")
def profiles_printed() -> subprocess.CompletedProcess[str]:
    """`neuronforge profiles`, run once as every text below suggests it (each test checks its text names
    exactly this command)."""
    with pytest.MonkeyPatch.context() as mp:
        mp.delenv("NEURONFORGE_STORE", raising=False)
        return follow("neuronforge profiles")


@covers("neuronforge.interfaces.cli.environment:cmd_profiles", "neuronforge.interfaces.lifecycle_table:body")
def test_the_brief_profiles_and_the_docs_table_name_the_profiles_that_print_each_line_s_status(
    home: Path,  # noqa: F811
    capsys,
    profiles_printed: subprocess.CompletedProcess[str],
) -> None:
    assert main(["profiles", "--brief"]) == 0
    said = capsys.readouterr().out.splitlines()[-1]
    assert suggested(said, "neuronforge.interfaces.cli.environment:cmd_profiles") == [PROFILES.strip("`")]
    table = lifecycle_table.body()
    assert suggested(table[0], "neuronforge.interfaces.lifecycle_table:body") == [PROFILES.strip("`")]
    _lists_the_profiles(profiles_printed)
    out = profiles_printed.stdout.splitlines()
    # each line's status per family at each release, as the docs' table has it ("prints the same")
    for row in (r for r in table if r.startswith("| `")):
        cells = [c.strip() for c in row.strip("|").split("|")]
        statuses = " ".join(cells[1:-1]).split()
        assert any(line.split()[: len(statuses)] == statuses for line in out), row
    assert "[1]" in profiles_printed.stdout  # with its sources


@covers(
    "neuronforge.interfaces.cli.options:_profile_help",
    "neuronforge.spec.target:TargetSpec",
    "neuronforge.spec.target:TargetSpec._no_backend_field",
    "neuronforge_airflow.params:<module>",
)
def test_the_profile_s_help_and_descriptions_name_the_command_that_lists_the_profiles(
    home: Path,  # noqa: F811
    profiles_printed: subprocess.CompletedProcess[str],
) -> None:
    from neuronforge_airflow.params import RECOMPILE_PARAMS

    assert suggested(options._profile_help(), "neuronforge.interfaces.cli.options:_profile_help") == [PROFILES[1:-1]]
    with pytest.raises(ValueError) as refused:
        TargetSpec.model_validate({"instance_type": "inf2.xlarge", "backend": "tensorrt"})
    assert suggested(str(refused.value), "neuronforge.spec.target:TargetSpec._no_backend_field") == [PROFILES[1:-1]]
    described = (target_json_schema()["properties"]["profile"]["description"], RECOMPILE_PARAMS["sdk"].description)
    assert [in_message(text) for text in described] == [[PROFILES[1:-1]]] * 2
    _lists_the_profiles(profiles_printed)


@covers("neuronforge.interfaces.cli.parser:_epilog")
def test_the_help_epilogue_names_the_command_that_prints_every_setting_and_its_source(home: Path) -> None:  # noqa: F811
    (command,) = suggested(parser._epilog(), "neuronforge.interfaces.cli.parser:_epilog")
    done = follow(command)
    assert done.returncode == 0, done.stderr
    shown = {line.split()[0]: line for line in done.stdout.splitlines() if line.startswith("NEURONFORGE_")}
    assert set(shown) >= {settings.variable(name) for name in settings.SETTINGS if name != "toolchain_pythons"}
    assert shown["NEURONFORGE_HOME"].rstrip().endswith("env NEURONFORGE_HOME")  # where its value came from
    assert shown["NEURONFORGE_PROFILE"].rstrip().endswith("default")


def test_the_settings_page_names_profiles_as_it_is_run(profiles_printed: subprocess.CompletedProcess[str]) -> None:
    """`settings` cannot build its text with `advice` (which reads the default store from it): its
    mention of `profiles` is checked here instead (test_sites.NOT_ADVICE); `approve KEY`: test_store_keys."""
    assert in_message(settings.SETTINGS["profile"].meaning) == [PROFILES[1:-1]]
    _lists_the_profiles(profiles_printed)
