"""The payload manifest (`records.payload_manifest`): the staged payload the smoke test loads and
publish copies."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from neuronforge.artifacts.localcache import file_entries, publish_tree
from neuronforge.records.base import RecordError, RecordTooNew
from neuronforge.records.payload_manifest import PayloadManifest

KEY = "ef" * 32


def test_a_payload_manifest_is_stored_as_the_bytes_its_digest_names(tmp_path: Path) -> None:
    """The staged folder is named for the sha256 of the record's bytes (`layout.build_prefix`), and
    `publish_tree` writes those very bytes (`to_bytes`, never a dict dumped on the way): the ref pins
    the manifest the folder is named for, and a launch file's text reads back as it was written — a
    NUL, a backslash before another or before `x00` (`stored_text`'s escapes) included (issue 51)."""
    from neuronforge.artifacts import layout
    from neuronforge.stores import open_store

    text = 'printf "%s\\n" a\\\\b "\\x00" "\\xe9" "\x00"\n'
    (tmp_path / "p" / "launch").mkdir(parents=True)
    (tmp_path / "p" / "launch" / "run.sh").write_text(text)
    record = PayloadManifest(cache_key=KEY, files=file_entries(tmp_path / "p"), launch={"run.sh": text})
    digest = hashlib.sha256(record.to_bytes()).hexdigest()
    store = open_store(f"file://{tmp_path / 'store'}")
    ref = publish_tree(store, tmp_path / "p", layout.build_prefix(KEY, digest), record)
    stored = store.get_bytes(ref.manifest_key)
    assert stored == record.to_bytes() and ref.manifest_sha256 == digest
    assert ref.prefix == layout.build_prefix(KEY, hashlib.sha256(stored).hexdigest())
    back = PayloadManifest.from_bytes(stored)
    assert back == record and back.launch == {"run.sh": text} and back.files[0].path == "launch/run.sh"
    with pytest.raises(TypeError, match="takes the manifest's record, not dict"):
        publish_tree(store, tmp_path / "p", "builds/other/x", record.to_json())


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
