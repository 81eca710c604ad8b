"""Who opens the artifact store: the edges, once, and hand it down. The CLI opens it in one place
(`interfaces.cli.options.opened_store`), the Airflow layer through its hook (`hooks/store.py`); the core
only reads places that are not the artifact store (`stores.open_location`). A second place that opens the
store from a URI of its own choosing is how a task came to write where its deployment does not look."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
OPENERS = {
    "neuronforge/stores/__init__.py",
    "neuronforge/interfaces/cli/options.py",
    "neuronforge_airflow/hooks/store.py",
}


def _sources() -> list[Path]:
    return sorted(
        p for folder in ("neuronforge", "neuronforge_airflow", "plugins", "dags") for p in (ROOT / folder).rglob("*.py")
    )


def _imports_open_store(tree: ast.AST) -> list[int]:
    """Lines that bring `neuronforge.stores.open_store` into a module, however it is spelt."""
    lines = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module == "neuronforge.stores":
            lines += [node.lineno for alias in node.names if alias.name == "open_store"]
        elif isinstance(node, ast.Attribute) and node.attr == "open_store":
            lines.append(node.lineno)
    return lines


def test_only_the_cli_and_the_hook_open_the_artifact_store() -> None:
    found = {
        f"{path.relative_to(ROOT)}:{line}"
        for path in _sources()
        if str(path.relative_to(ROOT)) not in OPENERS
        for line in _imports_open_store(ast.parse(path.read_text(), str(path)))
    }
    assert found == set(), "open the store at the edge and hand it down (see neuronforge/stores/__init__.py)"


@pytest.mark.parametrize("spelling", ["from neuronforge.stores import open_store", "stores.open_store(uri)"])
def test_the_rule_sees_each_spelling(spelling: str) -> None:
    assert _imports_open_store(ast.parse(spelling)) == [1]


def test_a_cli_fetch_of_a_source_that_does_not_parse_creates_no_store(tmp_path: Path, capsys) -> None:
    from neuronforge.interfaces.cli import main

    store = tmp_path / "store"
    assert main(["fetch", "hf://", "--store", str(store), "--work-dir", str(tmp_path / "w")]) == 2
    assert not store.exists() and len(capsys.readouterr().err.strip().splitlines()) == 1
