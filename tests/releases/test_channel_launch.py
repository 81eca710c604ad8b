"""A channel's launch files resolve the pointer each time they run: a serving host started from them
gets the build the channel points to now, every file checked against that build's manifest."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from neuronforge.artifacts import channels
from neuronforge.stores import open_store
from tests.releases.builds import MODEL, publish


def _bash(script: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["bash", str(script), *args], capture_output=True, text=True, timeout=60, env={**os.environ, **(env or {})}
    )


@pytest.fixture
def setup(tmp_path: Path):
    store = open_store(f"file://{tmp_path / 'store'}")
    ref = channels.ChannelRef.parse(MODEL, "cpu", "candidate")
    keys = [publish(store, 1), publish(store, 2)]
    channels.promote(store, ref, build=keys[0])
    launch = tmp_path / "store" / ref.prefix / "launch"
    return store, ref, keys, launch


def test_the_launch_files_are_written_once_with_a_shim_per_build_script(setup) -> None:
    store, ref, keys, launch = setup
    assert sorted(p.name for p in launch.iterdir()) == ["k8s-init-container.yaml", "resolve.sh", "serve.sh"]
    before = (launch / "resolve.sh").stat().st_mtime_ns
    channels.promote(store, ref, build=keys[1])  # a move writes the record only
    assert (launch / "resolve.sh").stat().st_mtime_ns == before


def test_a_host_starts_what_the_channel_points_to_now(setup, tmp_path: Path) -> None:
    store, ref, keys, launch = setup
    dest = tmp_path / "host"
    done = _bash(launch / "resolve.sh", "--all", str(dest))
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == str(dest)
    assert (dest / "model/weights.bin").read_bytes() == b"weights of build 1"
    assert f"-> {keys[0][:12]} (2 files verified)" in done.stderr
    channels.promote(store, ref, build=keys[1])
    assert _bash(launch / "resolve.sh", "--all", str(dest)).returncode == 0
    assert (dest / "model/weights.bin").read_bytes() == b"weights of build 2"
    served = _bash(launch / "serve.sh", env={"NEURONFORGE_CHANNEL_DIR": str(tmp_path / "channels")})
    assert (served.returncode, served.stdout) == (0, "serving\n"), served.stderr
    channels.rollback(store, ref)
    assert _bash(launch / "resolve.sh", "--all", str(dest)).returncode == 0
    assert (dest / "model/weights.bin").read_bytes() == b"weights of build 1"


def test_bytes_other_than_the_manifests_are_never_installed(setup, tmp_path: Path) -> None:
    store, ref, _, launch = setup
    dest = tmp_path / "host"
    assert _bash(launch / "resolve.sh", "--all", str(dest)).returncode == 0
    prefix = channels.get(store, ref).current.build.artifact_prefix
    store.put_bytes(b"weights of build X", f"{prefix}/model/weights.bin")  # same size, other bytes
    fresh = tmp_path / "fresh-host"
    done = _bash(launch / "resolve.sh", "--all", str(fresh))
    assert done.returncode == 1 and not fresh.exists()
    assert done.stderr.count("\n") == 1, done.stderr  # one line: which file, what differs, what to do
    assert "model/weights.bin differs from the build's manifest (size or sha256: 18 bytes" in done.stderr
    assert not list(tmp_path.glob("fresh-host*"))  # nothing changed: no folder, no staging left
    # a host that already holds the verified bytes keeps them: they are checked, not fetched again
    assert _bash(launch / "resolve.sh", "--all", str(dest)).returncode == 0
    assert (dest / "model/weights.bin").read_bytes() == b"weights of build 1"
    manifest = channels.get(store, ref).current.build.manifest
    store.put_bytes(store.get_bytes(manifest).replace(b"tokens match", b"tokens MATCH"), manifest)
    done = _bash(launch / "resolve.sh", "--all", str(dest))
    assert done.returncode == 1 and "is not the manifest builtin:tiny-llama · cpu · candidate recorded" in done.stderr
