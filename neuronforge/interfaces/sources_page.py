"""docs/sources.md: every source neuronforge's facts about the outside world cite, rendered from the
data that cites them, so a reader can open each one and the page cannot list what the code does not
cite (nor miss what it does):

- the release table's sources (`neuronforge/profiles/releases/sources.toml`): AWS's release notes,
  manifest and announcements, each with the words the table relies on;
- the serving lines' lifecycle statements (`Lifecycle.sources` of each registered line);
- where the vLLM Neuron plugin's behaviour was read (`neuronforge.compilation.vllm_neuron_sources`:
  each constant with the comment that says what it is cited for).

`tests/test_sources_page.py` fails when the page differs; regenerate it with:

    python -m neuronforge.interfaces.sources_page
"""

from __future__ import annotations

import inspect
import re
import sys

from neuronforge.common.docs_section import DOCS, GeneratedSection, cell, write_all
from neuronforge.compilation import vllm_neuron_sources
from neuronforge.profiles import registry, release_table

MODULE = "neuronforge.interfaces.sources_page"


def _link(url: str) -> str:
    """A link where the citation is an address; `owner/repo@commit path` as code (it is not one)."""
    return f"<{url}>" if url.startswith(("https://", "http://")) else f"`{url}`"


def release_sources() -> list[str]:
    lines = ["| id | source | what the table relies on |", "|---|---|---|"]
    for sid, s in release_table.load().sources.items():
        quote = f"“{cell(s.quote)}”" if s.quote else ""
        lines.append(f"| `{sid}` | {cell(s.title)}: {_link(s.url)} | {quote} |")
    return lines


def lifecycle_sources() -> list[str]:
    lines = ["| line | source |", "|---|---|"]
    for lc in registry.lifecycles().values():
        for s in lc.sources():
            lines.append(f"| `{lc.line}` | {cell(s.title)}: {_link(s.url)} |")
    return lines


def _constants() -> list[tuple[str, str, str]]:
    """(name, value, the comment above it) of each citation constant, in the module's order."""
    out = []
    comment: list[str] = []
    for line in inspect.getsource(vllm_neuron_sources).splitlines():
        if line.startswith("#"):
            comment.append(line.lstrip("# ").strip())
            continue
        if m := re.match(r"^([A-Z][A-Z0-9_]*) = ", line):
            value = getattr(vllm_neuron_sources, m.group(1))
            if isinstance(value, str):
                out.append((m.group(1), value, " ".join(comment)))
        comment = []
    return out


def plugin_sources() -> list[str]:
    lines = ["| name in the code | source | cited for |", "|---|---|---|"]
    for name, value, why in _constants():
        lines.append(f"| `{name}` | {_link(value)} | {cell(why)} |")
    return lines


PAGE = DOCS / "sources.md"
SECTIONS = (
    GeneratedSection(PAGE, "release-sources", MODULE, "releases/sources.toml", release_sources),
    GeneratedSection(PAGE, "lifecycle-sources", MODULE, "the lines' lifecycles", lifecycle_sources),
    GeneratedSection(PAGE, "plugin-sources", MODULE, "compilation/vllm_neuron_sources.py", plugin_sources),
)

if __name__ == "__main__":
    sys.exit(write_all(SECTIONS))
