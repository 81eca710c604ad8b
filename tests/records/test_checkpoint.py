"""The checkpoint manifest (`checkpoints/<org>/<name>/<rev>/MANIFEST.json`) as a typed record."""

from __future__ import annotations

from pathlib import Path

from neuronforge.pipeline.stages.fetch import FetchRequest, fetch
from neuronforge.records.checkpoint import CheckpointManifest
from neuronforge.stores import open_store
from tests.checkpoints import make_tiny_llama
from tests.records.stored_fixtures import (
    check_newer_refused,
    check_reads_back_as_written,
    check_wrong_type_refused,
    data,
)

V1 = "checkpoint-v1.json"  # written by ce27dfa's fetch


def test_a_manifest_the_previous_release_wrote_reads_and_writes_back_the_same() -> None:
    m = check_reads_back_as_written(CheckpointManifest, V1)
    assert m.architecture == "LlamaForCausalLM" and m.source.kind == "local"
    assert [f.path for f in m.files] == sorted(f["path"] for f in data(V1)["files"])


def test_a_newer_manifest_is_refused_with_the_upgrade(tmp_path: Path) -> None:
    check_newer_refused(CheckpointManifest, V1, tmp_path)


def test_a_manifest_with_a_wrong_type_names_the_field_and_the_uri(tmp_path: Path) -> None:
    check_wrong_type_refused(CheckpointManifest, V1, tmp_path, ("files", 0, "size"), "big")
    check_wrong_type_refused(CheckpointManifest, V1, tmp_path, ("source", "location"), ["a", "b"])


def test_fetch_writes_the_keys_and_values_the_previous_release_wrote(tmp_path: Path) -> None:
    """Today's fetch of the same checkpoint stores a manifest with the fixture's keys, and values
    (the local path and the time excepted)."""
    store = open_store(f"file://{tmp_path / 'store'}")
    src = make_tiny_llama(tmp_path / "m")
    fetched = fetch(FetchRequest(str(src), tmp_path / "work"), store)
    stored = CheckpointManifest.read(store, fetched.ref.manifest_key)
    old = CheckpointManifest.from_json(data(V1))
    assert stored.to_json().keys() == data(V1).keys()
    same = {"architecture", "model_type", "files", "warnings"}
    assert stored.model_dump(include=same) == old.model_dump(include=same)
    assert stored.source.revision == old.source.revision  # the files digest: the same files
