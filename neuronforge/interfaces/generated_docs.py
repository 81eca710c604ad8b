"""Every generated section of the docs, in one list: `python -m neuronforge.interfaces.generated_docs`
rewrites them all (what to run after changing an error class, a setting, a profile, the release table
or a citation), and `tests/test_generated_docs.py` fails on any that differs from the code.

Each section is declared once, beside the code that renders it (`GeneratedSection`); this module only
lists the modules. The settings tables of docs/configuration.md are the settings model's own
(`neuronforge.common.settings.render_page`) and are rewritten here too.
"""

from __future__ import annotations

import sys

from neuronforge.common import settings
from neuronforge.common.docs_section import GeneratedSection, write_all
from neuronforge.interfaces import (
    cli_synopsis,
    error_table,
    graph_env_table,
    instances_table,
    lifecycle_table,
    profiles_table,
    sources_page,
)

SECTIONS: tuple[GeneratedSection, ...] = (
    *cli_synopsis.SECTIONS,
    *error_table.SECTIONS,
    *graph_env_table.SECTIONS,
    *instances_table.SECTIONS,
    *lifecycle_table.SECTIONS,
    *profiles_table.SECTIONS,
    *sources_page.SECTIONS,
)


def stale() -> list[str]:
    """`page (section)` of each generated section that differs from what the code renders now."""
    out = [f"{s.page.name} ({s.name})" for s in SECTIONS if s.stale()]
    page = settings.DOCS_PAGE.read_text(encoding="utf-8")
    if settings.render_page(page) != page:
        out.append(f"{settings.DOCS_PAGE.name} (settings tables)")
    return out


def main() -> int:
    write_all(SECTIONS)
    page = settings.DOCS_PAGE.read_text(encoding="utf-8")
    settings.DOCS_PAGE.write_text(settings.render_page(page), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
