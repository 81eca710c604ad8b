"""`neuronforge gc --keep-compilers N`: prune old compiler versions' artifacts, keep catalog pins."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import pytest

from neuronforge.artifacts import layout
from neuronforge.artifacts.published import lookup
from neuronforge.common.errors import InvalidInput
from neuronforge.farm.catalog import load_catalog
from neuronforge.farm.gc import collect
from neuronforge.interfaces.cli import EXIT_OK, EXIT_USAGE, main
from neuronforge.stores import open_store
from tests.test_planner import CONFIGS


def _publish(store, model: str, version: str) -> str:
    """A published artifact as `publish` lays it out (files, manifest last, index), for `model`
    compiled by neuronx-cc `version`, plus its compile-cache entry. Its manifest says what a channel
    checks (`channels.candidate`: profile line `cpu`, smoke passed), so it can be promoted."""
    key = hashlib.sha256(f"{model}-{version}".encode()).hexdigest()  # hex, as a channel move requires
    prefix = f"artifacts/{model}/rev/nxdi-x/{key[:12]}"
    store.put_bytes(b"neff", f"{prefix}/optimum/model.pt")
    manifest = {
        "cache_key": key,
        "source": {"location": model},
        "toolchain": {"compiler": "neuronxcc", "compiler_version": version},
        "files": [{"path": "optimum/model.pt", "size": 4, "sha256": "-"}],
        "formats": {},
        "profile": {"name": "cpu", "ref": "cpu@1.0.0"},
        "smoke": {"passed": True, "reason": "hand-made"},
    }
    store.write_json(f"{prefix}/manifest.json", manifest)
    store.write_json(
        layout.index_entry(key), {"cache_key": key, "manifest": f"{prefix}/manifest.json", "prefix": prefix}
    )
    store.put_bytes(b"done", f"neuron-cache/neuronxcc-{version}/MODULE_{key[:20]}+d41d8cd9/model.done")
    return key


def _catalog(tmp_path: Path, pin: str) -> Path:
    shutil.copy(CONFIGS / "meta-llama--Llama-3.1-8B.json", tmp_path / "llama.json")
    path = tmp_path / "models.yaml"
    path.write_text(
        "models:\n  - source: org/x\n    config: llama.json\n"
        f"    pin: {{compilers: [{json.dumps(pin)}]}}\n"
        "    targets:\n      - {instance_type: inf2.xlarge, tp_degree: 2, sequence_length: 4096, dtype: bf16}\n"
    )
    return path


@pytest.fixture
def store(tmp_path: Path):
    store = open_store(f"file://{tmp_path / 'store'}")
    keys = {
        "x19": _publish(store, "org/x", "2.19.0.0"),
        "x20": _publish(store, "org/x", "2.20.0.0"),
        "x21": _publish(store, "org/x", "2.21.0.0"),
        "y19": _publish(store, "org/y", "2.19.0.0"),
    }
    # A new SDK's first build is compiling: cache entries, nothing published yet.
    store.put_bytes(b"hlo", "neuron-cache/neuronxcc-2.22.0.0/MODULE_aaaaaaaaaaaaaaaaaaaa+d41d8cd9/model.hlo_module.pb")
    store.keys = keys
    return store


def test_keeps_the_newest_and_the_pinned_deletes_the_rest(store, tmp_path: Path) -> None:
    catalog = load_catalog(_catalog(tmp_path, "2.19.0.0"))
    dry = collect(store, 1, catalog, dry_run=True)
    assert {d["key"] for d in dry.deleted} == {store.keys["x20"], store.keys["y19"]}
    assert all(lookup(store, k) for k in store.keys.values())  # a dry run deletes nothing

    report = collect(store, 1, catalog)
    assert report.keep == {"neuronxcc": ["2.21.0.0"]}
    assert [p["compiler_version"] for p in report.pinned] == ["2.19.0.0"]
    alive = {name for name, key in store.keys.items() if lookup(store, key)}
    assert alive == {"x19", "x21"}
    assert not store.list("artifacts/org/y") and not store.list(layout.index_entry(store.keys["y19"]))
    cache = {o.key.split("/")[1] for o in store.list("neuron-cache")}
    # 2.20 published only deleted artifacts; 2.19 still serves a pinned one; 2.22 published nothing yet.
    assert report.cache_dirs_deleted == ["neuronxcc-2.20.0.0"]
    assert cache == {"neuronxcc-2.19.0.0", "neuronxcc-2.21.0.0", "neuronxcc-2.22.0.0"}
    assert collect(store, 1, catalog).deleted == []  # re-running is safe


def test_keep_counts_versions_not_artifacts(store) -> None:
    report = collect(store, 2)
    assert report.keep == {"neuronxcc": ["2.21.0.0", "2.20.0.0"]}
    assert {d["compiler_version"] for d in report.deleted} == {"2.19.0.0"} and len(report.deleted) == 2


def test_refuses_keep_zero_and_a_broken_catalog(store, tmp_path: Path) -> None:
    with pytest.raises(InvalidInput, match="at least 1"):
        collect(store, 0)
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        "models:\n  - source: org/x\n    pin: {versions: [1]}\n"
        "    targets: [{instance_type: inf2.xlarge, tp_degree: 2, sequence_length: 8}]\n"
    )
    with pytest.raises(InvalidInput, match="catalog has problems"):
        collect(store, 1, load_catalog(bad))
    assert all(lookup(store, k) for k in store.keys.values())


def test_cli(store, tmp_path: Path, capsys) -> None:
    catalog = _catalog(tmp_path, "2.20.0.0")
    args = ["gc", store.root_uri, "--keep-compilers", "1", "--catalog", str(catalog)]
    assert main([*args, "--dry-run"]) == EXIT_OK
    out = capsys.readouterr().out
    assert "kept (catalog pin 2.20.0.0)" in out and "2 artifact(s) would delete" in out
    assert main([*args, "--json"]) == EXIT_OK
    assert len(json.loads(capsys.readouterr().out)["deleted"]) == 2
    with pytest.raises(SystemExit) as refused:  # checked by its declaration, before any work: argparse's exit 2
        main(["gc", store.root_uri, "--keep-compilers", "0"])
    assert refused.value.code == EXIT_USAGE


def test_labelled_compiler_versions(tmp_path: Path) -> None:
    """Real compilers report their local label (`2.21.33363.0+82129205`, SDK 2.26.1) and name their
    cache folder with it. A catalog pin of the version pip pins (`2.21.33363.0`) keeps those
    artifacts; a doomed version's folder is found under its full name and deleted alone."""
    store = open_store(f"file://{tmp_path / 'store'}")
    old = _publish(store, "org/x", "2.20.0.0+0badc0de")
    pinned = _publish(store, "org/x", "2.21.33363.0+82129205")
    new = _publish(store, "org/x", "2.22.12471.0+b4a00d10")
    # a sibling that only shares the public version of the doomed one: not gc's to delete
    store.put_bytes(b"done", "neuron-cache/neuronxcc-2.20.0.0/MODULE_bbbbbbbbbbbbbbbbbbbb+d41d8cd9/model.done")
    report = collect(store, 1, load_catalog(_catalog(tmp_path, "2.21.33363.0")))
    assert report.keep == {"neuronxcc": ["2.22.12471.0+b4a00d10"]}
    assert [p["compiler_version"] for p in report.pinned] == ["2.21.33363.0+82129205"]
    assert [d["key"] for d in report.deleted] == [old]
    assert lookup(store, pinned) and lookup(store, new) and not lookup(store, old)
    assert report.cache_dirs_deleted == ["neuronxcc-2.20.0.0+0badc0de"]
    assert {o.key.split("/")[1] for o in store.list("neuron-cache")} == {
        "neuronxcc-2.20.0.0",
        "neuronxcc-2.21.33363.0+82129205",
        "neuronxcc-2.22.12471.0+b4a00d10",
    }


def test_plans_from_the_farm_index_and_confirms_against_the_manifest(store) -> None:
    from neuronforge.artifacts import farm_index
    from neuronforge.farm.rows import FarmQuery, farm_page

    farm_index.rebuild(store)  # the index says x20 was compiled by 2.20.0.0 ...
    x20 = store.read_json(lookup(store, store.keys["x20"]).manifest_uri.removeprefix(store.root_uri).strip("/"))
    x20["toolchain"]["compiler_version"] = "2.21.0.0"  # ... its manifest, the truth, now says otherwise
    store.write_json(f"{lookup(store, store.keys['x20']).prefix}/manifest.json", x20)
    report = collect(store, 1)
    assert {d["key"] for d in report.deleted} == {store.keys["x19"], store.keys["y19"]}
    assert lookup(store, store.keys["x20"]) is not None  # not deleted on the index's word alone
    shown = {r.key for r in farm_page(store, FarmQuery(published_only=True)).rows}
    assert shown == {store.keys["x20"], store.keys["x21"]}  # the deletions were recorded in the index


def test_an_artifact_the_manifest_does_not_confirm_is_named_and_gc_does_not_report_done(store, capsys) -> None:
    """Due for deletion by the farm index but its manifest says another compiler version: left
    alone, listed, counted in the summary, and the exit is 1 (never 0 over what gc could not decide)."""
    from neuronforge.artifacts import farm_index
    from neuronforge.interfaces.cli import EXIT_FAILURE

    farm_index.rebuild(store)
    manifest_key = lookup(store, store.keys["x19"]).manifest_uri.removeprefix(store.root_uri).strip("/")
    x19 = store.read_json(manifest_key)
    x19["toolchain"]["compiler_version"] = "2.21.0.0"
    store.write_json(manifest_key, x19)
    args = ["gc", store.root_uri, "--keep-compilers", "1", "--dry-run"]
    assert main(args) == EXIT_FAILURE
    out = capsys.readouterr().out.splitlines()
    assert f"LEFT ALONE {manifest_key} (2.19.0.0): its manifest says neuronxcc 2.21.0.0, the farm index " \
           "neuronxcc 2.19.0.0" in out  # fmt: skip
    assert out[-1].startswith("2 artifact(s) would delete, 2 kept; 1 of them NOT COLLECTED: due for deletion")
    assert main([*args, "--json"]) == EXIT_FAILURE
    (left,) = json.loads(capsys.readouterr().out)["unconfirmed"]
    assert left["key"] == store.keys["x19"] and left["manifest"] == manifest_key
