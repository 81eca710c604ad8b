"""The release channel and review records: a forged or truncated one is one line naming the field and
where it was read, never a traceback; a newer one says to upgrade."""

from __future__ import annotations

from pathlib import Path

import pytest

from neuronforge.records.base import RecordError
from neuronforge.records.channel import ChannelRecord
from neuronforge.records.review import ReviewRecord
from tests.records.stored_fixtures import check_wrong_type_refused

BUILD = {
    "key": "a" * 64,
    "artifact_prefix": "artifacts/x",
    "manifest": "artifacts/x/manifest.json",
    "manifest_sha256": "b" * 64,
}
CHANNEL = {
    "schema_version": 1,
    "model": "org/name",
    "profile_line": "vllm-neuron",
    "channel": "stable",
    "current": {"action": "promote", "build": BUILD, "by": "alice", "at": "2026-11-26T00:00:00Z"},
}


@pytest.mark.parametrize(
    ("path", "bad", "field"),
    [
        (("current", "build", "key"), 7, "current.build.key"),
        (("current", "action"), "delete", "current.action"),
        (("history",), "not a list", "history"),
        (("channel",), None, "channel"),
    ],
)
def test_a_forged_channel_is_one_line(tmp_path: Path, path: tuple, bad, field: str) -> None:
    text = check_wrong_type_refused(ChannelRecord, CHANNEL, tmp_path, path, bad)
    assert f"forged.json: not a valid release channel: {field}" in text


def test_a_channel_reads_back_as_written_and_keeps_what_a_newer_writer_added() -> None:
    record = ChannelRecord.from_json({**CHANNEL, "current": {**CHANNEL["current"], "ticket": "OPS-1"}})
    assert record.to_json()["current"]["ticket"] == "OPS-1"
    assert ChannelRecord.from_bytes(record.to_bytes()) == record


def test_a_review_state_is_one_of_three() -> None:
    with pytest.raises(RecordError, match=r"current\.state"):
        ReviewRecord.from_json({"schema_version": 1, "key": "k", "current": {"state": "maybe"}})
