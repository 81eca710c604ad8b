"""The instance table of docs/cli.md (`plan`'s section), rendered from `spec.instances.INSTANCES`, the
one list the planner, the form's choices and `--instance` take: the page cannot omit an instance the
tool accepts (trn2.3xlarge was missing from a hand-typed list). Regenerate it with:

    python -m neuronforge.interfaces.instances_table
"""

from __future__ import annotations

import sys

from neuronforge.common.docs_section import DOCS, GeneratedSection, write_all
from neuronforge.spec.instances import GIB, INSTANCES


def body() -> list[str]:
    rows = [
        "| instance | family | NeuronCores (default LNC) | HBM per core | tp degrees | LNC |",
        "|---|---|---|---|---|---|",
    ]
    for i in INSTANCES.values():
        lnc = ", ".join(str(n) for n in i.lnc_options)
        rows.append(
            f"| `{i.name}` | {i.family} | {i.cores()} | {i.hbm_per_core() // GIB} GiB | "
            f"{', '.join(str(t) for t in i.tp_degrees)} | {lnc} (default {i.default_lnc}) |"
        )
    return rows


SECTION = GeneratedSection(
    DOCS / "cli.md",
    "instances-table",
    "neuronforge.interfaces.instances_table",
    "spec/instances.py",
    body,
)
SECTIONS = (SECTION,)

if __name__ == "__main__":
    sys.exit(write_all(SECTIONS))
