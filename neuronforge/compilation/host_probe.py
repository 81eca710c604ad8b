"""What Neuron host this is, read from `neuron-ls`, and whether it can run a target.

The smoke stage loads a published artifact on a Neuron host; a host of the wrong family (a trn2
artifact on an inf2) or with too few NeuronCores fails deep in the runtime's load with an error that
names neither. `probe()` asks `neuron-ls` first, and `check_host` turns a mismatch into one line.

`neuron-ls` has two JSON formats (tests/data/neuron-ls/README.md has recorded samples and sources):
- up to SDK 2.33, `neuron-ls -j` / `--json-output`: a JSON list, one object per device
  (`neuron_device`, `nc_count`, `memory_size`, `logical_neuroncore_config` on trn2, …). Most releases
  name no instance type in it; the plain `neuron-ls` table's `instance-type:` header does;
- from SDK 2.34, `neuron-ls --output-format json` (announcement `announce-intent-eos-neuron-ls-json`):
  an object with top-level instance (and UltraServer) details and the devices. No public sample exists
  yet, so the parser finds the device list by its content (a list of objects with `nc_count`) and the
  instance type in the places the docs' sibling tools use (`instance_info.instance_type`, or a top
  level `instance_type`).

`nc_count` counts NeuronCores as the runtime presents them at the host's logical NeuronCore config
(LNC): a trn2 device shows 4 at LNC 2 (8 physical cores). Targets are compared in physical cores
(tp × LNC), the unit `devices.neuron_devices` also counts in.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Literal

from neuronforge.common import interrupts
from neuronforge.common.errors import NeuronforgeError
from neuronforge.compilation.devices import neuron_devices
from neuronforge.spec.target import TargetSpec

TOOL = "neuron-ls"
# Where aws-neuronx-tools installs it; not on PATH under systemd or a container's entrypoint.
TOOL_DIR = Path("/opt/aws/neuron/bin")
NEW_ARGS = ("--output-format", "json")  # SDK 2.34+
OLD_ARGS = ("-j",)  # up to SDK 2.33 (gone in 2.34)
TIMEOUT_S = 60.0

Format = Literal["json-output", "output-format-json"]
FORMAT_ARGS: dict[str, tuple[str, ...]] = {"output-format-json": NEW_ARGS, "json-output": OLD_ARGS}


class HostProbeFailed(NeuronforgeError):
    """`neuron-ls` could not tell what Neuron host this is (missing, failing, or output neuronforge
    cannot read); nothing was loaded."""


class HostMismatch(NeuronforgeError):
    """This Neuron host cannot run the target (another instance family, or fewer NeuronCores than the
    target's tp × LNC). Retried: the stage's queue is per SDK release, so another of its hosts may fit."""

    retryable = True
    prefix = "wrong host: "


@dataclass(frozen=True)
class NeuronHost:
    """A Neuron host as `neuron-ls` describes it; None where the tool did not say."""

    format: Format  # which JSON it was read from
    devices: int
    cores: int  # NeuronCores as neuron-ls counts them (logical, at `lnc`)
    instance_type: str | None = None
    lnc: int | None = None  # logical NeuronCore config (trn2+; absent means 1)
    memory_per_device: int | None = None  # bytes

    @property
    def family(self) -> str | None:
        """The chip family of the instance type (`trn1n` is a trn1, `trn2u` a trn2), or None."""
        return chip_family(self.instance_type) if self.instance_type else None

    @property
    def physical_cores(self) -> int:
        return self.cores * (self.lnc or 1)

    @property
    def memory_per_core(self) -> int | None:
        """Bytes per NeuronCore as neuron-ls counts them (a device's memory over its cores)."""
        if self.memory_per_device is None or not self.devices or not self.cores:
            return None
        return self.memory_per_device * self.devices // self.cores

    def describe(self) -> str:
        """One phrase: "trn1.2xlarge, 1 device × 2 NeuronCores (neuron-ls -j)"."""
        what = self.instance_type or "an instance of unknown type"
        per = f"{self.cores // self.devices}" if self.devices else "0"
        lnc = f" at LNC {self.lnc}" if self.lnc else ""
        s = "" if self.devices == 1 else "s"
        how = " ".join(FORMAT_ARGS[self.format])
        return f"{what}, {self.devices} device{s} × {per} NeuronCores{lnc} (neuron-ls {how})"

    def to_json(self) -> dict[str, Any]:
        """What the smoke result records of the host."""
        return {**asdict(self), "family": self.family, "physical_cores": self.physical_cores}


def chip_family(name: str) -> str | None:
    """`inf2.xlarge` → inf2, `trn1n.32xlarge` → trn1, `trn2u.48xlarge` → trn2 (None if not Neuron)."""
    m = re.match(r"(inf|trn)(\d+)", name)
    return f"{m.group(1)}{m.group(2)}" if m else None


# -- parsing -------------------------------------------------------------------------------------
def parse_neuron_ls(text: str, instance_type: str | None = None) -> NeuronHost:
    """A `NeuronHost` from either JSON format's text; `instance_type` fills in when the JSON names
    none (from the plain table's header). HostProbeFailed names what was unreadable."""
    try:
        data = json.loads(text)
    except ValueError:
        raise HostProbeFailed(
            f"neuron-ls printed no JSON ({_excerpt(text)}); run `neuron-ls -j` (SDK < 2.34) or "
            "`neuron-ls --output-format json` (2.34+) on this host to see what it says"
        ) from None
    if isinstance(data, list):
        devices, fmt, top = data, "json-output", {}
    elif isinstance(data, dict):
        devices, fmt, top = _device_list(data), "output-format-json", data
    else:
        devices, fmt, top = None, "json-output", {}
    if devices is None or not all(isinstance(d, dict) for d in devices):
        raise HostProbeFailed(
            f"neuron-ls JSON has a shape neuronforge does not know ({_shape(data)}); expected a list of devices "
            "(`neuron-ls -j`, SDK < 2.34) or an object holding one (`--output-format json`, 2.34+): "
            "update neuronforge/compilation/host_probe.py for this aws-neuronx-tools release"
        )
    counts = [_int(d, "nc_count", i) for i, d in enumerate(devices)]
    memory = [d.get("memory_size") for d in devices]
    hardware = top.get("neuron_hardware_info") if isinstance(top.get("neuron_hardware_info"), dict) else {}
    lnc = _first_int(
        [hardware.get("logical_neuroncore_config"), top.get("logical_neuroncore_config")]
        + [d.get("logical_neuroncore_config") for d in devices]
    )
    info = top.get("instance_info") if isinstance(top.get("instance_info"), dict) else {}
    named = [info.get("instance_type"), top.get("instance_type")] + [d.get("instance_type") for d in devices]
    return NeuronHost(
        format=fmt,
        devices=len(devices),
        cores=sum(counts),
        instance_type=next((n for n in named if isinstance(n, str) and n), None) or instance_type,
        lnc=lnc,
        memory_per_device=_first_int([*memory, hardware.get("neuron_device_memory_size")]),
    )


def instance_type_from_table(text: str) -> str | None:
    """The `instance-type: trn2n.48xlarge` header of the plain `neuron-ls` table (SDK 2.21+)."""
    m = re.search(r"^instance-type:\s*(\S+)\s*$", text, re.MULTILINE)
    return m.group(1) if m else None


def _device_list(data: dict[str, Any]) -> list[Any] | None:
    """The 2.34 format's device list: the documented key if present, else the one list of objects
    that carry `nc_count` (the key is not published yet)."""
    if isinstance(data.get("neuron_devices"), list):
        return data["neuron_devices"]
    lists = [
        v
        for v in data.values()
        if isinstance(v, list) and v and all(isinstance(d, dict) and "nc_count" in d for d in v)
    ]
    return lists[0] if len(lists) == 1 else None


def _int(device: dict[str, Any], key: str, i: int) -> int:
    value = device.get(key)
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise HostProbeFailed(
            f"device {device.get('neuron_device', i)} in neuron-ls JSON has {key}={value!r}, not a count of "
            "NeuronCores: update neuronforge/compilation/host_probe.py for this aws-neuronx-tools release"
        )
    return value


def _first_int(values: list[Any]) -> int | None:
    return next((v for v in values if isinstance(v, int) and not isinstance(v, bool) and v > 0), None)


def _shape(data: Any) -> str:
    if isinstance(data, dict):
        return f"an object with keys {', '.join(sorted(data)[:8]) or 'none'}"
    if isinstance(data, list):
        return f"a list of {', '.join(sorted({type(d).__name__ for d in data}))}"
    return f"a {type(data).__name__}: {json.dumps(data)[:60]}"


def _excerpt(text: str) -> str:
    first = next((line.strip() for line in text.splitlines() if line.strip()), "")
    return f"first line {first[:100]!r}" if first else "empty output"


# -- running the tool ----------------------------------------------------------------------------
def find_tool() -> str:
    """`neuron-ls` on PATH, else where aws-neuronx-tools installs it."""
    found = shutil.which(TOOL) or (str(TOOL_DIR / TOOL) if (TOOL_DIR / TOOL).is_file() else None)
    if found is None:
        raise HostProbeFailed(
            f"{TOOL} not found on PATH or in {TOOL_DIR}: install aws-neuronx-tools on this Neuron host "
            "(the SDK's images have it), or put its directory on the worker's PATH"
        )
    return found


def _run(tool: str, args: tuple[str, ...], timeout_s: float) -> subprocess.CompletedProcess[str]:
    try:
        return interrupts.run([tool, *args], timeout=timeout_s)
    except subprocess.TimeoutExpired:
        raise HostProbeFailed(
            f"`{tool} {' '.join(args)}` did not answer in {timeout_s:g}s: check the Neuron driver on this host "
            "(`neuron-ls` by hand, `dmesg | grep neuron`)"
        ) from None
    except OSError as exc:
        raise HostProbeFailed(
            f"`{tool}` could not be run: {exc.strerror}; check the file and its permissions"
        ) from None


def _said(done: subprocess.CompletedProcess[str]) -> str:
    line = next((x.strip() for x in (done.stderr or done.stdout or "").splitlines() if x.strip()), "")
    return f"exit {done.returncode}: {line[:160]}" if line else f"exit {done.returncode}, nothing printed"


def probe(tool: str | None = None, timeout_s: float = TIMEOUT_S) -> NeuronHost:
    """Ask `neuron-ls` what host this is, the way the installed release wants: `--output-format json`
    (SDK 2.34+), and when that fails — an older `neuron-ls` does not know the option; how it words
    that is not publicly recorded, so any failure without JSON counts — `-j`. When the JSON names no
    instance type, the plain table's `instance-type:` header does."""
    exe = tool or find_tool()
    new = _run(exe, NEW_ARGS, timeout_s)
    if new.returncode == 0 and new.stdout.strip():
        return _with_instance_type(exe, parse_neuron_ls(new.stdout), timeout_s)
    old = _run(exe, OLD_ARGS, timeout_s)
    if old.returncode != 0:
        raise HostProbeFailed(
            f"neuron-ls cannot list this host's Neuron devices: `{' '.join(NEW_ARGS)}` gave {_said(new)}; "
            f"`{' '.join(OLD_ARGS)}` gave {_said(old)}; check the Neuron driver (aws-neuronx-dkms) and "
            "that this worker has the devices (/dev/neuron*)"
        )
    return _with_instance_type(exe, parse_neuron_ls(old.stdout), timeout_s)


def _with_instance_type(tool: str, host: NeuronHost, timeout_s: float) -> NeuronHost:
    if host.instance_type is not None:
        return host
    table = _run(tool, (), timeout_s)
    named = instance_type_from_table(table.stdout) if table.returncode == 0 else None
    if named is None:
        return host
    return NeuronHost(host.format, host.devices, host.cores, named, host.lnc, host.memory_per_device)


# -- the check -----------------------------------------------------------------------------------
def check_host(host: NeuronHost, target: TargetSpec) -> None:
    """HostMismatch, in one line, when this host cannot run `target`: another chip family (inf2 vs
    trn1 vs trn2 — unchecked when neuron-ls named no instance type), or fewer physical NeuronCores
    than tp × LNC."""
    t = target.normalized()
    family = chip_family(t.instance.family)
    what = f"{t.instance_type} tp {t.tp_degree} × LNC {t.lnc}"
    if host.family is not None and host.family != family:
        raise HostMismatch(
            f"this host is {host.describe()}: a {host.family} host, and the target {what} was compiled for "
            f"{family}; run this stage on a host of the {family} family"
        )
    need = t.tp_degree * t.lnc
    if host.physical_cores < need:
        raise HostMismatch(
            f"this host is {host.describe()}: {host.physical_cores} physical NeuronCores, and the target {what} "
            f"needs {need} ({neuron_devices(t)} device(s)); run this stage on a {t.instance_type} or larger"
        )
