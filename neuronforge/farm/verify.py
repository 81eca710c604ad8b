"""`neuronforge verify`: does a published artifact still hold what its manifest says, and would its
consumer load it?

Three checks, all offline: every file the manifest lists is downloaded and re-hashed
(size and sha256), and the profile the artifact was built for runs its preflight — the consumer's
load-time rules (required files, version equality, config fields that must match the launch spec)
— on the downloaded copy. The same preflight ran before the artifact was published; running it
again catches a store that was edited since, or a manifest made by another neuronforge. Last, what
the artifact points at outside its folder must be in the store (`ServingProfile.store_problems`: the
compile-cache entries an LMI artifact's `compiled_graph_path` must hold).
"""

from __future__ import annotations

import shutil
import tempfile
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from neuronforge.artifacts.opening import Opened, note_checked
from neuronforge.artifacts.published import read_manifest, verify_files
from neuronforge.common.errors import InvalidInput
from neuronforge.records.base import RecordError
from neuronforge.stores import ArtifactStore, NotFound


@dataclass
class Verification:
    artifact_uri: str
    profile: str
    files: int
    problems: list[str] = field(default_factory=list)
    retraced: bool | None = None  # --retrace: ran (True), not asked (None), the profile has none (False)

    @property
    def ok(self) -> bool:
        return not self.problems

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "ok": self.ok}


def verify_artifact(
    store: ArtifactStore, manifest_key: str, work_dir: Path, retrace: bool = False, opened: Opened | None = None
) -> Verification:
    """Re-hash every file of the artifact whose manifest is `manifest_key`, then run its profile's
    preflight on the downloaded copy; with `retrace`, also the profile's start-up re-trace in its
    toolchain's interpreter (`ServingProfile.retrace_problems`). `opened`: the artifact as
    `opening.open_artifact` opened it (the CLI, however it was named): its manifest is not read again,
    and what the re-hash finds is recorded in its store's farm index as damage, or as the end of one
    (`opening.note_checked`; nothing for a copy its store's index does not name)."""
    from neuronforge.profiles import get_profile
    from neuronforge.profiles.base import Artifact

    manifest = opened.manifest if opened is not None else None
    if manifest is None:
        try:
            manifest = read_manifest(store, manifest_key)
        except NotFound:
            raise InvalidInput(
                f"{store.uri(manifest_key)}: no manifest there (give an artifact root or its manifest.json)"
            ) from None
        except RecordError as exc:
            if not exc.loc:  # not JSON, no or a newer schema version: a store problem, as it says
                raise
            raise InvalidInput(f"{exc} (not a neuronforge artifact manifest)") from None
    prefix = manifest_key.rpartition("/")[0]
    if manifest.profile is None or not manifest.request:
        raise InvalidInput(f"{store.uri(manifest_key)} is not a neuronforge artifact manifest with a profile")
    files = manifest.files
    result = Verification(store.uri(prefix) if prefix else store.root_uri, manifest.profile.ref or "?", len(files))
    work_dir.mkdir(parents=True, exist_ok=True)
    root = Path(tempfile.mkdtemp(prefix="nf-verify-", dir=work_dir))
    try:
        result.problems += verify_files(store, prefix, files, download_to=root)
        if opened is not None:
            note_checked(opened, list(result.problems))
        try:
            profile = get_profile(result.profile)
        except InvalidInput as exc:
            result.problems.append(f"profile {result.profile}: {exc}")
            return result
        try:
            artifact = Artifact.from_manifest(root, manifest)
        except (InvalidInput, KeyError) as exc:
            result.problems.append(f"manifest: the target it records cannot be read ({exc})")
            return result
        result.problems += [f"preflight ({profile.ref}): {p}" for p in profile.preflight(artifact)]
        result.problems += [f"store ({profile.ref}): {p}" for p in profile.store_problems(artifact, store)]
        if retrace:
            found = profile.retrace_problems(artifact, root / ".retrace")
            result.retraced = found is not None
            result.problems += [f"retrace ({profile.ref}): {p}" for p in found or []]
        elif why := profile.retrace_required():
            result.problems.append(f"retrace ({profile.ref}): required before deploying, not run (--retrace): {why}")
        return result
    finally:
        shutil.rmtree(root, ignore_errors=True)
