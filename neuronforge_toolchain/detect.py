"""`detect`: what this interpreter has — the versions the cache key and the profile's pins are
checked against, the model types its library has modeling code for, and the Neuron devices of this
host (a compile worker has none; a Neuron host has /dev/neuron0, /dev/neuron1, ...)."""

import glob
import importlib.util
import platform
import re
import sys
from importlib import metadata

DEVICE = re.compile(r"/dev/neuron\d+$")


def installed_version(package):
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return None


def detect(spec):
    """spec: {"packages": [pip names], "modeling_modules": {model_type: module} (optional)}."""
    packages = {}
    for name in spec.get("packages", []):
        version = installed_version(name)
        if version:
            packages[name] = version
    architectures = None
    modules = spec.get("modeling_modules") or {}
    if modules:
        architectures = []
        for model_type, module in sorted(modules.items()):
            try:
                if importlib.util.find_spec(module) is not None:
                    architectures.append(model_type)
            except (ImportError, ValueError):
                pass
    return {
        "python": platform.python_version(),
        "executable": sys.executable,
        "packages": packages,
        "architectures": architectures,
        "neuron_devices": len([d for d in glob.glob("/dev/neuron*") if DEVICE.match(d)]),
    }
