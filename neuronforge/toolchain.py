"""Detect the toolchain versions that go into the cache key and the manifests.

The Neuron backends' toolchain exists only on Neuron workers, so it is detected there; elsewhere
(e.g. computing a key on a laptop) the versions must be given explicitly.
"""

from __future__ import annotations

import shutil
import subprocess
from importlib import metadata
from pathlib import Path

from neuronforge.errors import InvalidInput
from neuronforge.request import Toolchain

# Packages whose versions change the compiled graphs, per backend.
_NEURON_SDK = ("neuronx-cc", "libneuronxla", "torch-neuronx", "neuronx-distributed", "torch", "transformers")
BACKEND_PACKAGES: dict[str, tuple[str, ...]] = {
    "cpu": ("torch", "transformers"),
    "optimum": ("optimum-neuron", *_NEURON_SDK),
    "nxdi": ("neuronx-distributed-inference", *_NEURON_SDK),
}


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


def detect_toolchain(backend: str, compiler_flags: str | tuple[str, ...] = ()) -> Toolchain:
    """The toolchain installed in this Python environment for `backend`."""
    packages = {p: v for p in BACKEND_PACKAGES.get(backend, ()) if (v := installed_version(p))}
    if backend == "cpu":
        torch_version = packages.get("torch")
        if torch_version is None:
            raise InvalidInput("the cpu backend needs torch: run `make setup`")
        return Toolchain("cpu", torch_version, "torch-inductor", torch_version, packages, compiler_flags)
    lib = "optimum-neuron" if backend == "optimum" else "neuronx-distributed-inference"
    missing = [p for p in (lib, "neuronx-cc") if p not in packages]
    if missing:
        raise InvalidInput(
            f"backend {backend!r} needs {', '.join(missing)} from the AWS Neuron repository (worker image "
            "docker/neuron-worker.Dockerfile); off a Neuron worker pass the versions explicitly "
            "(--backend-version, --compiler-version)"
        )
    from neuronforge.backends.support import installed_architectures

    worker = {"runtime": detect_runtime(), "architectures": installed_architectures(backend)}
    return Toolchain(backend, packages[lib], "neuronxcc", packages["neuronx-cc"], packages, compiler_flags, worker)
