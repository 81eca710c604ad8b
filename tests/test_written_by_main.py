"""What an earlier commit published is still found: the release table and the upgrade decisions of issue
52 must not move a cache key, or every build of a farm would be stale after an upgrade that changed
nothing the compiler sees.

`tests/data/written-by-main/` was written at the commit its `keys.json` names (main before issue 52):
`keys.json` by `keys.py` there (every registered profile × a few targets it serves, under a fixed
toolchain of the profile's own pins: the key and the material it hashes), and `store/` by that commit's
`neuronforge run --model builtin:tiny-llama --instance inf2.xlarge --tp 1 --seq-len 64 --profile cpu`
(its compile-cache entries and the checkpoint mirror left out: a hit reads neither).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.reliability.harness import cli

HERE = Path(__file__).parent / "data" / "written-by-main"
ROWS = json.loads((HERE / "keys.json").read_text())["rows"]
TARGET = ["--instance", "inf2.xlarge", "--tp", "1", "--seq-len", "64", "--profile", "cpu"]


@pytest.mark.parametrize("row", ROWS, ids=[f"{r['target']['profile']}|{r['key'][:12]}" for r in ROWS])
def test_every_key_of_the_earlier_commit_is_computed_again(row: dict) -> None:
    from neuronforge.profiles.registry import compile_request
    from neuronforge.profiles.request import cache_key, cache_key_material
    from neuronforge.spec.source import ModelSource
    from neuronforge.spec.target import TargetSpec
    from neuronforge.spec.toolchain import Toolchain

    source = ModelSource("hub", "org/model", resolved_revision="0123456789abcdef0123456789abcdef01234567")
    request = compile_request(source, TargetSpec.parse(row["target"]))
    toolchain = Toolchain.from_json(row["toolchain"])
    assert cache_key_material(request, toolchain) == row["material"]
    assert cache_key(request, toolchain) == row["key"]


@pytest.fixture
def earlier_store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    store = tmp_path / "store"
    shutil.copytree(HERE / "store", store)
    monkeypatch.setenv("NEURONFORGE_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("NEURONFORGE_STORE", raising=False)
    return store


def _published_key(store: Path) -> str:
    (entry,) = (store / "index").glob("*.json")
    return json.loads(entry.read_text())["cache_key"]


def test_the_earlier_store_verifies_and_its_build_is_a_hit(earlier_store: Path) -> None:
    from neuronforge.profiles.registry import detect_toolchain

    manifest = json.loads(next(earlier_store.glob("artifacts/**/manifest.json")).read_text())
    here = detect_toolchain("cpu")
    assert here.compiler_version == manifest["toolchain"]["compiler_version"], (
        "this environment's torch is not the one the fixture was built with: a toolchain change is a new key "
        "by design; rewrite tests/data/written-by-main/store with the commit its keys.json names"
    )
    checked = cli(["verify", "--store", earlier_store])
    assert checked.code == 0 and "matches the manifests" in checked.out, checked.text
    ran = cli(["run", "--model", "builtin:tiny-llama", *TARGET, "--store", earlier_store])
    assert ran.code == 0, ran.text
    result = json.loads(ran.out)
    assert (result["status"], result["compiler_invocations"]) == ("cache-hit", 0)
    assert result["cache_key"] == _published_key(earlier_store)


def test_an_upgrade_keeps_the_earlier_build(earlier_store: Path, tmp_path: Path) -> None:
    """At the newest release (2.33.1, a runtime-only patch), the cpu target of the earlier store is fresh:
    nothing to rebuild."""
    catalog = tmp_path / "catalog.yaml"
    target = "{instance_type: inf2.xlarge, tp_degree: 1, sequence_length: 64, dtype: bf16, profile: cpu}"
    catalog.write_text(f"models:\n  - source: builtin:tiny-llama\n    targets:\n      - {target}\n")
    ran = cli(["recompile", catalog, "--sdk", "2.33.1", "--dry-run", "--json", "--store", earlier_store])
    assert ran.code == 0, ran.text
    (row,) = json.loads(ran.out)["targets"]
    assert (row["status"], row["key"]) == ("fresh", _published_key(earlier_store)), row
