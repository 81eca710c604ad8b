"""The profiles' tables in the docs, rendered from the data that holds them, so a page cannot name a
version or a role the data does not:

- docs/profiles.md's overview — each serving line, the SDK releases it is registered for with the
  toolchain each one pins (versions with their local labels, the serving image), its queues, its
  instance families and what it publishes — from the profile registry, whose pins come from the release
  table (`neuronforge/profiles/releases/`): registering a release is one data file, and this follows it;
- docs/catalog-and-recompiles.md's table of what each line reads of a release (`build`, `key`, `load`,
  `unread`: what an upgrade decides by, `farm.upgrade_decisions`) — from `releases/lines.toml`.

`tests/profiles/test_profiles_table.py` fails when a page differs; regenerate them with:

    python -m neuronforge.interfaces.profiles_table
"""

from __future__ import annotations

import sys

from neuronforge.common.docs_section import DOCS, GeneratedSection, cell, write_all
from neuronforge.profiles import registry, release_table
from neuronforge.profiles.base import ServingProfile
from neuronforge.records.sdk_release import ROLES

MODULE = "neuronforge.interfaces.profiles_table"


def _lines() -> dict[str, list[ServingProfile]]:
    """Each line's registered versions, oldest first, in the registry's order of lines."""
    out: dict[str, list[ServingProfile]] = {}
    for p in registry.all_profiles():
        out.setdefault(p.name, []).append(p)
    return out


def _toolchain(p: ServingProfile) -> str:
    """What one registered version pins: its SDK release, compiler and packages (as the consumer checks
    them: with the local label where the release table has one) and the image that serves it."""
    if not p.neuron:
        return f"no Neuron SDK: {p.title}"
    pins = ", ".join(f"{name} `{version}`" for name, version in p.pins.packages.items())
    image = f"; image `{p.serving_image}`" if p.serving_image else ""
    return f"SDK {p.pins.sdk_release}: {p.title}; neuronx-cc `{p.pins.compiler_version}`, {pins}{image}"


def _queues(versions: list[ServingProfile]) -> str:
    p = versions[-1]
    if not p.neuron:
        return "default"
    queues = {(v.queue, v.device_queue) for v in versions}
    compile_on, load_on = ("neuron-compile-<sdk>", "neuron-<sdk>") if len(versions) > 1 else (p.queue, p.device_queue)
    if all(q == d for q, d in queues):  # compiled where it loads: on a Neuron host
        return f"`{load_on}` (compile and smoke)"
    return f"`{compile_on}` (compile) / `{load_on}` (smoke)"


def _instances(versions: list[ServingProfile]) -> str:
    """The families each version serves; one list when every version serves the same."""
    families = [", ".join(sorted(v.instance_families)) or "any CPU" for v in versions]
    if len(set(families)) == 1:
        return families[0]
    return "; ".join(f"{v.version}: {f}" for v, f in zip(versions, families, strict=True))


def overview() -> list[str]:
    """The overview table of docs/profiles.md."""
    lines = [
        "| profile | SDK release: toolchain and image | queues | instances | published (`<artifact>/…`) |",
        "|---|---|---|---|---|",
    ]
    for name, versions in _lines().items():
        refs = ", ".join(f"`@{v.version}`" for v in versions)
        toolchains = "<br>".join(cell(_toolchain(v)) for v in versions)
        publishes = cell(versions[-1].publishes)
        cells = [f"`{name}` ({refs})", toolchains, _queues(versions), _instances(versions), publishes]
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def reads() -> list[str]:
    """The table of docs/catalog-and-recompiles.md: per line, the packages of a
    release it reads in each role (a reading that is not a fact marked), cheapest role last."""
    table = release_table.load()
    roles = tuple(reversed(ROLES))  # build, key, load, unread: from the dearest change to the cheapest
    lines = [
        "| line | " + " | ".join(f"`{r}`" for r in roles) + " |",
        "|---|" + "---|" * len(roles),
    ]
    for name, facts in table.lines.items():
        if not facts.reads:
            continue
        cells = []
        for role in roles:
            said = [
                ", ".join(r.packages) + ("" if r.verified else " (a reading, not verified)")
                for r in facts.reads
                if r.role == role
            ]
            cells.append(cell("; ".join(said)) or "-")
        lines.append(f"| `{name}` | " + " | ".join(cells) + " |")
    return lines


OVERVIEW = GeneratedSection(DOCS / "profiles.md", "profiles-table", MODULE, "the registry", overview)
READS = GeneratedSection(DOCS / "catalog-and-recompiles.md", "reads-table", MODULE, "releases/lines.toml", reads)
SECTIONS = (OVERVIEW, READS)


def stale() -> list[str]:
    """The pages whose section differs from what the data renders."""
    return [s.page.name for s in SECTIONS if s.stale()]


if __name__ == "__main__":
    sys.exit(write_all(SECTIONS))
