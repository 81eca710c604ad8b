"""Detect the toolchain versions that go into the cache key and the manifests.

A Neuron profile's toolchain exists only in its SDK image's own interpreter, so it is detected
there (`ServingProfile.detect_toolchain`, on the workers of the profile's compile queue); elsewhere
(e.g. computing a key on a laptop) the versions must be given explicitly.
"""

from __future__ import annotations

import shutil
from importlib import metadata
from pathlib import Path

from neuronforge.common import interrupts

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
        done = interrupts.run([tool, *args], timeout=30)
        if done.returncode == 0 and done.stdout.strip():
            return done.stdout.strip()
    return None


def detect_runtime() -> dict[str, str]:
    """Neuron runtime, collectives and driver versions on this host (recorded, never keyed)."""
    found = {p: v for p in RUNTIME_PACKAGES if (v := os_package_version(p))}
    if DRIVER_VERSION_FILE.exists():
        found["neuron-driver"] = DRIVER_VERSION_FILE.read_text(encoding="utf-8").strip()
    return found
