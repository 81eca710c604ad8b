"""The payload manifest (`records.payload_manifest`): the staged payload the smoke test loads and
publish copies."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from neuronforge.artifacts.localcache import file_entries, manifest_bytes
from neuronforge.records.base import RecordError, RecordTooNew
from neuronforge.records.payload_manifest import PayloadManifest

KEY = "ef" * 32


def test_a_payload_manifest_is_the_bytes_its_digest_names(tmp_path: Path) -> None:
    """The staged folder is named for the sha256 of these bytes (`layout.build_prefix`): the record
    must encode exactly as `localcache.manifest_bytes` does, or the ref would pin another manifest."""
    (tmp_path / "p" / "launch").mkdir(parents=True)
    (tmp_path / "p" / "launch" / "run.sh").write_text("serve\n")
    entries = file_entries(tmp_path / "p")
    record = PayloadManifest(cache_key=KEY, files=entries)
    as_dict = {"schema_version": 1, "cache_key": KEY, "files": entries}
    assert record.to_bytes() == manifest_bytes(as_dict)
    assert hashlib.sha256(record.to_bytes()).hexdigest() == hashlib.sha256(manifest_bytes(as_dict)).hexdigest()
    assert PayloadManifest.from_bytes(record.to_bytes()) == record and record.files[0].path == "launch/run.sh"


def test_a_newer_payload_manifest_is_refused() -> None:
    with pytest.raises(RecordTooNew, match=r"^builds/x: payload manifest has schema 2, .* upgrade neuronforge"):
        PayloadManifest.from_json({"schema_version": 2, "cache_key": KEY, "files": []}, "builds/x")


@pytest.mark.parametrize(
    ("data", "field"),
    [
        ({"cache_key": KEY, "files": [{"path": "a", "size": "1", "sha256": "0"}]}, "files.0.size"),
        ({"cache_key": KEY}, "files"),
    ],
)
def test_wrong_types_name_the_field(data: dict, field: str) -> None:
    with pytest.raises(RecordError, match=rf"^builds/x: not a valid payload manifest: {field}: "):
        PayloadManifest.from_json({"schema_version": 1, **data}, "builds/x")


def test_a_tree_staged_without_version_or_key_reads() -> None:
    """Its reader only ever needed the files (trees staged by hand or by tests hold nothing else)."""
    assert PayloadManifest.from_json({"files": []}) == PayloadManifest(files=[])


def test_the_launch_files_text_goes_from_the_payload_to_the_artifact_manifest(tmp_path: Path) -> None:
    """The compile host records its launch files' text in the payload manifest (`launch_texts`: a file
    over the limit or not UTF-8 left out); publish keeps each text that is its file's bytes; a payload
    staged before it recorded any gives None (the catalog then reads the files)."""
    from neuronforge.pipeline.stages.payload import launch_texts
    from neuronforge.pipeline.stages.publish import _launch_text
    from neuronforge.records.artifact_manifest import LAUNCH_TEXT_LIMIT

    launch = tmp_path / "p" / "launch"
    launch.mkdir(parents=True)
    (launch / "run.sh").write_text("serve\n")
    (launch / "big.json").write_text("x" * (LAUNCH_TEXT_LIMIT + 1))
    (launch / "blob.bin").write_bytes(b"\xff\xfe")
    texts = launch_texts(tmp_path / "p")
    assert texts == {"run.sh": "serve\n"}
    record = PayloadManifest(cache_key=KEY, files=file_entries(tmp_path / "p"), launch=texts)
    assert PayloadManifest.from_bytes(record.to_bytes()) == record and "launch" in record.to_json()
    assert _launch_text(record) == {"run.sh": "serve\n"}
    assert _launch_text(record.model_copy(update={"launch": {"run.sh": "other\n"}})) == {}  # not its bytes
    assert _launch_text(record.model_copy(update={"launch": {}})) is None  # staged before: unknown
    assert _launch_text(PayloadManifest(cache_key=KEY, files=[])) == {}  # no launch files: none to show
