"""The serving lines' lifecycle tables — each family's status at each SDK release, the releases each
line shipped (which neuronforge registers), and the source of every statement — rendered from the
profiles' `Lifecycle` data for `neuronforge profiles` (text, JSON) and for README.md and
docs/profiles.md (Markdown between markers, so the pages cannot say what the data does not).
`tests/profiles/test_lifecycle_table.py` fails when a page differs; regenerate them with:

    python -m neuronforge.interfaces.lifecycle_table
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from neuronforge.common import advice
from neuronforge.common.docs_section import GeneratedSection, write_all
from neuronforge.profiles import registry
from neuronforge.profiles.lifecycle import MEANING, NO_RELEASE_YET, Lifecycle, columns, phase_lines, status_row
from neuronforge.profiles.sdk_releases import RELEASES

ROOT = Path(__file__).resolve().parents[2]
NO_YET = f"{NO_RELEASE_YET}: the line has no release for that SDK yet (its newest release still serves the family)"


def _cols() -> list[tuple[str, bool]]:
    return columns(RELEASES)


def _header(cols: list[tuple[str, bool]]) -> list[str]:
    return [f"{c}*" if announced else c for c, announced in cols]


def _citations(lc: Lifecycle) -> dict[str, int]:
    return {s.url: i for i, s in enumerate(lc.sources(), 1)}


def _registered(line: str) -> set[str]:
    return {p.version for p in registry.versions_of(line)}


def to_json() -> list[dict[str, Any]]:
    """Every line's lifecycle as data (`neuronforge profiles --json`)."""
    cols = _cols()
    out = []
    for lc in registry.lifecycles().values():
        registered = _registered(lc.line)
        out.append(
            {
                "line": lc.line,
                "summary": lc.summary,
                "releases": [
                    {
                        "sdk": r.sdk,
                        "date": r.date,
                        "ships": r.ships,
                        "registered": r.sdk in registered,
                        "source": r.source.url,
                    }
                    for r in lc.releases
                ],
                "families": [
                    {
                        "families": list(f.families),
                        "last_release": f.last_release,
                        "moves_to": f.moves_to,
                        "status": dict(zip([c for c, _ in cols], status_row(f, cols, lc.newest), strict=True)),
                        "phases": [
                            {
                                "since": p.since,
                                "status": p.status.value,
                                "note": p.note,
                                "source": p.source.url,
                                "disputed": [
                                    {"status": d.status, "note": d.note, "source": d.source.url} for d in p.disputed
                                ],
                            }
                            for p in f.phases
                        ],
                    }
                    for f in lc.families
                ],
                "sources": [{"title": s.title, "url": s.url, "quote": s.quote} for s in lc.sources()],
            }
        )
    return out


def text() -> list[str]:
    """The lines `neuronforge profiles` prints after the profiles."""
    cols = _cols()
    head = _header(cols)
    out = ["", "Lifecycle by instance family (status at each Neuron SDK release; * announced, not released):"]
    for lc in registry.lifecycles().values():
        cite = _citations(lc)
        registered = _registered(lc.line)
        out += ["", f"{lc.line}: {lc.summary}"]
        out.append(
            "  releases: "
            + "; ".join(f"{r.sdk}{' (registered)' if r.sdk in registered else ''} {r.ships}" for r in lc.releases)
        )
        width = max(len("/".join(f.families)) for f in lc.families)
        out.append(f"  {'family':<{width}}  " + " ".join(f"{h:<13}" for h in head) + "last  moves to")
        for f in lc.families:
            cells = " ".join(f"{c:<13}" for c in status_row(f, cols, lc.newest))
            out.append(f"  {'/'.join(f.families):<{width}}  {cells}{f.last_release or '-':<6}{f.moves_to or '-'}")
        for f in lc.families:
            out.append(f"  {'/'.join(f.families)}: {phase_lines(f, cite)}")
        out += [f"  [{n}] {s.cite()}" for s in lc.sources() for n in [cite[s.url]]]
    out.append("")
    out.append("statuses: " + "; ".join(f"{s.value}: {m}" for s, m in MEANING.items()) + f"; {NO_YET}")
    return out


def body(details: bool = True) -> list[str]:
    """The lines of the section (module doc): the table, and with `details` each line's phases and sources."""
    cols = _cols()
    head = _header(cols)
    lines = [
        "Status of each line per instance family at each Neuron SDK release (`*` announced, not released; "
        f"`(last)`: the last release that serves the family). {advice.command('profiles')} prints the same, with "
        "every source.",
        "",
        "| line | family | " + " | ".join(head) + " | moves to |",
        "|---|---|" + "---|" * len(head) + "---|",
    ]
    for lc in registry.lifecycles().values():
        for f in lc.families:
            cells = " | ".join(status_row(f, cols, lc.newest))
            lines.append(f"| `{lc.line}` | {'/'.join(f.families)} | {cells} | {f.moves_to or '-'} |")
    lines += ["", "Statuses: " + "; ".join(f"**{s.value}**: {m}" for s, m in MEANING.items()) + f"; {NO_YET}.", ""]
    for lc in registry.lifecycles().values() if details else ():
        cite = _citations(lc)
        registered = _registered(lc.line)
        lines.append(f"- **`{lc.line}`**: {lc.summary}. Releases: " + "; ".join(
            f"{r.sdk}{' (registered)' if r.sdk in registered else ''}: {r.ships}" for r in lc.releases
        ) + ".")  # fmt: skip
        for f in lc.families:
            lines.append(f"  - {'/'.join(f.families)}: {phase_lines(f, cite)}.")
        lines.append("  - Sources: " + "; ".join(f"[{cite[s.url]}] [{s.title}]({s.url})" for s in lc.sources()) + ".")
    return lines


def markdown(details: bool = True) -> str:
    """The section of README.md (the table) and docs/profiles.md (the table, each family's phases and
    every source), markers included."""
    return (PROFILES if details else README).render()


def _section(page: Path, details: bool) -> GeneratedSection:
    return GeneratedSection(page, "lifecycle-table", MODULE, "the profiles", lambda: body(details))


MODULE = "neuronforge.interfaces.lifecycle_table"
# Each page, with whether it carries the details (phases and sources) under the table.
README = _section(ROOT / "README.md", details=False)
PROFILES = _section(ROOT / "docs" / "profiles.md", details=True)
SECTIONS = (README, PROFILES)


def stale_pages() -> list[Path]:
    """The pages whose section is not what the data renders now."""
    return [s.page for s in SECTIONS if s.stale()]


if __name__ == "__main__":
    sys.exit(write_all(SECTIONS))
