"""Detect the toolchain versions that go into the cache key and the manifests.

A Neuron profile's toolchain exists only in its SDK image's own interpreter, so it is detected
there (`ServingProfile.detect_toolchain`, on the workers of the profile's compile queue); elsewhere
(e.g. computing a key on a laptop) the versions must be given explicitly. What a profile's workers
detected is kept in the store (`record_detected`, `toolchains/<profile>.json`) for the DAG's first
task, which looks a run's targets up on the default queue.
"""

from __future__ import annotations

import shutil
import subprocess
import time
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING

from neuronforge.request import Toolchain

if TYPE_CHECKING:
    from neuronforge.profiles.base import ServingProfile
    from neuronforge.stores import ArtifactStore

# Packages whose versions change the compiled graphs, per backend.
# Packages of the Neuron SDK whose versions change the compiled graphs (every Neuron backend adds its library).
NEURON_SDK_PACKAGES = ("neuronx-cc", "libneuronxla", "torch-neuronx", "neuronx-distributed", "torch", "transformers")


def installed_version(package: str) -> str | None:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return None


# The Neuron runtime and driver are OS packages (apt/yum), not pip packages.
RUNTIME_PACKAGES = ("aws-neuronx-runtime-lib", "aws-neuronx-collectives", "aws-neuronx-dkms")
DRIVER_VERSION_FILE = Path("/sys/module/neuron/version")


def os_package_version(package: str) -> str | None:
    """Version of an installed deb or rpm package, None when neither knows it."""
    queries = (("dpkg-query", ["-W", "-f=${Version}", package]), ("rpm", ["-q", "--qf", "%{VERSION}", package]))
    for tool, args in queries:
        if shutil.which(tool) is None:
            continue
        done = subprocess.run([tool, *args], capture_output=True, text=True, timeout=30, check=False)
        if done.returncode == 0 and done.stdout.strip():
            return done.stdout.strip()
    return None


def detect_runtime() -> dict[str, str]:
    """Neuron runtime, collectives and driver versions on this host (recorded, never keyed)."""
    found = {p: v for p in RUNTIME_PACKAGES if (v := os_package_version(p))}
    if DRIVER_VERSION_FILE.exists():
        found["neuron-driver"] = DRIVER_VERSION_FILE.read_text().strip()
    return found


def detect_toolchain(profile: str, compiler_flags: str | tuple[str, ...] = ()) -> Toolchain:
    """The toolchain this worker has for serving profile `profile` (`name` or `name@version`)."""
    from neuronforge.profiles import get_profile

    return get_profile(profile).detect_toolchain(compiler_flags)


# -- what a profile's toolchain queue last detected, kept in the store -------------------------------
RECORD_SCHEMA = 1


def record_detected(store: ArtifactStore, profile: ServingProfile, toolchain: Toolchain, run_id: str = "") -> bool:
    """Keep in the store the toolchain a Neuron profile's workers detected (its `prepare`, on the
    profile's toolchain queue), so that a run's first task, on the default queue, can compute the key
    of its targets and find them published without that queue. Written only when what the key hashes
    changed (the worker facts differ from host to host); returns whether it was written."""
    from neuronforge import layout

    key = layout.toolchain_record(profile.name, profile.version)
    recorded = _read_record(store, key)
    if recorded is not None and recorded.keyed_json() == toolchain.keyed_json():
        return False
    store.write_json(
        key,
        {
            "schema_version": RECORD_SCHEMA,
            "profile": profile.ref,
            "toolchain": toolchain.to_json(),
            "run_id": run_id,
            "recorded_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        },
    )
    return True


def last_detected(store: ArtifactStore, profile: ServingProfile) -> Toolchain | None:
    """The toolchain the workers of `profile`'s toolchain queue last detected, if it is still what
    the profile pins (`ServingProfile.toolchain_problems`); None when none is recorded or readable."""
    from neuronforge import layout

    toolchain = _read_record(store, layout.toolchain_record(profile.name, profile.version))
    if toolchain is None or profile.toolchain_problems(toolchain):
        return None
    return toolchain


def _read_record(store: ArtifactStore, key: str) -> Toolchain | None:
    from neuronforge.errors import StoreError

    try:
        return Toolchain.from_json(store.read_json(key)["toolchain"])
    except (StoreError, KeyError, TypeError, ValueError):
        return None
