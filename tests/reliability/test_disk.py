"""Failing disks, for real: a store or a work dir on a tiny tmpfs (disk full) or on a read-only
mount. Each ends in one line naming the path and the fix — never a traceback — and leaves no index
entry or checkpoint manifest behind for data that was not completely written.

Mounting needs root and a kernel that lets this container mount tmpfs; where it cannot, the cases
are skipped with the reason (never silently passed)."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from neuronforge.spec.tinymodel import make_tiny_llama
from tests.reliability.harness import cli, expect_error, mount, snapshot


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 96 KiB tmpfs: room for the checkpoint's small files, not for its 360 KiB of weights."""
    point = tmp_path / "small"
    point.mkdir()
    why = mount("-t", "tmpfs", "-o", "size=96k", "tmpfs", str(point))
    if why:
        pytest.skip(f"cannot mount a tmpfs here ({why})")
    try:
        yield point
    finally:
        subprocess.run(["umount", "-l", str(point)], check=False)


@pytest.fixture
def read_only(tmp_path: Path) -> Iterator[Path]:
    """A folder bind-mounted read-only (root can write through chmod, not through a ro mount)."""
    src, point = tmp_path / "ro-src", tmp_path / "ro"
    src.mkdir()
    point.mkdir()
    why = mount("--bind", str(src), str(point)) or mount("-o", "remount,bind,ro", str(point))
    if why:
        subprocess.run(["umount", "-l", str(point)], check=False)
        pytest.skip(f"cannot bind-mount read-only here ({why})")
    try:
        yield point
    finally:
        subprocess.run(["umount", "-l", str(point)], check=False)


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_tiny_llama(tmp_path_factory.mktemp("disk") / "tiny-llama")


def _no_dangling_manifests(store: Path) -> None:
    """Readers trust manifests: none may exist for data that is not all there."""
    assert not list(store.glob("index/*.json"))
    for manifest in store.glob("checkpoints/**/MANIFEST.json"):
        import json

        for f in json.loads(manifest.read_text())["files"]:
            assert (manifest.parent / f["path"]).stat().st_size == f["size"]


def test_a_full_store_disk_is_one_line_and_publishes_no_manifest(
    small_disk: Path, checkpoint: Path, tmp_path: Path
) -> None:
    out = cli(["fetch", str(checkpoint), "--store", f"file://{small_disk}", "--work-dir", tmp_path / "work"])
    expect_error(out, 1, "No space left on device", str(small_disk))
    _no_dangling_manifests(small_disk)


def test_a_full_work_dir_is_one_line(small_disk: Path, checkpoint: Path, tmp_path: Path) -> None:
    store = tmp_path / "store"
    out = cli(["fetch", str(checkpoint), "--store", f"file://{store}", "--work-dir", small_disk / "work"])
    expect_error(out, 1, "No space left on device", str(small_disk))
    _no_dangling_manifests(store)


def test_a_read_only_store_is_one_line_and_unchanged(read_only: Path, checkpoint: Path, tmp_path: Path) -> None:
    before = snapshot(read_only)
    out = cli(["fetch", str(checkpoint), "--store", f"file://{read_only}", "--work-dir", tmp_path / "work"])
    expect_error(out, 1, "Read-only file system", str(read_only))
    assert snapshot(read_only) == before


def test_a_read_only_work_dir_is_one_line(read_only: Path, checkpoint: Path, tmp_path: Path) -> None:
    store = tmp_path / "store"
    out = cli(["fetch", str(checkpoint), "--store", f"file://{store}", "--work-dir", read_only / "work"])
    expect_error(out, 1, "Read-only file system", str(read_only))
    _no_dangling_manifests(store)
