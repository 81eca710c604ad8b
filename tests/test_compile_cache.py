"""The compile cache names its folders as the Neuron compiler does: `neuronxcc-<FULL version>/`, with
the local label (`2.21.33363.0+82129205` for SDK 2.26.1), locally, in the store, in pre-seeding,
sync, graph-set records, listings and pruning. The FAKE compiler (tests/fakes/neuronx_cc)
reports that real-shaped version and writes where libneuronxla would, so a folder named any other
way (e.g. `+` turned into `-`) shows up here as entries nobody finds.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from neuronforge.artifacts import layout
from neuronforge.common.errors import InvalidInput
from neuronforge.compilation.compile_cache import CompileCache, compile_through_cache, prune_store, stored_entries
from neuronforge.spec.target import TargetSpec
from neuronforge.stores import open_store
from tests.conftest import FAKES
from tests.fakes import run_in_toolchain

VERSION = "2.21.33363.0+82129205"  # neuronx-cc of SDK 2.26.1, as `neuronxcc.__version__` reports it
CDIR = f"neuronxcc-{VERSION}"
PREFIX = f"neuron-cache/{CDIR}"


@pytest.fixture(params=["file", "s3"])
def store(request: pytest.FixtureRequest, tmp_path: Path):
    """The same checks against the folder store and a real S3 endpoint: keys with `+` in both."""
    if request.param == "file":
        return open_store(f"file://{tmp_path / 'store'}")
    return open_store(f"s3://{request.getfixturevalue('s3_bucket')}/nf")


def _compile_in_child(cache_root: Path, material: str, graphs: list[str]) -> list[str]:
    """Run the FAKE compiler in the SDK 2.26.1 toolchain interpreter with the environment the Neuron
    backends give a compile (`neuron_compile_env(target, cache.root, flags)`), returning its log lines."""
    from neuronforge.compilation.backends.base import neuron_compile_env

    target = TargetSpec.parse({"instance_type": "inf2.xlarge", "tp_degree": 1, "sequence_length": 64})
    code = f"import neuronxcc; neuronxcc.write_cache_entries({material!r}, {graphs!r})"
    return run_in_toolchain("2.26.1", code, neuron_compile_env(target, cache_root, ())).splitlines()


def _compiler_versions() -> list[str]:
    """(`importlib.metadata.version("neuronx-cc")`, `neuronxcc.__version__`) in the toolchain interpreter."""
    code = "import neuronxcc, importlib.metadata as m; print(m.version('neuronx-cc')); print(neuronxcc.__version__)"
    return run_in_toolchain("2.26.1", code).split()


def test_the_fake_compiler_reports_the_real_shaped_version(fake_neuron: Path) -> None:
    assert _compiler_versions() == [VERSION, VERSION]
    # pip keeps the local label in the dist-info folder name (as for torch-2.13.0+cpu.dist-info)
    assert (FAKES / "neuron_toolchain" / f"neuronx_cc-{VERSION}.dist-info" / "METADATA").is_file()


def test_folder_names_keep_the_local_label(tmp_path: Path) -> None:
    assert layout.compiler_dir("neuronxcc", VERSION) == CDIR
    assert layout.neuron_cache_prefix("neuronxcc", VERSION) == PREFIX
    assert layout.neuron_graph_set("neuronxcc", VERSION, "g") == f"neuron-cache-sets/{CDIR}/g.json"
    cache = CompileCache(tmp_path / "cache", "neuronxcc", VERSION)
    assert cache.dir_name == CDIR and cache.store_prefix == PREFIX
    # NEURON_COMPILE_CACHE_URL names the ROOT; the compiler appends `neuronxcc-<ver>/` itself
    assert cache.local == tmp_path / "cache" / CDIR and cache.local.parent == cache.root == tmp_path / "cache"


@pytest.mark.parametrize(
    ("version", "why"),
    [
        ("../../etc", "path separator"),
        ("2.21/33363.0", "path separator"),
        ("2.21\\33363.0", "path separator"),
        ("..", "'..'"),
        (".hidden", "'..' or starts with '.'"),
        ("2.21..0", "'..'"),
        ("", "empty"),
        ("2.21.0 +x", "characters other than"),
    ],
)
def test_unsafe_versions_are_refused_not_rewritten(tmp_path: Path, version: str, why: str) -> None:
    """A version is a path component: one that could leave its folder is refused, never cleaned
    (a cleaned name would be a folder the compiler never reads)."""
    with pytest.raises(InvalidInput, match=why):
        CompileCache(tmp_path / "cache", "neuronxcc", version)
    with pytest.raises(InvalidInput, match="compile-cache folder"):
        layout.neuron_graph_set("neuronxcc", version, "g")
    assert not (tmp_path / "cache").exists()


def test_compile_sync_record_and_preseed_through_the_labelled_folder(fake_neuron: Path, store, tmp_path: Path) -> None:
    """What the compiler child writes under NEURON_COMPILE_CACHE_URL is what the cache sees,
    uploads, records and pre-seeds on another host, where the compiler then reuses it."""
    first = CompileCache(tmp_path / "host-a", "neuronxcc", VERSION, store)
    use = compile_through_cache(first, lambda: _compile_in_child(first.local.parent, "llama", ["ctx", "tkg"]))
    assert len(use.created) == 2 and not use.reused
    assert all((first.local / n / "model.done").is_file() for n in use.created)
    assert use.failed == ["MODULE_00000000000000000bad+00000000"]  # the fake's failed compile, seen too

    report = first.sync_to_store()
    assert sorted(report.uploaded) == use.created and report.failed == use.failed
    done = sorted(o.key for o in store.list(PREFIX) if o.key.endswith("/model.done"))
    assert done == [f"{PREFIX}/{n}/model.done" for n in use.created]
    assert not [o for o in store.list("neuron-cache") if "lock" in o.key or CDIR not in o.key]
    assert first.record_graph_set("g1", use.created)
    assert store.read_json(f"neuron-cache-sets/{CDIR}/g1.json") == {"schema_version": 1, "entries": use.created}
    assert first.sync_to_store().already_present == use.created

    # Another host: pre-seed what the graph set recorded, then the compiler finds it locally.
    second = CompileCache(tmp_path / "host-b", "neuronxcc", VERSION, store)
    assert second.graph_set("g1") == use.created
    again = compile_through_cache(
        second, lambda: _compile_in_child(second.local.parent, "llama", ["ctx", "tkg"]), second.graph_set("g1")
    )
    assert again.reused == use.created and not again.created
    assert {p.name for p in second.entries()} >= set(use.created)

    # A third host pre-seeds everything the store holds for this compiler version.
    third = CompileCache(tmp_path / "host-c", "neuronxcc", VERSION, store)
    assert third.preseed() == use.created
    assert all((tmp_path / "host-c" / CDIR / n / "model.done").is_file() for n in use.created)


def _entry(store, cdir: str, name: str, complete: bool = True) -> None:
    store.put_bytes(b"neff", f"neuron-cache/{cdir}/{name}/model.neff")
    if complete:
        store.put_bytes(b"", f"neuron-cache/{cdir}/{name}/model.done")


def test_listing_and_pruning_by_full_or_public_version(store) -> None:
    _entry(store, CDIR, "MODULE_aaaa+d41d8cd9")
    _entry(store, CDIR, "MODULE_bbbb+d41d8cd9", complete=False)
    _entry(store, "neuronxcc-2.21.33363.0-82129205", "MODULE_old+d41d8cd9")  # what `+`->`-` used to write
    _entry(store, "neuronxcc-2.22.12471.0+b4a00d10", "MODULE_cccc+d41d8cd9")
    store.write_json(f"neuron-cache-sets/{CDIR}/g.json", {"entries": ["MODULE_aaaa+d41d8cd9"]})
    store.write_json("neuron-cache-sets/neuronxcc-2.22.12471.0+b4a00d10/g.json", {"entries": []})

    rows = {(e.compiler_dir, e.name, e.complete) for e in stored_entries(store)}
    assert (CDIR, "MODULE_aaaa+d41d8cd9", True) in rows and (CDIR, "MODULE_bbbb+d41d8cd9", False) in rows
    assert [e.name for e in stored_entries(store, CDIR)] == ["MODULE_aaaa+d41d8cd9", "MODULE_bbbb+d41d8cd9"]
    # The version pip pins (no label) selects its labelled folder, as PEP 440 `==` would; exact does not.
    assert {e.compiler_dir for e in stored_entries(store, "neuronxcc-2.21.33363.0")} == {CDIR}
    assert stored_entries(store, "neuronxcc-2.21.33363.0", exact=True) == []

    assert [e.name for e in prune_store(store, CDIR, incomplete_only=True)] == ["MODULE_bbbb+d41d8cd9"]
    assert not store.list(f"{PREFIX}/MODULE_bbbb+d41d8cd9") and store.exists(
        f"{PREFIX}/MODULE_aaaa+d41d8cd9/model.done"
    )
    assert [e.name for e in prune_store(store, "neuronxcc-2.21.33363.0")] == ["MODULE_aaaa+d41d8cd9"]
    assert not store.list(PREFIX) and not store.list(f"neuron-cache-sets/{CDIR}")
    left = {o.key.split("/")[1] for o in store.list("neuron-cache")}
    assert left == {"neuronxcc-2.21.33363.0-82129205", "neuronxcc-2.22.12471.0+b4a00d10"}
    assert store.exists("neuron-cache-sets/neuronxcc-2.22.12471.0+b4a00d10/g.json")


def test_reuse_is_read_from_log_lines_that_hold_the_labelled_folder(tmp_path: Path) -> None:
    """The compiler logs entries by full path (`…/neuronxcc-2.21.33363.0+82129205/MODULE_…/model.neff`,
    SDK 2.26.1); only the entry name is taken from it, so the version's `+` never confuses it."""
    cache = CompileCache(tmp_path, "neuronxcc", VERSION)
    name = "MODULE_16389337710168549518+e30acd3a"
    cache.commit(cache.begin(name, []))
    line = f"INFO ||NEURON_CC_WRAPPER||: Using a cached neff at {tmp_path}/{CDIR}/{name}/model.neff"
    use = compile_through_cache(cache, lambda: [line])
    assert use.reused == [name] and not use.created


def test_an_upgraded_compiler_gets_its_own_labelled_folder(
    fake_neuron: Path, upgrade_fake_neuron, tmp_path: Path
) -> None:
    """After an SDK upgrade (SDK 2.27.0: neuronx-cc 2.22.12471.0+b4a00d10) the compiler writes a new
    folder beside the old one; each version's cache sees only its own entries."""
    root = tmp_path / "cache"
    old = CompileCache(root, "neuronxcc", VERSION)
    assert compile_through_cache(old, lambda: _compile_in_child(root, "llama", ["ctx"])).created
    upgrade_fake_neuron("2.22.12471.0+b4a00d10")
    assert _compiler_versions() == ["2.22.12471.0+b4a00d10"] * 2
    new = CompileCache(root, "neuronxcc", "2.22.12471.0+b4a00d10")
    use = compile_through_cache(new, lambda: _compile_in_child(root, "llama", ["ctx"]))
    assert len(use.created) == 1 and not use.reused
    assert sorted(p.name for p in root.iterdir()) == [CDIR, "neuronxcc-2.22.12471.0+b4a00d10"]


def _built(cache: CompileCache, name: str, graph: bytes) -> None:
    path = cache.begin(name, {"opt": 2})
    (path / "model.neff").write_bytes(graph)
    cache.commit(path)


def test_sync_reports_the_stored_bytes_it_knows_for_a_payload_to_copy(store, tmp_path: Path) -> None:
    """`SyncReport.stored`: each file of an entry this host uploaded (or pulled) with the key, size and
    sha256 the store holds — what the compile stage's payload copies inside the store instead of
    uploading. An entry another host uploaded while this one compiled the same graph is not claimed:
    its bytes may differ from this host's."""
    import hashlib

    name = "MODULE_16389337710168549518+e30acd3a"
    a = CompileCache(tmp_path / "host-a", "neuronxcc", VERSION, store)
    _built(a, name, b"neff of host a")
    report = a.sync_to_store()
    assert report.uploaded == [name] and "stored" not in report.to_json()  # not for the manifest
    stored = {f["key"]: (f["size"], f["sha256"]) for f in report.stored}
    assert set(stored) == {f"{PREFIX}/{name}/{f}" for f in ("model.neff", "compile_flags.json", "model.done")}
    for key, (size, sha256) in stored.items():
        data = store.get_bytes(key)
        assert (len(data), hashlib.sha256(data).hexdigest()) == (size, sha256)
    again = a.sync_to_store()  # already present, uploaded from here: still known
    assert again.already_present == [name] and again.stored == report.stored

    b = CompileCache(tmp_path / "host-b", "neuronxcc", VERSION, store)
    _built(b, name, b"neff of host b")  # compiled here too, before host a's upload landed
    raced = b.sync_to_store()
    assert raced.already_present == [name] and raced.stored == []

    c = CompileCache(tmp_path / "host-c", "neuronxcc", VERSION, store)
    assert c.lookup(name) is not None  # pulled: these bytes are the store's
    assert c.sync_to_store().stored == report.stored
    elsewhere = CompileCache(tmp_path / "host-a", "neuronxcc", VERSION, open_store(str(tmp_path / "other")))
    assert elsewhere.known_stored(name) == []  # what host a knows is per store
    assert elsewhere.sync_to_store().uploaded == [name]
