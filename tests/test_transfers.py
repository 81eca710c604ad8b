"""Transfers measured around the real call (`common.transfers`) and the slow-transfer warning: judged
on injected clocks and numbers, never on a timed run."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from neuronforge.common import transfers
from neuronforge.common.transfers import MIB, Transfer, slow_warning
from neuronforge.stores import open_store

GIB = 1024 * MIB


def big(**changes: object) -> Transfer:
    base = {"direction": "download", "where": "s3://b/checkpoints/m", "bytes": GIB, "files": 4, "seconds": 20.0,
            "client": "s3 ranged GET", "concurrency": 8, "part_size": 64 * MIB}  # fmt: skip
    return Transfer(**{**base, **changes})  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("transfer", "cause"),
    [
        (big(concurrency=1), "a single flow (concurrency 1)"),
        (big(files=1, part_size=2 * GIB), "a single flow (one object in one request)"),
        (big(part_size=MIB), "a part size of 1 MiB (below 8 MiB"),
        (big(client="huggingface_hub 0.36.2", part_size=0), "a Hub download without hf_xet"),
        (big(client="file", concurrency=0, part_size=0), "the disk (or the network filesystem)"),
        (big(), "not the client's settings (s3 ranged GET, concurrency 8, parts 64 MiB)"),
    ],
)
def test_a_slow_transfer_names_its_likely_cause_in_one_line(transfer: Transfer, cause: str) -> None:
    line = slow_warning(transfer, floor=100)  # 1 GiB in 20 s: 54 MB/s
    assert line is not None and "\n" not in line
    assert line.startswith("slow transfer: downloading 1.0 GiB in ")
    assert "ran at 54 MB/s, below NEURONFORGE_TRANSFER_FLOOR_MBS=100; likely " + cause in line


@pytest.mark.parametrize(
    ("transfer", "floor"),
    [
        (big(seconds=5.0), 100),  # 215 MB/s: above the floor
        (big(bytes=255 * MIB, seconds=60.0), 100),  # slow, but too small to judge
        (big(), 0),  # the floor turned off
        (big(client="huggingface_hub 0.36.2 + hf_xet", seconds=1.0), 100),
    ],
)
def test_no_warning_when_fast_small_or_off(transfer: Transfer, floor: float) -> None:
    assert slow_warning(transfer, floor) is None


class Clock:
    """A clock that moves only when a transfer asks it: each reading is `step` seconds after the last."""

    def __init__(self, step: float) -> None:
        self.now, self.step = 0.0, step

    def __call__(self) -> float:
        self.now += self.step
        return self.now


def test_a_store_transfer_is_measured_once_and_a_throttled_one_warns_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """A file store's put_tree (one transfer, not one per file) through a clock on which it takes 10 s:
    recorded with the folder's bytes, and (the judged size lowered to this folder) one warning line."""
    folder = tmp_path / "model"
    folder.mkdir()
    for i in range(3):
        (folder / f"shard-{i}.bin").write_bytes(b"x" * (1000 + i))
    monkeypatch.setattr(transfers, "CLOCK", Clock(10.0))
    monkeypatch.setattr(transfers, "WARN_MIN_BYTES", 1)
    monkeypatch.setenv("NEURONFORGE_TRANSFER_FLOOR_MBS", "1")
    store = open_store(f"file://{tmp_path / 'store'}")
    with caplog.at_level(logging.WARNING, logger="neuronforge.common.transfers"), transfers.collecting() as seen:
        store.put_tree(folder, "checkpoints/m")
    assert [(t.direction, t.bytes, t.files, t.seconds, t.client) for t in seen] == [("upload", 3003, 3, 10.0, "file")]
    assert seen[0].where == store.uri("checkpoints/m")
    assert [r.getMessage() for r in caplog.records] == [
        f"slow transfer: uploading 2.9 KiB in 3 file(s) to {store.uri('checkpoints/m')} ran at 0 MB/s, below "
        "NEURONFORGE_TRANSFER_FLOOR_MBS=1; likely the disk (or the network filesystem) under the file store"
    ]
    monkeypatch.setenv("NEURONFORGE_TRANSFER_FLOOR_MBS", "0")
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="neuronforge.common.transfers"), transfers.collecting() as seen:
        store.get_tree("checkpoints/m", tmp_path / "back")
    assert [(t.direction, t.bytes, t.files) for t in seen] == [("download", 3003, 3)] and not caplog.records


def test_nothing_is_recorded_outside_a_collector_or_for_a_failed_transfer(tmp_path: Path) -> None:
    store = open_store(f"file://{tmp_path / 'store'}")
    (tmp_path / "f").write_bytes(b"abc")
    store.put_file(tmp_path / "f", "a/f")  # no collector: nothing kept anywhere
    with transfers.collecting() as seen, pytest.raises(KeyError):
        store.get_file("a/missing", tmp_path / "g")
    assert seen == []


def test_a_bad_floor_is_one_line_naming_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    from neuronforge.common.errors import InvalidInput

    monkeypatch.setenv("NEURONFORGE_TRANSFER_FLOOR_MBS", "-5")
    said = r"NEURONFORGE_TRANSFER_FLOOR_MBS='-5' is not a number of MB/s from 0 to 1000000"
    with pytest.raises(InvalidInput, match=said):
        transfers.floor_mbs()


def test_collectors_that_end_out_of_order_each_keep_their_own_transfers() -> None:
    """Two builds in one process (threads): the later collector ends first, while both are still empty.
    Each leaves with its own list — not the first equal one — so the other keeps receiving transfers."""
    t = Transfer("download", "file:///s/k", 10, 1, 0.001, "file")
    outer = transfers.collecting()
    first = outer.__enter__()
    inner = transfers.collecting()
    second = inner.__enter__()
    inner.__exit__(None, None, None)
    transfers.record(t)
    outer.__exit__(None, None, None)  # a ValueError when the inner exit had removed this (equal, empty) list
    assert first == [t] and second == []
