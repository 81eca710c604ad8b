"""AWS's own machine-readable record of the Neuron SDK releases: `src/helperscripts/n2-manifest.json` in
aws-neuron/aws-neuron-sdk (per release every package with its version and `supported_instances`; the
newest release per instance family in `latest_release`). Parsed here once, for everything that reads it:
the release feed (`neuronforge.farm.release_feed`: `neuronforge releases sync`) and the recompile report's
"is a newer release out" (`neuronforge.farm.recompile.sdk_release_status`).

AWS's file, not a record of ours: read under the bounds of stored JSON (`common.stored_json`: its size,
nesting, numbers, strict UTF-8), then every part the readers use checked — a release's version, each
package's name, version and instances. Fields AWS adds that nobody reads are ignored. A file that breaks
any of it is one line naming the file and the problem (`ManifestError`), never a traceback.

Versions here carry no local label (the wheels report `2.21.33363.0+82129205`; the manifest `2.21.33363.0`).
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, ValidationError

from neuronforge.common import stored_json
from neuronforge.common.errors import InvalidInput
from neuronforge.profiles.lifecycle import release_key

MAX_BYTES = 16 * 1024 * 1024  # every release with every package: ~0.3 MiB upstream (2.32.0)
UPSTREAM = (
    "https://raw-githubusercontent-com.072103.xyz/aws-neuron/aws-neuron-sdk/master/src/helperscripts/n2-manifest.json"
)
COMPILER = "neuronx-cc"

Word = Annotated[str, StringConstraints(strict=True, min_length=1, max_length=200)]
ReleaseVersion = Annotated[str, StringConstraints(strict=True, pattern=r"^\d+\.\d+(\.\d+)?$")]


class ManifestError(InvalidInput):
    """A release manifest that does not read: `<where>: <problem>`, one line."""


class _Part(BaseModel):
    model_config = ConfigDict(frozen=True, extra="ignore")


class _Package(_Part):
    name: Word
    version: Word
    supported_instances: tuple[Word, ...] = ()
    supported_python_versions: tuple[Word, ...] = ()


class _Release(_Part):
    neuron_version: ReleaseVersion
    packages: tuple[_Package, ...] = Field(max_length=2000)


class _Latest(_Part):
    instance: Word
    version: ReleaseVersion


class _Manifest(_Part):
    manifest_version: Word = ""
    manifest_date: Word = ""
    latest_release: tuple[_Latest, ...] = ()
    neuron_releases: tuple[_Release, ...] = Field(min_length=1, max_length=2000)


def distribution(name: str) -> str:
    """A package's name as pip compares it (PEP 503: `libtorch_neuronx_lite` is `libtorch-neuronx-lite`)."""
    return re.sub(r"[-_.]+", "-", name).lower()


@dataclass(frozen=True)
class ManifestPackage:
    name: str  # as the manifest spells it
    version: str  # public: no local label
    instances: tuple[str, ...]  # `supported_instances`
    python: tuple[str, ...] = ()  # `supported_python_versions`

    @property
    def distribution(self) -> str:
        return distribution(self.name)


@dataclass(frozen=True)
class ManifestRelease:
    version: str
    packages: tuple[ManifestPackage, ...]  # in the manifest's order; a name may repeat (torch-xla 2.11, 2.12)

    def versions(self) -> dict[str, set[str]]:
        """distribution -> the versions the release lists of it."""
        out: dict[str, set[str]] = {}
        for p in self.packages:
            out.setdefault(p.distribution, set()).add(p.version)
        return out

    @property
    def compiler(self) -> str:
        """The release's neuronx-cc ("" when it lists none)."""
        return next((p.version for p in self.packages if p.distribution == COMPILER), "")


@dataclass(frozen=True)
class ReleaseManifest:
    where: str  # the file or address it was read from
    sha256: str
    version: str  # `manifest_version`
    date: str  # `manifest_date`, as AWS writes it (MM/DD/YYYY)
    releases: tuple[ManifestRelease, ...]  # oldest first
    latest: dict[str, str]  # instance family -> its newest release (`latest_release`)

    def release(self, version: str) -> ManifestRelease | None:
        return next((r for r in self.releases if release_key(r.version) == release_key(version)), None)


def parse(raw: bytes, where: str) -> ReleaseManifest:
    """The manifest in `raw` (read from `where`), every part the readers use checked."""
    try:
        data = stored_json.loads(raw, MAX_BYTES)
    except (stored_json.Unreadable, json.JSONDecodeError) as exc:
        raise ManifestError(f"{where}: not a Neuron SDK release manifest: {exc}") from None
    except ValueError as exc:  # a number outside the bounds of stored JSON
        raise ManifestError(f"{where}: not a Neuron SDK release manifest: {exc}") from None
    if not isinstance(data, dict):
        raise ManifestError(f"{where}: not a Neuron SDK release manifest: a JSON object was expected")
    try:
        m = _Manifest.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        field = ".".join(str(p) for p in first["loc"]) or "(file)"
        raise ManifestError(f"{where}: not a Neuron SDK release manifest: {field}: {first['msg']}") from None
    releases: dict[tuple[int, ...], ManifestRelease] = {}
    for r in m.neuron_releases:
        key = release_key(r.neuron_version)
        if key in releases:
            raise ManifestError(f"{where}: release {r.neuron_version} is listed twice")
        packages: dict[tuple[str, str], ManifestPackage] = {}
        for p in r.packages:  # AWS's file lists a few packages twice, alike (2.25.0): kept once
            one = ManifestPackage(p.name, p.version, p.supported_instances, p.supported_python_versions)
            packages.setdefault((one.distribution, one.version), one)
        releases[key] = ManifestRelease(r.neuron_version, tuple(packages.values()))
    return ReleaseManifest(
        where=where,
        sha256=hashlib.sha256(raw).hexdigest(),
        version=m.manifest_version,
        date=m.manifest_date,
        releases=tuple(releases[k] for k in sorted(releases)),
        latest={x.instance: x.version for x in m.latest_release},
    )
