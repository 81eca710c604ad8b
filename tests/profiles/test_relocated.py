"""`profiles.base.relocated`: where a folder a build recorded in its file:// store at publish time is
after the store was mounted at another path (what `verify` looks in for the NEFF / vLLM caches)."""

from __future__ import annotations

from pathlib import Path

from neuronforge.profiles.base import relocated
from neuronforge.stores import open_store


def _store_at(path: Path) -> Path:
    (path / "neuron-cache" / "neuronxcc-2.16").mkdir(parents=True)
    (path / "vllm-neuron-cache" / "2.32.0").mkdir(parents=True)
    (path / "artifacts" / "org" / "m" / "k12").mkdir(parents=True)
    return path


def test_a_moved_file_store_is_found_from_its_root_or_from_an_artifact_inside_it(tmp_path: Path) -> None:
    moved = _store_at(tmp_path / "mnt" / "store")
    gone = "file:///publisher/store/neuron-cache"
    for pointed in (moved, moved / "artifacts" / "org" / "m" / "k12"):
        store = open_store(f"file://{pointed}", must_exist=True)
        assert relocated(gone, store, "neuron-cache") == f"file://{moved / 'neuron-cache'}"
        assert relocated("file:///publisher/store/vllm-neuron-cache/2.32.0", store, "vllm-neuron-cache/2.32.0") == (
            f"file://{moved / 'vllm-neuron-cache' / '2.32.0'}"
        )


def test_what_is_here_or_not_a_file_uri_is_kept_as_recorded(tmp_path: Path) -> None:
    store = open_store(f"file://{_store_at(tmp_path / 'store')}", must_exist=True)
    here = f"file://{tmp_path / 'elsewhere' / 'neuron-cache'}"
    (tmp_path / "elsewhere" / "neuron-cache").mkdir(parents=True)
    assert relocated(here, store, "neuron-cache") == here  # recorded and present: that one
    assert relocated("s3://bucket/neuron-cache", store, "neuron-cache") == "s3://bucket/neuron-cache"
    lost = open_store(f"file://{tmp_path / 'empty'}")  # no neuron-cache anywhere above it
    assert relocated("file:///publisher/neuron-cache", lost, "neuron-cache") == "file:///publisher/neuron-cache"
    assert not Path("https://gh.072103.xyz/publisher").exists()
