"""Publishing as `stages.publish.publish` does, minus the payload: a manifest of the shape every
reader relies on, then the `index/<key>.json` pointer, then the farm-index record. Also runnable as
a process (`python -m tests.farm_index.publishers STORE_URI TAG N`): one of several "hosts"
racing each other on the same store."""

from __future__ import annotations

import hashlib
import json
import sys

from neuronforge.artifacts import layout
from neuronforge.artifacts.farm_index import note_published
from neuronforge.records.artifact_manifest import ArtifactManifest
from neuronforge.records.index_entry import IndexEntry
from neuronforge.stores import ArtifactStore, open_store


def key_of(tag: str, i: int) -> str:
    return hashlib.sha256(f"{tag}-{i}".encode()).hexdigest()


def manifest_only(
    store: ArtifactStore, key: str, model: str = "org/model", profile: str = "cpu@local", compiler_version: str = "2.0"
) -> tuple[IndexEntry, ArtifactManifest]:
    """Manifest and pointer, as a publisher killed before its index record leaves them."""
    prefix = f"artifacts/{model}/rev/t-{key[:6]}/{key[:12]}"
    manifest = {
        "schema_version": 1,
        "cache_key": key,
        "source": {"kind": "hub", "location": model, "revision": "rev"},
        "toolchain": {"compiler": "torch-inductor", "compiler_version": compiler_version},
        "profile": {"ref": profile},
        "target_slug": f"t-{key[:6]}",
        "request": {"target": {"instance_type": "inf2.xlarge"}},
        "files": [],
        "formats": {"cpu-aoti": "cpu-aoti"},
        "published_at": "2026-11-25T00:00:00Z",
    }
    store.write_json(f"{prefix}/{layout.ARTIFACT_MANIFEST}", manifest)
    index = {
        "schema_version": 1,
        "cache_key": key,
        "manifest": f"{prefix}/{layout.ARTIFACT_MANIFEST}",
        "prefix": prefix,
    }
    store.put_if_absent(json.dumps(index).encode(), layout.index_entry(key))
    return IndexEntry.from_json(index), ArtifactManifest.from_json(manifest)


def publish(store: ArtifactStore, key: str, **kwargs: str) -> None:
    index, manifest = manifest_only(store, key, **kwargs)
    note_published(store, index, manifest)


if __name__ == "__main__":
    uri, tag, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
    target = open_store(uri)
    for i in range(n):
        publish(target, key_of(tag, i), model=f"org/{tag}-{i % 5}")
