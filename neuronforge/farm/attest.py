"""Attest a published build at a newer Neuron SDK release without compiling it (`neuronforge attest KEY
--sdk R`, and `recompile --sdk R` for each kept target whose decision is `re-smoke` or `re-verify`): what
the release asks of the build (`upgrade_decisions`: the packages that changed between the release it was
built on and R, by what its serving line reads of each) decides what is run —

- `re-smoke` (only what a load reads changed) and `nothing`: the build's own smoke test, on this host
  (a Neuron host of R, where the recompile DAG places it), against the published artifact as stored:
  its files downloaded and checked against its manifest, loaded as its consumer loads them through a
  compile cache holding only the entries its launch files name — a graph the load would compile fails
  it — and the tokens compared with the reference the build published (`smoke/expected.json`);
- `re-verify` (a library the consumer's key may hash changed, the compiler did not): the consumer's own
  re-trace (`ServingProfile.retrace`) in the interpreter of R's image — the toolchain of R as this host
  names it (`NEURONFORGE_TOOLCHAIN_PYTHON_<R>`, `ToolchainPython.resolve`; R needs no registered
  profile) — against the published cache, compiling forbidden; when every key is found, the smoke test
  as above in that interpreter too (R's runtime may have changed as well). The attestation keeps the
  keys found and missing; it passes only when none is missing and the smoke passed. A key missing means
  R's consumer would compile the build's graphs: the decision becomes `rebuild`, on a profile version of
  the line registered for R (`upgrades.reverified`);
- `rebuild`: refused: the build is rebuilt on R, not attested.

A build whose profile reads no Neuron SDK (the cpu profile: SDK `none`) reads no package of R: its
smoke test is what proves it there. The result is appended to the build's attestations
(`artifacts.attestations`), passed or not — a failure revokes an earlier pass for R.
"""

from __future__ import annotations

import logging
import shutil
import socket
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from neuronforge.artifacts import attestations
from neuronforge.artifacts.opening import open_published
from neuronforge.artifacts.published import Damage
from neuronforge.common import advice
from neuronforge.common.errors import ExitCode, InvalidInput, NeuronforgeError, StoreError
from neuronforge.farm import upgrade_decisions
from neuronforge.profiles import release_table
from neuronforge.records.artifact_manifest import ArtifactManifest
from neuronforge.records.attestation import Attestation
from neuronforge.spec.source import sha256_file
from neuronforge.stores import ArtifactStore
from neuronforge.stores.base import inside

if TYPE_CHECKING:
    from neuronforge.compilation.backends.interpreter import ToolchainPython
    from neuronforge.profiles.base import ServingProfile

log = logging.getLogger(__name__)

NO_SDK = "none"  # the release a profile without a Neuron SDK records (`Pins.sdk_release`)


class NotAttestable(NeuronforgeError):
    """What the release asks of the build cannot be proven without compiling: a rebuild."""

    exit_code = ExitCode.REJECTED


@dataclass(frozen=True)
class AttestOutcome:
    key: str
    release: str
    decision: str  # what the release asks of the build (`upgrade_decisions`), or "built on it"
    attestation: Attestation | None  # None: nothing was run (built on the release)

    @property
    def line(self) -> str:
        if self.attestation is None:
            return f"build {self.key[:12]} was built on SDK {self.release}: nothing to attest"
        a = self.attestation
        word = "passed" if a.passed else "FAILED"
        then = f"; rebuild it on a profile version for SDK {self.release}" if a.keys_missing else ""
        return f"build {self.key[:12]} at SDK {self.release}: {a.run} {word} on {a.host} ({a.detail}); attested{then}"


def decision_for(manifest: ArtifactManifest, release: str) -> upgrade_decisions.PackageDecision:
    """What `release` asks of the published build `manifest` describes, from the release table."""
    profile = manifest.profile
    line, built_on = (profile.name, profile.sdk_release) if profile is not None else ("", "")
    table = release_table.current()
    new = table.entry(release)
    if new is None:
        raise InvalidInput(f"SDK {release} is not in the release table (neuronforge/profiles/releases/)")
    if built_on == NO_SDK:
        return upgrade_decisions.PackageDecision(upgrade_decisions.RESMOKE, NO_SDK, release)
    decided = upgrade_decisions.between(table, line, built_on, release)
    if decided is None:
        raise NotAttestable(
            f"build {manifest.cache_key[:12]} ({line or 'no profile'} on SDK {built_on or '?'}): the release table "
            f"does not say what {release} changes for it; rebuild it on {release}"
        )
    return decided


def attest_build(store: ArtifactStore, key: str, release: str, work_dir: Path) -> AttestOutcome:
    """Run what `release` asks of the published build `key` (module doc) and record the attestation."""
    opened = open_published(store, key, by="attest")
    if opened is None or opened.manifest is None or isinstance(opened.found, Damage) or opened.record is not None:
        raise InvalidInput(f"build {key[:12]} is not a published, sound artifact in {store.root_uri}")
    manifest = opened.manifest
    built_on = manifest.profile.sdk_release if manifest.profile is not None else ""
    if built_on == release:
        return AttestOutcome(key, release, "built on it", None)
    decided = decision_for(manifest, release)
    if decided.decision == upgrade_decisions.REBUILD:
        raise NotAttestable(f"build {key[:12]}: {decided.sentence()}: rebuild it on {release}, it cannot be attested")
    payload = download(store, opened.prefix, manifest, work_dir / "attest" / key[:12])
    try:
        if decided.decision == upgrade_decisions.REVERIFY:
            attestation = reverify(store, manifest, payload, release, work_dir, decided)
        else:  # in R's interpreter: R's runtime is what is proven
            result = smoke_published(store, manifest, payload, work_dir, serving_python(manifest, release))
            said = f"{result.reason}; {decided.sentence()}"
            attestation = _attestation(
                manifest, release, "re-smoke", result.passed, said, measurement=result.measurement
            )
    finally:
        shutil.rmtree(payload, ignore_errors=True)
    attestations.attest(store, key, attestation)
    return AttestOutcome(key, release, decided.decision, attestation)


def reverify(
    store: ArtifactStore,
    manifest: ArtifactManifest,
    payload: Path,
    release: str,
    work_dir: Path,
    decided: upgrade_decisions.PackageDecision,
) -> Attestation:
    """The consumer's re-trace of the downloaded build in R's interpreter, compiling forbidden, then (every
    key found) its smoke test there: the `re-verify` attestation (module doc)."""
    from neuronforge.profiles.base import Artifact
    from neuronforge.profiles.registry import get_profile

    assert manifest.profile is not None
    profile = get_profile(manifest.profile.ref)
    python = release_python(profile, release)
    artifact = Artifact.from_manifest(payload, manifest)
    found = profile.retrace(artifact, work_dir / "attest-retrace" / payload.name, python)
    if found is None:
        raise NotAttestable(
            f"build {manifest.cache_key[:12]}: {decided.sentence()}, but profile {profile.ref} has no re-trace of "
            f"its consumer: rebuild it on {release}"
        )
    passed, said, measured = found.hit, found.sentence(), None
    if found.hit:
        result = smoke_published(store, manifest, payload, work_dir, python)
        passed, said, measured = result.passed, f"{said}; {result.reason}", result.measurement
    return _attestation(
        manifest,
        release,
        "re-verify",
        passed,
        f"{said} (in {python.path}); {decided.sentence()}",
        keys_found=list(found.found),
        keys_missing=list(found.missing),
        measurement=measured,
    )


def serving_python(manifest: ArtifactManifest, release: str) -> ToolchainPython | None:
    """Where a kept build is smoked at `release`: the interpreter of `release`'s image for a Neuron
    profile (`release_python`), whatever release the build was made on; None (the profile's own) for a
    profile without a Neuron SDK."""
    from neuronforge.profiles.registry import get_profile

    if manifest.profile is None:
        return None
    profile = get_profile(manifest.profile.ref)
    return release_python(profile, release) if profile.neuron else None


def release_python(profile: ServingProfile, release: str) -> ToolchainPython:
    """The interpreter of `release`'s image for `profile`'s consumer: `NEURONFORGE_TOOLCHAIN_PYTHON_<release>`,
    else the global setting, else the interpreter the profile declares — whether or not a profile version
    is registered for `release` (2.33.1 has none)."""
    from neuronforge.compilation.backends.interpreter import ToolchainPython

    return ToolchainPython.resolve(release, profile.toolchain_python or "python3")


def _attestation(
    manifest: ArtifactManifest, release: str, run: Literal["re-smoke", "re-verify"], passed: bool, detail: str, **keys
) -> Attestation:
    return Attestation(
        release=release,
        run=run,
        passed=passed,
        at=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        host=socket.gethostname(),
        packages=load_packages(manifest, release),
        detail=detail[:1000],
        **keys,
    )


def load_packages(manifest: ArtifactManifest, release: str) -> dict[str, str]:
    """The versions at `release` of the packages the build's line loads with (runtime, collectives, ...)."""
    table = release_table.current()
    entry, line = table.entry(release), manifest.profile.name if manifest.profile is not None else ""
    facts = table.lines.get(line)
    if entry is None or facts is None:
        return {}
    loads = {p for r in facts.reads if r.role == "load" for p in r.packages}
    return {p.distribution: p.full for p in entry.packages if p.distribution in loads}


def download(store: ArtifactStore, prefix: str, manifest: ArtifactManifest, folder: Path) -> Path:
    """The published artifact's files under `folder`, each checked against its manifest (size, sha256)."""
    shutil.rmtree(folder, ignore_errors=True)
    pairs = [(f"{prefix}/{f.path}", inside(folder, f.path, "manifest entry")) for f in manifest.files]
    store.get_files(pairs, total_bytes=sum(f.size for f in manifest.files))
    for f, (_, local) in zip(manifest.files, pairs, strict=True):
        if local.stat().st_size != f.size or sha256_file(local) != f.sha256:
            raise StoreError(
                f"{store.uri(prefix)}/{f.path} does not match its manifest: "
                f"{advice.command('verify', manifest.cache_key[:12], store=store.root_uri)} checks every file of it"
            )
    return folder


def smoke_published(
    store: ArtifactStore,
    manifest: ArtifactManifest,
    payload: Path,
    work_dir: Path,
    python: ToolchainPython | None = None,
):  # -> SmokeResult
    """The smoke stage's test (`pipeline.stages.smoke.smoke_test`) of a published payload, as its profile
    loads it, compiling forbidden, in `python` (default: the profile version's toolchain): on a Neuron
    profile the host is probed first."""
    from neuronforge.compilation.compile_cache import CompileCache
    from neuronforge.pipeline.stages.smoke import SmokeInput, probe_host, smoke_test
    from neuronforge.profiles.registry import get_profile

    assert manifest.profile is not None
    profile = get_profile(manifest.profile.ref)
    target = manifest.target_spec()
    host = probe_host(target) if profile.neuron else None
    load = profile.smoke_load(payload)
    cache_root = work_dir / "attest-cache" / manifest.cache_key[:12]
    shutil.rmtree(cache_root, ignore_errors=True)
    tc = manifest.toolchain
    cache = CompileCache(cache_root, tc.compiler, tc.compiler_version, store)
    if load.cache_entries:
        cache.preseed(list(load.cache_entries))
    python = python or profile.python()
    return smoke_test(SmokeInput(payload, load, profile.backend.name, cache, python, target=target, host=host))
