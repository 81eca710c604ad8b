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
    version: str = "1",
    launch: dict[str, bytes] | None = None,
    serving_image: str | None = None,
    instance_families: list[str] | None = None,
    target: dict[str, object] | None = None,
    smoke: dict[str, object] | None = None,
) -> str:
    """Build number `n` of `model` for `profile`@`version`: its full cache key. `launch`: its launch
    files (default: a serve.sh that prints `serving`); `serving_image` and `instance_families`: what its
    profile's description names (`ServingProfile.describe`); `target`: the request's target (default:
    inf2.xlarge, batch `n`); `smoke`: its smoke result as stored (default: passed or not, without a
    measurement; `tests.releases.measured.smoke().stored_json()` gives one measured by hand)."""
    named = f"{kind}:{model}:{profile}:{n}" + ("" if version == "1" else f":{version}")
    key = hashlib.sha256(named.encode()).hexdigest()
    target = target or {"instance_type": "inf2.xlarge", "batch_size": n, "sequence_length": 64}
    slug = f"{profile}-{target['instance_type']}-tp{target.get('tp_degree', 1)}-b{n}-s64-fp32"
    prefix = f"artifacts/{kind}/{model}/rev/{slug}/{key[:12]}"
    launch = launch if launch is not None else {"serve.sh": b"#!/usr/bin/env bash\necho serving\n"}
    files = {"model/weights.bin": f"weights of build {n}".encode(), **{f"launch/{k}": v for k, v in launch.items()}}
    for path, data in files.items():
        store.put_bytes(data, f"{prefix}/{path}")
    manifest = {
        "schema_version": 1,
        "cache_key": key,
        "source": {"kind": kind, "location": model, "revision": "rev"},
        "toolchain": {"backend": "cpu", "backend_version": "1", "compiler": "torch-inductor", "compiler_version": "1"},
        "files": [{"path": p, "size": len(d), "sha256": hashlib.sha256(d).hexdigest()} for p, d in files.items()],
        "profile": {
            "ref": f"{profile}@{version}",
            "name": profile,
            "title": profile,
            "sdk_release": "none",
            **({"serving_image": serving_image} if serving_image else {}),
            **({"instance_families": instance_families} if instance_families is not None else {}),
        },
        "target_slug": slug,
        "request": {"target": target},
        "smoke": smoke or {"passed": smoke_passed, "reason": "tokens match" if smoke_passed else "tokens differ"},
        "hosts": {"stages": [{"stage": "smoke", "seconds": 1.0, "host": "cpu", "hostname": "smoke-host"}]},
        "formats": {"model": "model"},
        "published_at": f"2026-11-26T00:00:{n:02d}Z",
    }
    store.put_bytes(json.dumps(manifest).encode(), f"{prefix}/manifest.json")
    entry = {"cache_key": key, "manifest": f"{prefix}/manifest.json", "prefix": prefix}
    store.put_bytes(json.dumps(entry).encode(), layout.index_entry(key))
    note_published(store, IndexEntry.from_json(entry), ArtifactManifest.from_json(manifest))  # as publish does
    return key
