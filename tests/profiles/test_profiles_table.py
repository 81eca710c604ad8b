"""docs/profiles.md's overview table is rendered from the registry (whose pins come from the release
table), so a registered release shows there with the versions the consumer checks, and nothing else."""

from __future__ import annotations

from neuronforge.interfaces import profiles_table
from neuronforge.profiles import registry


def test_the_pages_are_what_the_data_renders() -> None:
    assert profiles_table.stale() == [], "run `python -m neuronforge.interfaces.profiles_table`"


def test_the_reads_table_gives_each_line_its_roles_from_lines_toml() -> None:
    from neuronforge.profiles import release_table

    page = profiles_table.READS.on_page()
    rows = {line.split("|")[1].strip(): line.split("|")[2:-1] for line in page.splitlines() if line.startswith("| `")}
    header = next(line for line in page.splitlines() if line.startswith("| line"))
    assert header == "| line | `build` | `key` | `load` | `unread` |"
    for name, facts in release_table.load().lines.items():
        if not facts.reads:
            assert f"`{name}`" not in rows
            continue
        cells = dict(zip(("build", "key", "load", "unread"), (c.strip() for c in rows[f"`{name}`"]), strict=True))
        for reads in facts.reads:
            assert ", ".join(reads.packages) in cells[reads.role], (name, reads.role)
            assert reads.verified or "(a reading, not verified)" in cells[reads.role]
    # libtorch-neuronx-lite is a `key` of the plugin line, and a reading (the re-trace decides)
    key = rows["`vllm-neuron-native`"][1]
    assert "libtorch-neuronx-lite" in key and "not verified" in key


def test_every_registered_version_shows_its_pins_and_image() -> None:
    page = profiles_table.OVERVIEW.on_page()
    rows = {line.split("|")[1].strip(): line for line in page.splitlines() if line.startswith("| `")}
    for p in registry.all_profiles():
        row = next(r for name, r in rows.items() if name.startswith(f"`{p.name}` "))
        assert f"`@{p.version}`" in row
        if p.neuron:
            assert f"SDK {p.pins.sdk_release}: " in row and f"neuronx-cc `{p.pins.compiler_version}`" in row
            for name, version in p.pins.packages.items():
                assert f"{name} `{version}`" in row, (p.ref, name)
            assert p.serving_image is None or f"image `{p.serving_image}`" in row
    assert "vllm-neuron-cache/&lt;sdk&gt;/" in page  # outside a code span a `<sdk>` is text, not a tag
