"""Stages on different hosts: each stage runs with its own work dir (a host's NEURONFORGE_HOME),
handed only the previous stage's `BuildState` as JSON. Nothing but the store connects them."""

from __future__ import annotations

import json
import shutil
import threading
from pathlib import Path

import pytest

from neuronforge.artifacts import layout, leases
from neuronforge.artifacts.localcache import TreeRef, lookup_local, materialize
from neuronforge.pipeline.buildstate import BuildState, LeaseRef
from neuronforge.pipeline.runner import STAGES, execute
from neuronforge.pipeline.stage import Context
from neuronforge.records.payload_manifest import PayloadManifest
from neuronforge.spec.target import TargetSpec
from neuronforge.stores import open_store
from tests.conftest import TARGET, Compiled


def _store_without_artifacts(compiled: Compiled, dest: Path):
    """A copy of the session's store with its compile cache but no published artifact: a build
    that pulls its graphs from the store instead of compiling (fast), and publishes anew."""
    shutil.copytree(compiled.store.root_uri.removeprefix("file://"), dest)
    store = open_store(f"file://{dest}")
    for prefix in ("index", "artifacts", "builds", "locks", "checkpoints"):
        store.delete_prefix(prefix)
    return store


def test_every_stage_on_another_host(compiled: Compiled, tmp_path: Path) -> None:
    store = _store_without_artifacts(compiled, tmp_path / "store")
    state = BuildState(
        model=str(compiled.checkpoint), target=TargetSpec.parse(TARGET), store_uri=store.root_uri, max_new_tokens=4
    )
    hosts = []
    for i, stage in enumerate(STAGES):
        host = tmp_path / f"host{i}" / "work"  # a fresh disk for every stage
        hosts.append(host)
        payload = json.loads(json.dumps(state.model_dump(mode="json")))  # what XCom carries
        assert "/host" not in json.dumps(payload)  # never a path on a host's disk
        state = BuildState.model_validate(payload)
        if stage.run is None:  # the claim
            lease = leases.try_acquire(store, state.need("key"), "test")
            state = state.model_copy(update={"lease": LeaseRef.of(lease)})
            continue
        state = execute(stage, state, Context(store, host))
    assert state.published is not None and state.hit is None
    manifest = store.read_json(state.published.manifest_uri.removeprefix(store.root_uri + "/"))
    assert manifest["smoke"]["passed"] and manifest["compile"]["compiler_invocations"] == 0
    # The compile host staged the payload; the smoke host materialized that payload verified and
    # nothing else (no checkpoint: the reference travels in the payload); publishing copies inside
    # the store and downloads nothing.
    by_name = {s.name: h for s, h in zip(STAGES, hosts, strict=True)}
    assert lookup_local(state.compiled.build, by_name["smoke"]) is not None
    smoke_objects = {p.name for p in (by_name["smoke"] / "objects").iterdir() if not p.name.startswith(".")}
    assert smoke_objects == {state.compiled.build.manifest_sha256}
    assert not (by_name["publish_artifact"] / "objects").exists()
    assert lookup_local(state.need("checkpoint"), by_name["compile_graphs"]) is not None
    assert not (by_name["prepare"] / "objects").exists()  # prepare downloads nothing
    assert store.list("builds") == []  # the staged build is dropped once published


def test_a_damaged_store_copy_is_refused_not_used(compiled: Compiled, tmp_path: Path) -> None:
    store = open_store(f"file://{tmp_path / 'store'}")
    folder = tmp_path / "folder"
    shutil.copytree(compiled.checkpoint, folder)
    from neuronforge.artifacts.localcache import file_entries, publish_tree

    ref = publish_tree(store, folder, "things/x", PayloadManifest(files=file_entries(folder)))
    weights = Path(store.root_uri.removeprefix("file://")) / "things/x/model.safetensors"
    data = bytearray(weights.read_bytes())
    data[-1] ^= 0xFF  # same size, one byte flipped
    weights.write_bytes(bytes(data))
    from neuronforge.common.errors import StoreError

    with pytest.raises(StoreError, match=r"model\.safetensors does not match MANIFEST\.json"):
        materialize(store, ref, tmp_path / "host")
    assert lookup_local(ref, tmp_path / "host") is None
    assert not [p for p in (tmp_path / "host" / "objects").iterdir() if not p.name.startswith(".locks")]
    # A manifest that is not the one the ref pins is refused too.
    store.put_bytes(b'{"files": []}\n', f"things/x/{layout.MANIFEST}")
    with pytest.raises(StoreError, match="changed since an earlier stage wrote it"):
        materialize(store, ref, tmp_path / "host")


def test_concurrent_materializations_download_once(compiled: Compiled, tmp_path: Path) -> None:
    from neuronforge.artifacts.localcache import file_entries, publish_tree

    store = open_store(f"file://{tmp_path / 'store'}")
    folder = tmp_path / "folder"
    shutil.copytree(compiled.checkpoint, folder)
    ref = publish_tree(store, folder, "things/y", PayloadManifest(files=file_entries(folder)))
    calls: list[int] = []
    original = store.get_files

    def counting(pairs, **kwargs):
        calls.append(len(pairs))
        return original(pairs, **kwargs)

    store.get_files = counting  # type: ignore[method-assign]
    results: list[Path] = []
    threads = [
        threading.Thread(target=lambda: results.append(materialize(store, ref, tmp_path / "host"))) for _ in range(4)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(set(results)) == 1 and len(results) == 4 and len(calls) == 1
    assert isinstance(ref, TreeRef) and (results[0] / "model.safetensors").exists()


def test_builtin_default_model_is_generated_once_under_concurrency(tmp_path: Path, monkeypatch) -> None:
    """Several runs starting at once in an empty home: one generates, all get the same folder."""
    from neuronforge.common import settings
    from neuronforge.pipeline.stages.resolve import resolve_source

    monkeypatch.setenv("NEURONFORGE_HOME", str(tmp_path / "home"))
    revisions: list[str] = []
    errors: list[BaseException] = []

    def resolve() -> None:
        try:
            revisions.append(resolve_source(settings.DEFAULT_MODEL).resolved_revision)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=resolve) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == [] and len(set(revisions)) == 1 and len(revisions) == 3
    leftovers = [p.name for p in (tmp_path / "home" / "demo").iterdir() if p.name.startswith(".tiny-llama.")]
    assert leftovers in ([], [".tiny-llama.lock"])
