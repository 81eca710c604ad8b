"""Every transfer a build makes is measured around the real call by the stage that made it and lands
in the artifact's manifest (`hooks.TransferLog` -> `BuildState.transfers` -> `publish`)."""

from __future__ import annotations

import hashlib
import itertools
from pathlib import Path

from neuronforge.artifacts import layout
from neuronforge.records.artifact_manifest import ArtifactManifest
from neuronforge.records.checkpoint import CheckpointManifest
from tests.conftest import Compiled


def _sha256s(folder: Path) -> set[str]:
    return {hashlib.sha256(p.read_bytes()).hexdigest() for p in folder.rglob("*") if p.is_file()}


def test_the_manifest_lists_the_payload_upload_with_the_bytes_of_the_files_it_uploaded(compiled: Compiled) -> None:
    """The cpu profile's cold run (the session's shared compile): the payload's upload, recorded by the
    compile stage, counts exactly the published files the store did not already hold by content (those
    are copied inside the store, no byte through this host), computed here from the store's own files."""
    out = compiled.first
    state = out.state
    assert state is not None and state.compiled is not None and state.checkpoint is not None
    manifest = ArtifactManifest.read(compiled.store, out.published.manifest_uri.split("/store/", 1)[1])
    assert manifest.transfers == state.transfers  # publish wrote the build's transfers, all of them
    root = Path(compiled.store.uri("").removeprefix("file://"))
    held = _sha256s(root / "checkpoints") | _sha256s(root / "neuron-cache")
    payload = [f for f in manifest.files if f.path != "smoke.json"]
    uploaded = [f for f in payload if f.sha256 not in held]
    assert uploaded and len(uploaded) < len(payload)  # some copied, some uploaded: both paths are exercised
    build = [t for t in manifest.transfers if t.where == compiled.store.uri(state.compiled.build.prefix)]
    assert [(t.stage, t.direction, t.bytes, t.files, t.client) for t in build] == [
        ("compile_graphs", "upload", sum(f.size for f in uploaded), len(uploaded), "file")
    ]
    assert build[0].seconds > 0 and build[0].mbs > 0


def test_the_checkpoint_upload_and_the_cache_sync_are_recorded_by_their_stages(compiled: Compiled) -> None:
    state = compiled.first.state
    assert state is not None and state.checkpoint is not None
    checkpoint = CheckpointManifest.read(compiled.store, state.checkpoint.manifest_key)
    fetched = [t for t in state.transfers if t.stage == "fetch_checkpoint"]
    assert [(t.direction, t.bytes, t.files) for t in fetched] == [
        ("upload", sum(f.size for f in checkpoint.files), len(checkpoint.files))
    ]
    synced = [t for t in state.transfers if t.where.startswith(compiled.store.uri(layout.NEURON_CACHE + "/"))]
    assert synced and {(t.stage, t.direction) for t in synced} == {("compile_graphs", "upload")}
    assert all(t.bytes > 0 for t in state.transfers)  # an empty marker file is no transfer


def test_show_prints_the_transfers(compiled: Compiled, capsys) -> None:
    from neuronforge.interfaces.cli import main

    assert main(["show", compiled.first.key[:12], "--store", compiled.store.root_uri]) == 0
    lines = capsys.readouterr().out.splitlines()
    first = next(i for i, line in enumerate(lines) if line.startswith("transfers "))
    shown = [lines[first], *itertools.takewhile(lambda line: line.startswith(" " * 11), lines[first + 1 :])]
    assert len(shown) == len(compiled.first.published.manifest.transfers) + 1  # and the total
    assert shown[0].startswith("transfers  fetch_checkpoint: upload ") and " MB/s in " in shown[0]
    assert any("compile_graphs: upload" in line and "/builds/" in line for line in shown)
