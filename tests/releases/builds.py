"""Published builds as the publish stage lays them out (files, manifest last, index entry), small and
fast: what a channel checks (`channels.candidate`) is all there — the manifest's model, profile line,
smoke result and files — without compiling anything. The end-to-end path with real builds is
docs/releasing.md's examples (tests/test_docs.py)."""

from __future__ import annotations

import hashlib
import json

from neuronforge.artifacts import layout
from neuronforge.artifacts.farm_index import note_published
from neuronforge.records.artifact_manifest import ArtifactManifest
from neuronforge.records.index_entry import IndexEntry
from neuronforge.stores import ArtifactStore

MODEL = "builtin:tiny-llama"


def publish(
    store: ArtifactStore,
    n: int,
    *,
    model: str = "tiny-llama",
    kind: str = "builtin",
    profile: str = "cpu",
    smoke_passed: bool = True,
) -> str:
    """Build number `n` of `model` for `profile`: its full cache key."""
    key = hashlib.sha256(f"{kind}:{model}:{profile}:{n}".encode()).hexdigest()
    slug = f"{profile}-inf2.xlarge-tp1-b{n}-s64-fp32"
    prefix = f"artifacts/{kind}/{model}/rev/{slug}/{key[:12]}"
    files = {
        "model/weights.bin": f"weights of build {n}".encode(),
        "launch/serve.sh": b"#!/usr/bin/env bash\necho serving\n",
    }
    for path, data in files.items():
        store.put_bytes(data, f"{prefix}/{path}")
    manifest = {
        "schema_version": 1,
        "cache_key": key,
        "source": {"kind": kind, "location": model, "revision": "rev"},
        "toolchain": {"backend": "cpu", "backend_version": "1", "compiler": "torch-inductor", "compiler_version": "1"},
        "files": [{"path": p, "size": len(d), "sha256": hashlib.sha256(d).hexdigest()} for p, d in files.items()],
        "profile": {"ref": f"{profile}@1", "name": profile, "title": profile, "sdk_release": "none"},
        "target_slug": slug,
        "request": {"target": {"instance_type": "inf2.xlarge", "batch_size": n, "sequence_length": 64}},
        "smoke": {"passed": smoke_passed, "reason": "tokens match" if smoke_passed else "tokens differ"},
        "hosts": {"stages": [{"stage": "smoke", "seconds": 1.0, "host": "cpu", "hostname": "smoke-host"}]},
        "formats": {"model": "model"},
        "published_at": f"2026-11-26T00:00:{n:02d}Z",
    }
    store.put_bytes(json.dumps(manifest).encode(), f"{prefix}/manifest.json")
    entry = {"cache_key": key, "manifest": f"{prefix}/manifest.json", "prefix": prefix}
    store.put_bytes(json.dumps(entry).encode(), layout.index_entry(key))
    note_published(store, IndexEntry.from_json(entry), ArtifactManifest.from_json(manifest))  # as publish does
    return key
