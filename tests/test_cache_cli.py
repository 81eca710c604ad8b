"""`neuronforge cache ls|stats|prune` over a store's neuron-cache/ prefix."""

from __future__ import annotations

import json
from pathlib import Path

from neuronforge.interfaces.cli import main
from neuronforge.stores import open_store


def _entry(store, cdir: str, name: str, complete: bool) -> None:
    base = f"neuron-cache/{cdir}/{name}"
    store.put_bytes(b"neff" * 10, f"{base}/model.neff")
    store.put_bytes(b"[]", f"{base}/compile_flags.json")
    if complete:
        store.put_bytes(b"", f"{base}/model.done")


def _store(tmp_path: Path):
    store = open_store(f"file://{tmp_path / 'store'}")
    _entry(store, "neuronxcc-2.21.33363.0+82129205", "MODULE_aaaa+d41d8cd9", True)
    _entry(store, "neuronxcc-2.21.33363.0+82129205", "MODULE_bbbb+d41d8cd9", False)
    _entry(store, "neuronxcc-2.22.12471.0+b4a00d10", "MODULE_cccc+d41d8cd9", True)
    store.put_bytes(b"x", "index/k.json")  # not cache: never touched
    return store


def test_ls_and_stats(capsys, tmp_path: Path) -> None:
    store = _store(tmp_path)
    assert main(["cache", "ls", store.root_uri, "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [(r["name"], r["complete"]) for r in rows] == [
        ("MODULE_aaaa+d41d8cd9", True),
        ("MODULE_bbbb+d41d8cd9", False),
        ("MODULE_cccc+d41d8cd9", True),
    ]
    assert main(["cache", "stats", store.root_uri, "--json"]) == 0
    stats = json.loads(capsys.readouterr().out)
    assert stats["neuronxcc-2.21.33363.0+82129205"] == {"entries": 2, "complete": 1, "incomplete": 1, "bytes": 84}
    assert main(["cache", "ls", store.root_uri, "--compiler-version", "2.22.12471.0+b4a00d10"]) == 0
    assert capsys.readouterr().out.count("MODULE_") == 1
    # the version pip pins (no local label) selects the compiler's labelled folder
    assert main(["cache", "ls", store.root_uri, "--compiler-version", "2.22.12471.0", "--json"]) == 0
    assert [r["compiler_dir"] for r in json.loads(capsys.readouterr().out)] == ["neuronxcc-2.22.12471.0+b4a00d10"]


def test_prune_a_compiler_version_and_incomplete_entries(capsys, tmp_path: Path) -> None:
    store = _store(tmp_path)
    assert main(["cache", "prune", store.root_uri, "--incomplete", "--dry-run"]) == 0
    assert "would delete 1 entries" in capsys.readouterr().out
    assert len(store.list("neuron-cache")) == 8
    assert main(["cache", "prune", store.root_uri, "--incomplete"]) == 0
    assert not store.list("neuron-cache/neuronxcc-2.21.33363.0+82129205/MODULE_bbbb+d41d8cd9")
    store.write_json("neuron-cache-sets/neuronxcc-2.21.33363.0+82129205/g.json", {"entries": ["MODULE_aaaa+d41d8cd9"]})
    store.write_json("neuron-cache-sets/neuronxcc-2.22.12471.0+b4a00d10/g.json", {"entries": []})
    assert main(["cache", "prune", store.root_uri, "--compiler-version", "2.21.33363.0+82129205"]) == 0
    assert not store.list("neuron-cache/neuronxcc-2.21.33363.0+82129205")
    assert not store.list("neuron-cache-sets/neuronxcc-2.21.33363.0+82129205")  # its graph-set records go too
    assert store.list("neuron-cache/neuronxcc-2.22.12471.0+b4a00d10") and store.exists("index/k.json")
    assert store.exists("neuron-cache-sets/neuronxcc-2.22.12471.0+b4a00d10/g.json")


def test_prune_without_a_selection_is_a_usage_error(capsys, tmp_path: Path) -> None:
    store = _store(tmp_path)
    assert main(["cache", "prune", store.root_uri]) == 2
    assert "needs --compiler-version" in capsys.readouterr().err
    assert len(store.list("neuron-cache")) == 8


def test_prune_refuses_a_version_that_is_not_one_folder(capsys, tmp_path: Path) -> None:
    store = _store(tmp_path)
    assert main(["cache", "prune", store.root_uri, "--compiler-version", "../../index"]) == 2
    assert "holds a path separator" in capsys.readouterr().err
    assert len(store.list("neuron-cache")) == 8 and store.exists("index/k.json")


def _with_cpu_cache(tmp_path: Path):
    store = _store(tmp_path)
    _entry(store, "torch-inductor-2.13.0+cpu", "MODULE_dddd+d41d8cd9", True)  # the cpu profile's compiler
    return store


def test_a_compiler_version_alone_matches_across_compilers(capsys, tmp_path: Path) -> None:
    """`--compiler-version` without `--compiler` names a version of whichever compiler has it (the
    cpu profile's is torch-inductor, not the Neuron compiler); `--compiler` alone, every version of it."""
    store = _with_cpu_cache(tmp_path)
    assert main(["cache", "ls", store.root_uri, "--compiler-version", "2.13.0", "--json"]) == 0
    assert [r["compiler_dir"] for r in json.loads(capsys.readouterr().out)] == ["torch-inductor-2.13.0+cpu"]
    assert main(["cache", "ls", store.root_uri, "--compiler", "torch-inductor", "--json"]) == 0
    assert [r["name"] for r in json.loads(capsys.readouterr().out)] == ["MODULE_dddd+d41d8cd9"]
    assert main(["cache", "ls", store.root_uri, "--compiler", "neuronxcc", "--json"]) == 0
    assert len(json.loads(capsys.readouterr().out)) == 3
    assert main(["cache", "prune", store.root_uri, "--compiler-version", "2.13.0", "--dry-run"]) == 0
    assert "would delete 1 entries (42 bytes)" in capsys.readouterr().out
    store.write_json("neuron-cache-sets/torch-inductor-2.13.0+cpu/g.json", {"entries": ["MODULE_dddd+d41d8cd9"]})
    assert main(["cache", "prune", store.root_uri, "--compiler-version", "2.13.0"]) == 0
    assert "deleted 1 entries" in capsys.readouterr().out
    assert not store.list("neuron-cache/torch-inductor-2.13.0+cpu")
    assert not store.list("neuron-cache-sets/torch-inductor-2.13.0+cpu")
    assert len(store.list("neuron-cache")) == 8  # the neuronxcc folders untouched


def test_ls_prints_a_header_or_says_nothing_matches(capsys, tmp_path: Path) -> None:
    store = _with_cpu_cache(tmp_path)
    assert main(["cache", "ls", store.root_uri, "--compiler-version", "2.13.0"]) == 0
    header, row, total = capsys.readouterr().out.splitlines()
    assert header.split() == ["COMPILER", "FOLDER", "ENTRY", "FILES", "BYTES", "STATE"]
    assert row.startswith("torch-inductor-2.13.0+cpu") and total == "1 entries, 42 bytes"
    for command in ("ls", "stats", "prune"):
        assert main(["cache", command, store.root_uri, "--compiler-version", "9.9.9"]) == 0
        out = capsys.readouterr().out
        assert out.startswith(
            "no compile-cache entries match --compiler-version 9.9.9 (any compiler); compiler folders present: "
            "neuronxcc-2.21.33363.0+82129205, neuronxcc-2.22.12471.0+b4a00d10, torch-inductor-2.13.0+cpu\n"
        ), out
    empty = open_store(f"file://{tmp_path / 'empty'}")
    empty.put_bytes(b"x", "index/k.json")
    assert main(["cache", "ls", empty.root_uri]) == 0
    assert capsys.readouterr().out == f"no compile-cache entries in {empty.uri('neuron-cache')}\n"


def _publish_lmi(store, version: str, entries: list[str]) -> str:
    """A published lmi-neuronx artifact (index entry, manifest, launch/neff-cache.json) whose NEFFs
    are `entries` of neuronxcc `version`'s compile-cache folder."""
    from neuronforge.artifacts import layout
    from neuronforge.records.neff_cache import NeffCacheRecord

    key = f"lmi-{version}".ljust(64, "0")[:64]
    prefix = f"artifacts/org/x/rev/lmi/{key[:12]}"
    record = NeffCacheRecord(
        compiled_graph_path=store.uri("neuron-cache"),
        neuron_compile_cache_url=None,
        kind="neuron-compile-cache",
        cache_root=store.uri("neuron-cache"),
        compiler_dir=f"neuronxcc-{version}",
        entries=entries,
        load={"model_type": "llama", "kwargs": {}},
    )
    record.write(store, f"{prefix}/launch/neff-cache.json")
    manifest = {
        "cache_key": key,
        "source": {"location": "org/x"},
        "toolchain": {"compiler": "neuronxcc", "compiler_version": version},
        "files": [{"path": "launch/neff-cache.json", "size": 1, "sha256": "-"}],
        "formats": {},
    }
    store.write_json(f"{prefix}/manifest.json", manifest)
    store.write_json(
        layout.index_entry(key), {"cache_key": key, "manifest": f"{prefix}/manifest.json", "prefix": prefix}
    )
    return f"{prefix}/manifest.json"


def test_prune_keeps_the_entries_a_published_artifact_points_at(capsys, tmp_path: Path) -> None:
    """An lmi-neuronx artifact's compiled_graph_path is the cache root: deleting the entries its
    neff-cache.json names would leave LMI compiling at start-up. prune keeps and names them."""
    store = _store(tmp_path)
    cdir = "neuronxcc-2.21.33363.0+82129205"
    manifest = _publish_lmi(store, "2.21.33363.0+82129205", ["MODULE_aaaa+d41d8cd9"])
    store.write_json(f"neuron-cache-sets/{cdir}/g.json", {"entries": ["MODULE_aaaa+d41d8cd9"]})
    assert main(["cache", "prune", store.root_uri, "--compiler-version", "2.21.33363.0", "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert f"kept {cdir}/MODULE_aaaa+d41d8cd9: published artifact {manifest} points at it" in out
    assert "would delete 1 entries" in out and "kept 1 that published artifacts point at" in out
    assert main(["cache", "prune", store.root_uri, "--compiler-version", "2.21.33363.0+82129205"]) == 0
    assert store.exists(f"neuron-cache/{cdir}/MODULE_aaaa+d41d8cd9/model.done")
    assert not store.list(f"neuron-cache/{cdir}/MODULE_bbbb+d41d8cd9")  # not referenced: deleted
    assert store.exists(f"neuron-cache-sets/{cdir}/g.json")  # its folder is in use: graph sets stay
    # another version's artifact keeps nothing of this one
    _publish_lmi(store, "2.22.12471.0+b4a00d10", ["MODULE_aaaa+d41d8cd9"])
    assert main(["cache", "prune", store.root_uri, "--compiler-version", "2.22.12471.0+b4a00d10"]) == 0
    assert not store.list("neuron-cache/neuronxcc-2.22.12471.0+b4a00d10")
