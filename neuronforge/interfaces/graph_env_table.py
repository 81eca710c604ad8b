"""The table of the stray-environment rule in docs/profiles.md ("The compile environment"), rendered
from `neuronforge.compilation.graph_env.RULES`, the rule's one home, so the page cannot say what the
backends do not do. `tests/test_graph_env.py` fails when the page differs. Regenerate it with:

    python -m neuronforge.interfaces.graph_env_table
"""

from __future__ import annotations

import sys

from neuronforge.common.docs_section import DOCS, GeneratedSection, cell, write_all
from neuronforge.compilation.graph_env import RULES

ACTIONS = {
    "refuse": "refused unless the backend sets it; recorded",
    "override": "set or cleared by the backend",
}


def body() -> list[str]:
    """The table's rows."""
    rows = [
        "| Variable | On the worker | Read by | What it changes | Evidence |",
        "|---|---|---|---|---|",
    ]
    for rule in RULES:
        names = ", ".join(f"`{n}`" for n in rule.names)
        evidence = "; ".join(f"**{e.proof}**: {cell(e.where)}" for e in rule.evidence)
        rows.append(f"| {names} | {ACTIONS[rule.action]} | {cell(rule.read_by)} | {cell(rule.effect)} | {evidence} |")
    return rows


SECTION = GeneratedSection(
    DOCS / "profiles.md",
    "graph-env-table",
    "neuronforge.interfaces.graph_env_table",
    "graph_env.RULES",
    body,
)
SECTIONS = (SECTION,)

if __name__ == "__main__":
    sys.exit(write_all(SECTIONS))
