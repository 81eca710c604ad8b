"""The names a deployment is known by in Airflow (DAG ids, Assets, Variables, the pool) are written once,
in `neuronforge/common/deployment_names.py` (issue 55): no module of the package, the Airflow layer, the
DAG files or the plugins spells one as a string of its own, so a rename cannot leave a copy behind."""

from __future__ import annotations

import ast
from pathlib import Path

from neuronforge.common import deployment_names

ROOT = Path(__file__).resolve().parents[1]
HOME = ROOT / "neuronforge/common/deployment_names.py"
FOLDERS = ("neuronforge", "neuronforge_airflow", "dags", "plugins")
NAMES = {*deployment_names.NAMES, deployment_names.NEURON_POOL}
# The same text naming something else: (file, text) -> what it names there.
OTHER_THINGS = {
    ("plugins/neuronforge_catalog.py", "neuronforge_catalog"): "the Airflow plugin's name",
    ("plugins/neuronforge_catalog_pages/base.py", "neuronforge_catalog"): "the catalog's logger",
}


def _written(path: Path) -> list[tuple[int, str]]:
    """(line, text) of each string constant of `path` that is one of the names (a docstring naming one in
    a sentence is not a constant equal to it)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return [
        (node.lineno, node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in NAMES
    ]


def test_each_deployment_name_is_written_only_in_its_home() -> None:
    copies = []
    for folder in FOLDERS:
        for path in sorted((ROOT / folder).rglob("*.py")):
            if path == HOME:
                continue
            where = path.relative_to(ROOT).as_posix()
            found = [(line, text) for line, text in _written(path) if (where, text) not in OTHER_THINGS]
            copies += [f"{where}:{line}: {text!r}" for line, text in found]
    assert not copies, "use neuronforge.common.deployment_names instead of:\n" + "\n".join(copies)


def test_the_home_holds_each_name_once_and_the_check_sees_a_copy(tmp_path: Path) -> None:
    assert len(set(deployment_names.NAMES)) == len(deployment_names.NAMES)
    assert set(deployment_names.DAG_IDS) <= set(deployment_names.NAMES)
    copy = tmp_path / "copy.py"
    copy.write_text(f'DAG = "{deployment_names.COMPILE_DAG}"\n"""the {deployment_names.COMPILE_DAG} DAG"""\n')
    assert _written(copy) == [(1, deployment_names.COMPILE_DAG)]


def test_the_dags_are_registered_under_the_declared_ids(airflow_db: str) -> None:
    from airflow.dag_processing.dagbag import DagBag

    bag = DagBag(dag_folder=str(ROOT / "dags"))
    assert not bag.import_errors, bag.import_errors
    assert set(bag.dag_ids) >= set(deployment_names.DAG_IDS)
