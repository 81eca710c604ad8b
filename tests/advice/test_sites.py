"""The call sites of `advice.command` and the scenarios that follow their advice agree both ways, and
no message outside `advice` types a suggested command by hand."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

from tests.advice import COVERED

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("neuronforge", "neuronforge_airflow", "plugins")
HERE = Path(__file__).resolve().parent


def _module(path: Path) -> str:
    """The module's name as it runs: Airflow puts `plugins/` itself on `sys.path` (it is no package)."""
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[1:] if parts[0] == "plugins" else parts)


class _Sites(ast.NodeVisitor):
    """(module:qualname of the enclosing function, line) of each `command(...)` call, where `command`
    is `neuronforge.common.advice.command` (imported by name, or as `advice.command`). The qualname is
    the one Python gives the code object (`outer.<locals>.inner`), which `advice.recent()` reports."""

    def __init__(self, module: str, names: set[str]) -> None:
        self.module, self.names = module, names
        self.stack: list[tuple[str, bool]] = []  # (name, is a function)
        self.sites: list[tuple[str, int]] = []

    def _scope(self, node: ast.AST, name: str, function: bool) -> None:
        self.stack.append((name, function))
        self.generic_visit(node)
        self.stack.pop()

    def visit_FunctionDef(self, node: ast.FunctionDef) -> None:
        self._scope(node, node.name, True)

    def visit_AsyncFunctionDef(self, node: ast.AsyncFunctionDef) -> None:
        self._scope(node, node.name, True)

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        self._scope(node, node.name, False)

    def visit_Call(self, node: ast.Call) -> None:
        f = node.func
        by_name = isinstance(f, ast.Name) and f.id in self.names
        by_module = isinstance(f, ast.Attribute) and f.attr == "command" and getattr(f.value, "id", None) == "advice"
        if by_name or by_module:
            parts = []
            for i, (name, _function) in enumerate(self.stack):
                if i and self.stack[i - 1][1]:
                    parts.append("<locals>")
                parts.append(name)
            self.sites.append((f"{self.module}:{'.'.join(parts) or '<module>'}", node.lineno))
        self.generic_visit(node)


def call_sites() -> dict[str, int]:
    sites: dict[str, int] = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            if path.name == "advice.py" and path.parent.name == "common":
                continue
            tree = ast.parse(path.read_text(encoding="utf-8"))
            names = {
                a.asname or a.name
                for n in ast.walk(tree)
                if isinstance(n, ast.ImportFrom) and n.module == "neuronforge.common.advice"
                for a in n.names
                if a.name == "command"
            }
            visitor = _Sites(_module(path), names)
            visitor.visit(tree)
            for site, line in visitor.sites:
                sites.setdefault(site, line)
    return sites


def _scenarios() -> dict[str, str]:
    for path in sorted(HERE.glob("test_*.py")):
        if path.name != Path(__file__).name:
            importlib.import_module(f"tests.advice.{path.stem}")
    return dict(COVERED)


def test_every_call_site_has_a_scenario_that_follows_its_advice() -> None:
    sites, covered = call_sites(), _scenarios()
    missing = sorted(f"{site} (line {line})" for site, line in sites.items() if site not in covered)
    assert not missing, "suggestions no scenario follows:\n" + "\n".join(missing)


def test_every_scenario_names_a_call_site_that_exists() -> None:
    sites, covered = call_sites(), _scenarios()
    gone = sorted(f"{site} <- {test}" for site, test in covered.items() if site not in sites)
    assert not gone, "scenarios of call sites that are gone:\n" + "\n".join(gone)


def _docstrings(tree: ast.AST) -> set[int]:
    ids = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                ids.add(id(first.value))
    return ids


def typed_by_hand() -> dict[str, int]:
    """Per module, the string literals (f-string parts included; docstrings not) that hold a backticked
    `neuronforge …` command: a suggestion typed by hand instead of built by `advice.command`."""
    found: dict[str, int] = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            tree = ast.parse(path.read_text(encoding="utf-8"))
            skip = _docstrings(tree)
            n = sum(
                1
                for node in ast.walk(tree)
                if isinstance(node, ast.Constant)
                and isinstance(node.value, str)
                and id(node) not in skip
                and "`neuronforge " in node.value
            )
            if n:
                found[str(path.relative_to(ROOT))] = n
    return found


def test_no_message_types_a_suggested_command_by_hand() -> None:
    assert typed_by_hand() == {path: n for path, (n, _why) in NOT_ADVICE.items()}


# Backticked `neuronforge …` literals that are not suggestions built from a state, each with why it cannot
# or need not be (counted the same way: a new one here is a decision, not a slip).
NOT_ADVICE: dict[str, tuple[int, str]] = {
    "neuronforge/common/interrupts.py": (
        1,
        "the interrupt line names the command that stopped (`neuronforge run` stopped during compile), not one "
        "to run: its `run it again` is the user's own command, whose arguments it does not have",
    ),
    "neuronforge/common/settings.py": (
        2,
        "help lines of settings (`neuronforge profiles`, `neuronforge approve KEY`): `advice` reads the default "
        "store from `settings`, so `settings` cannot import it without a cycle; test_help_text.py and "
        "test_store_keys.py follow them",
    ),
}
