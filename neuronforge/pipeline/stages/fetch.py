"""Stage `fetch`: bring a checkpoint into the work dir, verified, and mirror it into the store.

Hub sources come through `huggingface_hub.snapshot_download` pinned to the resolved sha and
limited to checkpoint files; S3 objects are downloaded once each, straight into staging (the
listing must still say what the pin said); local and built-in folders are copied. The copy is
verified (`neuronforge.checkpoints.checkpoint.verify_checkpoint`) in a staging folder, described by a
`MANIFEST.json` (file, size, sha256), uploaded to the store under
`checkpoints/<org>/<name>/<revision>/` (files first, manifest last) and then adopted into this
host's verified cache (`neuronforge.artifacts.localcache`). Later stages, on any host, materialize the
checkpoint from the store by its `TreeRef`, never from the Hub or the source. Fetching a revision
the store already has downloads it only to a host that has not verified it yet.

`run` is the stage's adapter (what it reads from the `BuildState`, what it writes back) and `STAGE`
its declaration, listed in `neuronforge.pipeline.runner.STAGES`.
"""

from __future__ import annotations

import hashlib
import logging
import shutil
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from neuronforge.artifacts import layout
from neuronforge.artifacts.localcache import TreeRef, adopt, materialize, publish_tree, ref_of
from neuronforge.checkpoints.checkpoint import verify_checkpoint
from neuronforge.common.errors import CheckpointError
from neuronforge.pipeline.buildstate import BuildState
from neuronforge.pipeline.stage import Context, Stage
from neuronforge.pipeline.stages.resolve import (
    hub_errors,
    hub_offline,
    hub_snapshot,
    local_folder,
    resolve_source,
    s3_listing,
    s3_revision,
)
from neuronforge.records.checkpoint import CheckpointManifest, CheckpointOrigin
from neuronforge.records.local import read_local
from neuronforge.records.tree import StoredFile
from neuronforge.spec.source import (
    FileEntry,
    ModelSource,
    contained,
    files_digest,
    is_pickle_file,
    list_relative,
    scan_folder,
    select_checkpoint_files,
)
from neuronforge.stores import ArtifactStore, open_location
from neuronforge.stores.base import inside

log = logging.getLogger(__name__)


@dataclass
class FetchRequest:
    source: str | ModelSource  # as given, or already pinned (then it is fetched exactly as pinned)
    work_dir: Path
    allow_pickle: bool = False
    token: str | None = field(default=None, repr=False)  # never printed


@dataclass
class FetchResult:
    source: ModelSource
    local_dir: Path
    store_prefix: str
    manifest_uri: str
    files: list[FileEntry]
    architecture: str
    reused: bool
    warnings: list[str] = field(default_factory=list)
    seconds: float = 0.0
    ref: TreeRef | None = None  # what later stages (on any host) materialize


def _manifest(
    source: ModelSource, entries: list[FileEntry], arch: str, model_type: str, warnings: list[str]
) -> CheckpointManifest:
    return CheckpointManifest(
        source=CheckpointOrigin(
            kind=source.kind,
            location=source.location,
            requested_revision=source.revision,
            revision=source.resolved_revision,
        ),
        architecture=arch,
        model_type=model_type,
        files=[StoredFile(path=e.path, size=e.size, sha256=e.sha256) for e in sorted(entries, key=lambda e: e.path)],
        warnings=warnings,
        fetched_at=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    )


def _entries(manifest: CheckpointManifest) -> list[FileEntry]:
    return [FileEntry(f.path, f.size, f.sha256) for f in manifest.files]


def _download_into(source: ModelSource, staging: Path, req: FetchRequest) -> list[FileEntry] | None:
    """Put the source's checkpoint files (and only those) into `staging`; returns their entries
    when it hashed them (S3 and local sources), so the caller need not hash them again."""
    staging.mkdir(parents=True)
    if source.kind == "hf":
        rev = source.resolved_revision
        # Decide on pickle before downloading weights: list the repo (or the offline snapshot).
        if hub_offline():
            names = list_relative(hub_snapshot(source, rev, allow_patterns=None, token=None))
        else:
            from huggingface_hub import HfApi

            with hub_errors(source.location, rev):
                names = HfApi(token=req.token).list_repo_files(source.location, revision=rev)
        chosen = select_checkpoint_files(names, req.allow_pickle)
        snapshot = hub_snapshot(source, rev, allow_patterns=chosen, token=req.token)
        for rel in chosen:
            src = snapshot / rel
            if not src.exists():
                raise CheckpointError(f"{source.location}@{rev}: {rel} is listed but was not downloaded")
            (staging / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(src.resolve(), staging / rel)  # the cache holds symlinks to blobs
        return None
    if source.kind == "s3":
        _download_s3(source, staging, req)
        return None
    folder = local_folder(source)
    for rel in select_checkpoint_files(list_relative(folder), req.allow_pickle):
        (staging / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(contained(folder, rel), staging / rel)
    # The copy must be what was resolved: a checkpoint that changed under us is refused.
    entries = scan_folder(staging, req.allow_pickle)
    digest = files_digest(entries)
    if digest != source.resolved_revision:
        raise CheckpointError(
            f"{source} changed while it was being fetched (digest {digest[:12]} != resolved "
            f"{source.resolved_revision[:12]}); fetch again once it is stable"
        )
    return entries


def _download_s3(source: ModelSource, staging: Path, req: FetchRequest) -> None:
    """Each checkpoint object once, straight into `staging`; the listing (keys, sizes, ETags) must
    say the same before and after as when the source was pinned."""
    objects = s3_listing(source, req.allow_pickle)
    if s3_revision(objects) != source.resolved_revision:
        raise CheckpointError(
            f"{source.location} changed since the run pinned it (objects added, removed or rewritten); "
            "trigger the run again to build the current checkpoint"
        )
    pairs = [(o.key, inside(staging, o.key, "S3 object key")) for o in objects]
    open_location(source.location).get_files(pairs, total_bytes=sum(o.size for o in objects))
    if s3_revision(s3_listing(source, req.allow_pickle)) != source.resolved_revision:
        raise CheckpointError(f"{source.location} changed while it was being fetched; fetch again once it is stable")


@contextmanager
def _one_fetch_per_host(work_dir: Path, store: ArtifactStore, prefix: str) -> Iterator[None]:
    """Serialize this host's fetches of one checkpoint revision into one store: the mapped fetch tasks
    of a run's targets start together on one worker; the second waits, then finds the first's
    mirror in the store and its verified local copy, instead of downloading the checkpoint again."""
    from filelock import FileLock

    locks = work_dir / "locks"
    locks.mkdir(parents=True, exist_ok=True)
    name = hashlib.sha256(store.uri(prefix).encode()).hexdigest()[:32]
    with FileLock(str(locks / f"fetch-{name}.lock")):
        yield


def fetch(req: FetchRequest, store: ArtifactStore) -> FetchResult:
    """The checkpoint `req` names, mirrored into `store` (opened by the caller's edge: the CLI or the
    Airflow hook) and verified in the work dir. A caller that would create a store parses the source
    first (`ModelSource.parse`), so a source that cannot be parsed creates nothing."""
    started = time.monotonic()
    parsed = ModelSource.parse(req.source) if isinstance(req.source, str) else req.source
    # As `run` does: a store that is down or has no bucket fails now, not at the first upload.
    store.probe(write=False)
    work_dir = req.work_dir.resolve()
    source = resolve_source(parsed, work_dir=work_dir, allow_pickle=req.allow_pickle, token=req.token)
    prefix = layout.checkpoint_prefix(source)
    with _one_fetch_per_host(work_dir, store, prefix):
        return _fetch_pinned(req, store, source, prefix, work_dir, started)


def _fetch_pinned(
    req: FetchRequest, store: ArtifactStore, source: ModelSource, prefix: str, work_dir: Path, started: float
) -> FetchResult:
    ref = ref_of(store, prefix)
    if ref is not None:
        local = materialize(store, ref, work_dir, deep=True)  # no download when this host has it intact
        manifest = read_local(CheckpointManifest, local / layout.MANIFEST)
        log.info("checkpoint %s is in the store (%s); local copy verified", source, store.uri(prefix))
        return FetchResult(
            source=source,
            local_dir=local,
            store_prefix=prefix,
            manifest_uri=store.uri(ref.manifest_key),
            files=_entries(manifest),
            architecture=manifest.architecture,
            reused=True,
            warnings=list(manifest.warnings),
            seconds=time.monotonic() - started,
            ref=ref,
        )

    store.probe(write=True)  # a store that cannot hold the checkpoint fails before the download
    staging = work_dir / "staging" / f"{uuid.uuid4().hex}"
    try:
        hashed = _download_into(source, staging, req)
        try:
            verified = verify_checkpoint(staging, allow_pickle=req.allow_pickle)
        except CheckpointError as exc:
            # name what the user gave, not this host's staging folder
            text = str(exc).replace(str(staging), str(source)).replace(staging.name, str(source))
            raise CheckpointError(text) from None
        # Hash once: reuse the copy's entries unless verification converted pickle weights.
        rehash = hashed is None or any(is_pickle_file(e.path) for e in hashed)
        entries = scan_folder(staging) if rehash else hashed
        manifest = _manifest(source, entries, verified.arch.architecture, verified.arch.model_type, verified.warnings)
        # Data first, manifest last: readers trust only a checkpoint whose manifest exists.
        ref = publish_tree(store, staging, prefix, manifest)
        local = adopt(staging, ref, work_dir)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    for w in verified.warnings:
        log.warning("%s: %s", source, w)
    log.info("fetched %s: %d files, published to %s", source, len(entries), store.uri(prefix))
    return FetchResult(
        source=source,
        local_dir=local,
        store_prefix=prefix,
        manifest_uri=store.uri(ref.manifest_key),
        files=entries,
        architecture=verified.arch.architecture,
        reused=False,
        warnings=verified.warnings,
        seconds=time.monotonic() - started,
        ref=ref,
    )


def fetch_summary(result: FetchResult) -> dict[str, Any]:
    return {
        "source": str(result.source),
        "revision": result.source.resolved_revision,
        "architecture": result.architecture,
        "local_dir": str(result.local_dir),
        "manifest_uri": result.manifest_uri,
        "files": len(result.files),
        "bytes": sum(f.size for f in result.files),
        "reused": result.reused,
        "warnings": result.warnings,
        "seconds": round(result.seconds, 3),
    }


def run(state: BuildState, ctx: Context) -> BuildState:
    """The pinned source's checkpoint, verified and mirrored into the store (reused when it is)."""
    req = FetchRequest(state.pinned_source(), ctx.work_dir, state.allow_pickle)
    result = fetch(req, ctx.store)
    summary = fetch_summary(result)
    log.info(
        "checkpoint %s: %d files, %d bytes, %s",
        summary["source"],
        summary["files"],
        summary["bytes"],
        "reused" if result.reused else "fetched",
    )
    return state.model_copy(update={"checkpoint": result.ref})


STAGE = Stage(
    "fetch_checkpoint",
    run,
    "checkpoint verified and mirrored into the store",
    reads=("source",),
    writes=("checkpoint",),
)
