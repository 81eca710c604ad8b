"""Stage `publish`: the tested payload becomes an artifact (readers: `neuronforge.artifacts.published`).

Under `artifacts/<org>/<name>/<revision>/<target-slug>/<key12>/`, as the target's serving profile
assembled it on the compile host (`neuronforge.pipeline.stages.payload`):
- `<folder>/`: the model as its consumer loads it, under a folder named for what it holds
  (`cpu-aoti/`, `optimum-neuron/`, `nxdi/`, `split/`);
- `launch/`: the launch spec rendered from the target (env file, command line);
- `smoke/expected.json`: the reference the smoke test compared against;
- `smoke.json`: the smoke-test result;
- `manifest.json`, written LAST: cache key, request, revision, profile (name, version, pins),
  toolchain, flags, every file with size and sha256, the outputs (`formats`, paths relative to the
  artifact's folder, rendered as URIs of whichever store is read), the smoke result, where each
  stage ran and for how long (`hosts`), the optimum-neuron cache repository the build was
  registered in and what optimum's lookup answered (`hub_registry`), every transfer of the build
  with its bytes and MB/s (`transfers`), timestamps.
Publishing copies the payload the smoke test loaded (staged as `builds/<key>/<digest>/`) inside the
store — the bytes never travel through the publishing host — adds `smoke.json`, checks every file
is there at its size, and writes the manifest. Then `index/<key>.json` is created with
`put_if_absent`. Readers trust only a complete manifest: `lookup` follows the index to the manifest
and checks every file it lists exists.

`run` is the stage's adapter (what it reads from the `BuildState`, what it writes back) and `STAGE`
its declaration, listed in `neuronforge.pipeline.runner.STAGES`.
"""

from __future__ import annotations

import hashlib
import logging
import time
from dataclasses import dataclass, field
from typing import Any

import neuronforge
from neuronforge.artifacts import farm_index, layout
from neuronforge.artifacts.localcache import TreeRef
from neuronforge.artifacts.published import SMOKE_JSON, Published, format_uris, missing_files, object_sizes
from neuronforge.common import interrupts
from neuronforge.common.errors import InvalidInput, StoreError
from neuronforge.pipeline.buildstate import BuildState, PublishedRef
from neuronforge.pipeline.stage import Context, Stage
from neuronforge.profiles.request import CompileRequest, cache_key_material
from neuronforge.records.artifact_manifest import ArtifactManifest
from neuronforge.records.hub_registry import HubRegistration
from neuronforge.records.index_entry import IndexEntry
from neuronforge.records.parts import FileEntry
from neuronforge.records.payload_manifest import PayloadManifest
from neuronforge.records.smoke import SmokeRecord
from neuronforge.records.transfers import TransferRecord
from neuronforge.spec.toolchain import Toolchain
from neuronforge.stores import ArtifactStore

log = logging.getLogger(__name__)


@dataclass
class PublishInput:
    request: CompileRequest
    toolchain: Toolchain
    key: str
    build: TreeRef  # the payload the smoke test loaded, staged in the store
    smoke: SmokeRecord
    compile: dict[str, Any]  # the compile stage's record (graphs, cache sync, the payload's formats)
    run_id: str = ""  # the Airflow run that built it (empty from the CLI): linked from the catalog page
    hosts: dict[str, Any] = field(default_factory=dict)  # where each stage ran, how long (`costs.host_report`)
    registered: HubRegistration | None = None  # the optimum-neuron registry entry (`stages.register`)
    transfers: list[TransferRecord] = field(default_factory=list)  # every stage's transfers (`hooks.TransferLog`)


def _payload(store: ArtifactStore, build: TreeRef) -> PayloadManifest:
    """The staged payload's manifest (its files, its launch files' text) as the smoke test's ref pinned it."""
    raw, _ = PayloadManifest.read_raw(store, build.manifest_key)  # under the bounds of every record
    if hashlib.sha256(raw).hexdigest() != build.manifest_sha256:
        raise StoreError(
            f"{store.uri(build.manifest_key)} changed since the compile staged it; run the build again "
            "(what the smoke test loaded is no longer what would be published)"
        )
    return PayloadManifest.from_bytes(raw, store.uri(build.manifest_key))


def _launch_text(payload: PayloadManifest) -> dict[str, str] | None:
    """The launch files' text the payload recorded, each only if it is its file's bytes (sha256); None
    for a payload with launch files staged before payloads recorded their text (the catalog reads them)."""
    sums = {f.path: f.sha256 for f in payload.files}
    if not payload.launch and any(p.startswith("launch/") for p in sums):
        return None
    return {
        name: text
        for name, text in payload.launch.items()
        if sums.get(f"launch/{name}") == hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()
    }


def publish(inp: PublishInput, store: ArtifactStore) -> Published:
    if not inp.smoke.passed:
        raise InvalidInput(f"refusing to publish {inp.key[:12]}: the smoke test failed ({inp.smoke.reason})")
    prefix = layout.artifact_prefix(inp.request.source, inp.request.target, inp.key)
    payload = _payload(store, inp.build)
    files = list(payload.files)
    store.copy_objects(inp.build.prefix, prefix, [f.path for f in files])
    smoke = inp.smoke.to_bytes()
    store.put_bytes(smoke, f"{prefix}/{SMOKE_JSON}")
    files.append(FileEntry(path=SMOKE_JSON, size=len(smoke), sha256=hashlib.sha256(smoke).hexdigest()))
    files.sort(key=lambda f: f.path)
    missing = missing_files(object_sizes(store, prefix), prefix, files)
    if missing:
        raise StoreError(f"{store.uri(prefix)}: {missing[:3]} missing or of another size after copying; not published")
    source = inp.request.source
    manifest = ArtifactManifest(
        cache_key=inp.key,
        request=cache_key_material(inp.request, inp.toolchain),
        source={"kind": source.kind, "location": source.location, "revision": source.resolved_revision},
        target_slug=inp.request.target.slug,
        profile=inp.request.profile.describe(),
        toolchain=inp.toolchain.to_json(),
        compiler_flags=list(inp.toolchain.compiler_flags),
        files=files,
        # Store-relative (to the artifact's folder): a copied or moved store renders its own URIs.
        formats=dict(inp.compile.get("formats") or {}),
        smoke=inp.smoke,
        compile={k: v for k, v in inp.compile.items() if k != "formats"},
        hosts=inp.hosts,
        hub_registry=inp.registered,
        launch_text=_launch_text(payload),
        transfers=inp.transfers,
        neuronforge_version=neuronforge.__version__,
        run_id=inp.run_id,
        published_at=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    )
    manifest_key = f"{prefix}/{layout.ARTIFACT_MANIFEST}"
    manifest.write(store, manifest_key)  # last: from here on the artifact exists
    interrupts.note_published(store.uri(manifest_key))  # an interrupt from here on says so
    index = IndexEntry(cache_key=inp.key, manifest=manifest_key, prefix=prefix)
    fresh = index.write_if_absent(store, layout.index_entry(inp.key))
    if not fresh:  # an earlier or concurrent run published it, or this run rebuilt a damaged artifact
        log.info("index/%s already present (published by an earlier or concurrent run)", inp.key[:12])
    farm_index.note_published(store, index, manifest, fresh=fresh)
    uris = format_uris(store, prefix, manifest.formats)
    return Published(inp.key, prefix, store.uri(manifest_key), uris, manifest)


def run(state: BuildState, ctx: Context) -> BuildState:
    """Publish the smoke-tested payload: its manifest (with every stage's host timing, this one's so
    far) written last; a run whose lease was taken over publishes nothing."""
    from neuronforge.common.hosts import StageRun, host_report

    compiled = state.need("compiled")
    runs = [*state.hosts]
    if ctx.stage_started is not None:  # this stage so far: the manifest is its last write
        host = state.profile.placement(STAGE.kind).host
        runs.append(StageRun.now("publish_artifact", time.monotonic() - ctx.stage_started, host))
    inp = PublishInput(
        state.request(),
        state.pinned_toolchain(),
        state.need("key"),
        compiled.build,
        state.need("smoke"),
        compiled.record,
        run_id=ctx.run_id,
        hosts=host_report(runs),
        registered=state.registered,
        transfers=state.transfers,
    )
    if ctx.keeper is not None:
        ctx.keeper.assert_held()  # a run whose lease was taken over publishes nothing
    published = publish(inp, ctx.store)
    log.info("published %s", published.manifest_uri)
    # The staged payload served its purpose: the artifact holds it now (a retry finds the key published).
    ctx.store.delete_prefix(layout.build_prefix(inp.key, "").rstrip("/"))
    return state.model_copy(update={"published": PublishedRef.of(published)})


STAGE = Stage(
    "publish_artifact",
    run,
    "copy the tested payload into the artifact folder, manifest last",
    final=True,
    reads=("source", "toolchain", "key", "compiled", "smoke"),
    writes=("published",),
)
