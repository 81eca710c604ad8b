"""The catalog's advice, followed: `recompile` and `catalog stale` on a catalog with problems name the check
of that catalog (not the default one), which names the problems; a removed field's fix names `profiles`,
which lists the profiles and what each publishes."""

from __future__ import annotations

from pathlib import Path

import pytest

from neuronforge.farm.catalog import check_catalog
from neuronforge.interfaces.cli import main
from neuronforge.profiles import profile_names
from tests.advice import covers, follow, suggested
from tests.advice.fresh import home  # noqa: F401 (the fixture)

CATALOG = """models:
  - source: meta-llama/Llama-3.1-8B
    targets:
      - {instance_type: inf2.xlarge, tp_degree: 2, sequence_length: 2048, backend: tensorrt}
      - {instance_type: inf2.xlarge, tp_degree: 2, sequence_length: 1024, profile: cpu, publish_formats: [lmi]}
"""


@pytest.fixture
def catalog(home: Path, tmp_path: Path) -> Path:  # noqa: F811
    path = tmp_path / "elsewhere" / "models.yaml"
    path.parent.mkdir()
    path.write_text(CATALOG)
    return path


@covers(
    "neuronforge.interfaces.cli.recompile:cmd_recompile_with",
    "neuronforge.interfaces.cli.catalog:cmd_catalog_stale",
)
@pytest.mark.parametrize(
    ("argv", "site"),
    [
        (["recompile", "--dry-run"], "neuronforge.interfaces.cli.recompile:cmd_recompile_with"),
        (["catalog", "stale"], "neuronforge.interfaces.cli.catalog:cmd_catalog_stale"),
    ],
)
def test_a_catalog_with_problems_names_the_check_of_that_catalog(
    catalog: Path, tmp_path: Path, capsys, argv: list[str], site: str
) -> None:
    (tmp_path / "store").mkdir()
    assert main([*argv, str(catalog), "--store", str(tmp_path / "store")]) == 2
    (command,) = suggested(capsys.readouterr().err, site)
    done = follow(command, cwd=tmp_path)
    assert done.returncode == 3, done.stdout + done.stderr  # problems: exit 3, each with its line
    assert "models.yaml:4: " in done.stdout and "`backend: tensorrt` was replaced by `profile`" in done.stdout
    assert "models.yaml:5: " in done.stdout and "`publish_formats` was removed" in done.stdout


@covers("neuronforge.farm.catalog:_removed_fields")
def test_a_removed_field_s_fix_names_the_profiles_and_what_each_publishes(catalog: Path) -> None:
    backend, formats = check_catalog(catalog).problems
    (command,) = {
        *suggested(backend, "neuronforge.farm.catalog:_removed_fields"),
        *suggested(formats, "neuronforge.farm.catalog:_removed_fields"),
    }
    done = follow(command)
    assert done.returncode == 0, done.stderr
    assert all(name in done.stdout for name in profile_names()), done.stdout  # lists them
    assert done.stdout.count("  publishes: ") >= len(profile_names())  # what each publishes
