"""The manifest's `transfers` part (`records.transfers`): written as measured, read back entry for entry,
absent from manifests written before it, and a forged entry costs itself only."""

from __future__ import annotations

from pathlib import Path

from neuronforge.common.transfers import Transfer
from neuronforge.records.artifact_manifest import ArtifactManifest
from neuronforge.records.transfers import TransferRecord, describe
from neuronforge.stores import open_store
from tests.records.test_artifact_manifest import WRITTEN

UP = Transfer("upload", "s3://b/builds/k/d", 3 * 1024**3, 13, 6.0, "s3transfer", 8, 64 * 1024**2)
HUB = Transfer("download", "hf://org/m@c0ffee", 512 * 1024**2, 4, 2.0, "huggingface_hub 0.36.2 + hf_xet", 8)


def test_transfers_round_trip_key_for_key(tmp_path: Path) -> None:
    records = [TransferRecord.of("compile_graphs", UP), TransferRecord.of("fetch_checkpoint", HUB)]
    written = {**WRITTEN, "transfers": [r.model_dump(mode="json") for r in records]}
    store = open_store(f"file://{tmp_path}")
    store.write_json("a/manifest.json", written)
    m = ArtifactManifest.read(store, "a/manifest.json")
    assert m.transfers == records and m.to_json() == written
    assert m.transfers[0].bytes == 3 * 1024**3 and m.transfers[0].mbs == round(3 * 1024**3 / 1e6 / 6.0, 1)
    m.write(store, "b/manifest.json")
    assert store.get_bytes("b/manifest.json") == store.get_bytes("a/manifest.json")


def test_a_manifest_without_transfers_reads_with_none_and_writes_none() -> None:
    """Manifests written before transfers were recorded read as before, key for key (schema 1 still)."""
    m = ArtifactManifest.from_json(WRITTEN)
    assert m.transfers == [] and "transfers" not in m.to_json() and m.to_json() == WRITTEN


def test_a_forged_entry_costs_that_entry_not_the_list_or_the_manifest() -> None:
    good = TransferRecord.of("smoke", HUB).model_dump(mode="json")
    forged = {**WRITTEN, "transfers": [good, {"bytes": "lots"}, "<script>", {**good, "seconds": -1}]}
    m = ArtifactManifest.from_json(forged)
    assert [t.model_dump(mode="json") for t in m.transfers] == [good] and m.as_stored() == forged
    assert ArtifactManifest.from_json({**WRITTEN, "transfers": {"a": 1}}).transfers == []


def test_show_prints_one_line_per_transfer_with_bytes_and_rate() -> None:
    lines = describe([TransferRecord.of("compile_graphs", UP), TransferRecord.of("fetch_checkpoint", HUB)])
    assert lines == [
        "compile_graphs: upload 3.0 GiB (13 files) to s3://b/builds/k/d, 537 MB/s in 6.0s (s3transfer)",
        "fetch_checkpoint: download 512.0 MiB (4 files) from hf://org/m@c0ffee, 268 MB/s in 2.0s "
        "(huggingface_hub 0.36.2 + hf_xet)",
        "total: 3.5 GiB moved in 8.0s",
    ]
