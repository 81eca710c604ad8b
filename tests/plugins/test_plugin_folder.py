"""The plugins folder as Airflow's own loader reads it: every `.py` file is imported as a module named by
its stem, so the catalog's package (`neuronforge_catalog_pages/`) must be left to its entry module
(`neuronforge_catalog.py`, which imports it by name) — `plugins/.airflowignore` says so."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

from tests.plugins.conftest import REPO

LOAD = """
import json, sys
from airflow._shared.plugins_manager.plugins_manager import _load_plugins_from_plugin_directory
plugins, errors = _load_plugins_from_plugin_directory(sys.argv[1])
print(json.dumps({"plugins": sorted(p.name for p in plugins), "errors": sorted(errors),
                  "modules": sorted(m for m in sys.modules if m in ("base", "index", "api", "__init__"))}))
"""


def _load(folder: Path) -> dict:
    """Airflow's loader over `folder`, in a fresh interpreter (it registers each file in sys.modules)."""
    done = subprocess.run(
        [sys.executable, "-c", LOAD, str(folder)], cwd=REPO, capture_output=True, text=True, timeout=300, check=False
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_airflow_loads_the_two_plugins_and_leaves_the_package_to_its_entry(tmp_path: Path) -> None:
    found = _load(REPO / "plugins")
    assert found == {"plugins": ["neuronforge_catalog", "neuronforge_forms"], "errors": [], "modules": []}

    # Without the ignore file, the loader imports each module of the package under its bare name.
    bare = tmp_path / "plugins"
    shutil.copytree(REPO / "plugins", bare, ignore=shutil.ignore_patterns(".airflowignore", "__pycache__"))
    unignored = _load(bare)
    assert unignored["modules"] or unignored["errors"], unignored
