"""Every citation is one a user can open: no tracked file names the founding developers' notes (the
`shared/` folder beside the repository, which no clone holds) or a scratch folder of theirs; what the
package, its docs, DAGs, plugins and benches say never points into `shared/` at all. Where the vLLM
Neuron plugin's sources and the release table name the same page, they name it alike."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from neuronforge.compilation import vllm_neuron_sources
from neuronforge.profiles import release_table

ROOT = Path(__file__).resolve().parents[1]
# Written by an earlier commit and kept byte for byte (its text is a record, not a citation).
KEPT = "tests/data/written-by-main/"
# The notes and scratch files no clone holds (spelt in pieces so this file does not name them itself).
NOTES = re.compile(
    "|".join(
        re.escape(p)
        for p in (
            "shared" + "/reference",
            ".." + "/shared",
            "shared" + "/seeds",
            "shared" + "/model-configs",
            "/tmp" + "/research",
        )
    )
)
# What users read: here no path into a `shared/` folder at all.
USER_FACING = ("neuronforge/", "neuronforge_airflow/", "plugins/", "docs/", "bench/", "dags/")
ANY_SHARED = re.compile("shared" + "/")


def unopenable(root: Path, paths: list[str]) -> list[str]:
    """`path:line: text` for each line of `paths` (relative to `root`) that cites what a user cannot open."""
    found = []
    for rel in paths:
        if rel.startswith(KEPT) or not (root / rel).is_file():
            continue
        pattern = ANY_SHARED if rel.startswith(USER_FACING) else NOTES
        text = (root / rel).read_bytes().decode("utf-8", errors="replace")
        found += [f"{rel}:{n}: {line.strip()}" for n, line in enumerate(text.splitlines(), 1) if pattern.search(line)]
    return found


def tracked() -> list[str]:
    return subprocess.run(["git", "ls-files"], cwd=ROOT, check=True, capture_output=True, text=True).stdout.split()


def test_no_tracked_file_cites_what_a_user_cannot_open() -> None:
    files = tracked()
    assert len(files) > 100 and "neuronforge/profiles/vllm_native.py" in files  # the listing is the repository's
    assert unopenable(ROOT, files) == []


@pytest.mark.parametrize(
    ("rel", "line", "caught"),
    [
        ("neuronforge/x.py", "# see shared" + "/reference/NEURON.md", True),
        ("docs/x.md", "an S3 prefix `" + "shared/`", True),  # user-facing: any shared/ path
        ("tests/x.py", "as ../sha" + "red/seeds says", True),
        ("tests/x.py", "quoted in /tmp" + "/research/plugin38.md", True),
        ("tests/x.py", 'store.get_tree("' + 'shared/", dest)', False),  # a test may name a prefix shared/
        ("neuronforge/x.py", "a shared, pre-warmed copy", False),
        (KEPT + "x.json", '{"note": "shared' + '/reference/CONSUMERS.md"}', False),  # a record, kept as written
    ],
)
def test_the_check_catches_a_planted_citation(tmp_path: Path, rel: str, line: str, caught: bool) -> None:
    (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
    (tmp_path / rel).write_text(f"first line\n{line}\n")
    assert unopenable(tmp_path, [rel]) == ([f"{rel}:2: {line}"] if caught else [])


@pytest.mark.parametrize(
    ("constant", "source_id"),
    [("CACHE_CODE", "vllm-native-cache-key"), ("LNL_CACHE_CODE", "lnl-cache")],
)
def test_a_source_the_release_table_holds_is_cited_by_its_url(constant: str, source_id: str) -> None:
    assert getattr(vllm_neuron_sources, constant) == release_table.load().sources[source_id].url
