"""What a Neuron profile's toolchain queue last detected, kept in the store.

A Neuron profile's toolchain exists only in its SDK image's own interpreter, on the workers of its
queue (`neuronforge.compilation.detect`), but the cache key hashes it. The `prepare` stage records what it
detected (`toolchains/<name>@<version>.json`); a run's first task, on the default queue, computes
its targets' keys from that record and finds them published without waking the profile's queue. A
record is a hint: a key computed from it that is not published sends the target the normal way, and
that target's own `prepare` detects and looks up again.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from neuronforge.artifacts import layout
from neuronforge.common.errors import StoreError
from neuronforge.records.toolchain import ToolchainRecord
from neuronforge.spec.toolchain import Toolchain

if TYPE_CHECKING:
    from neuronforge.profiles.base import ServingProfile
    from neuronforge.stores import ArtifactStore


def record_detected(store: ArtifactStore, profile: ServingProfile, toolchain: Toolchain, run_id: str = "") -> bool:
    """Keep in the store the toolchain a Neuron profile's workers detected (its `prepare`, on the
    profile's toolchain queue), so that a run's first task, on the default queue, can compute the key
    of its targets and find them published without that queue. Written only when what the key hashes
    changed (the worker facts differ from host to host); returns whether it was written."""
    key = layout.toolchain_record(profile.name, profile.version)
    recorded = _read_record(store, key)
    if recorded is not None and recorded.keyed_json() == toolchain.keyed_json():
        return False
    ToolchainRecord(
        profile=profile.ref,
        toolchain=toolchain.to_json(),
        run_id=run_id,
        recorded_at=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    ).write(store, key)
    return True


def last_detected(store: ArtifactStore, profile: ServingProfile) -> Toolchain | None:
    """The toolchain the workers of `profile`'s toolchain queue last detected, if it is still what
    the profile pins (`ServingProfile.toolchain_problems`); None when none is recorded or readable."""
    toolchain = _read_record(store, layout.toolchain_record(profile.name, profile.version))
    if toolchain is None or profile.toolchain_problems(toolchain):
        return None
    return toolchain


def _read_record(store: ArtifactStore, key: str) -> Toolchain | None:
    try:
        return Toolchain.from_json(ToolchainRecord.read(store, key).toolchain)
    except (StoreError, KeyError, TypeError, ValueError):  # none, or unreadable: a hint, not needed
        return None
