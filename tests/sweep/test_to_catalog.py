"""`add_to_catalog` extends a hand-written catalog as text: comments and layout survive, targets of
a listed model go under its `targets:`, refused or duplicate targets are left out with a note."""

from __future__ import annotations

from pathlib import Path

import pytest

from neuronforge.common.errors import InvalidInput
from neuronforge.farm.catalog import load_catalog
from neuronforge.farm.sweep import Candidate
from neuronforge.farm.sweep.to_catalog import add_to_catalog, catalog_targets

CATALOG = """\
models:
  - source: org/a   # first
    config: a.json
    targets:
      - {instance_type: inf2.xlarge, tp_degree: 2, batch_size: 1, sequence_length: 4096, dtype: bf16, profile: cpu}
  - source: org/b
    targets:
      - {instance_type: inf2.xlarge, tp_degree: 2, batch_size: 1, sequence_length: 1024, dtype: bf16, profile: cpu}
"""


def test_targets_of_a_listed_model_go_under_it(tmp_path: Path) -> None:
    path = tmp_path / "models.yaml"
    path.write_text(CATALOG)
    targets = catalog_targets([Candidate(2, 1, 4096), Candidate(2, 4, 2048)], "inf2.xlarge", "cpu", "bf16")
    added, notes = add_to_catalog(path, "org/a", targets)
    assert added == 1 and notes == [n for n in notes if n.startswith("already in the catalog")] and len(notes) == 1
    text = path.read_text()
    assert "  - source: org/a   # first\n    config: a.json\n" in text
    entries = {e.source: e for e in load_catalog(path).entries}
    assert {(t.spec.batch_size, t.spec.sequence_length) for t in entries["org/a"].targets} == {(1, 4096), (4, 2048)}
    assert len(entries["org/b"].targets) == 1


def test_a_new_model_is_appended_and_a_missing_file_created(tmp_path: Path) -> None:
    path = tmp_path / "models.yaml"
    path.write_text(CATALOG)
    assert add_to_catalog(path, "org/c", catalog_targets([Candidate(2, 8, 1024)], "inf2.xlarge", "cpu", "bf16"))[0] == 1
    assert [e.source for e in load_catalog(path).entries] == ["org/a", "org/b", "org/c"]
    fresh = tmp_path / "new.yaml"
    assert add_to_catalog(fresh, "org/d", catalog_targets([Candidate(2, 1, 1024)], "inf2.xlarge", "cpu", "bf16"))[0]
    assert [e.source for e in load_catalog(fresh).entries] == ["org/d"]


def test_a_broken_catalog_is_not_touched(tmp_path: Path) -> None:
    path = tmp_path / "models.yaml"
    path.write_text("models:\n  - source: org/a\n    targets: []\n")
    with pytest.raises(InvalidInput, match="has problems"):
        add_to_catalog(path, "org/a", catalog_targets([Candidate(2, 1, 1024)], "inf2.xlarge", "cpu", "bf16"))
    assert path.read_text() == "models:\n  - source: org/a\n    targets: []\n"


def test_a_config_file_under_the_catalog_is_named_relative_to_it(tmp_path: Path) -> None:
    config = tmp_path / "configs" / "llama.json"
    config.parent.mkdir()
    config.write_text("{}")
    catalog = tmp_path / "models.yaml"
    target = {"instance_type": "inf2.xlarge", "tp_degree": 2, "sequence_length": 1024, "profile": "optimum-neuron"}
    assert add_to_catalog(catalog, "org/model", [target], config=config) == (1, [])
    (entry,) = load_catalog(catalog).entries
    assert entry.source == "org/model" and entry.config == config.resolve()
    assert '  config: "configs/llama.json"\n' in catalog.read_text()
