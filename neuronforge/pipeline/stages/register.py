"""Stage `register_hub_cache`: a smoke-tested build becomes visible to optimum-neuron's own lookup.

Runs only when the run names a cache repository (`--hub-registry`, the form's "Register in cache
repository") and the target's profile has a Hub registry (`ServingProfile.hub_registry`:
optimum-neuron); otherwise the build passes through untouched. After the smoke test passed and
before the artifact's manifest is written (which records what happened here), on a CPU worker of the
profile's image (the toolchain's interpreter computes the entry):

1. the version lock: the toolchain that built it must be the consumer's (optimum-neuron, neuronx-cc,
   transformers), or nothing is written;
2. the entry, computed by optimum-neuron itself from the checkpoint's config.json and the export's
   neuron_config.json (`OptimumRegistry.entry`), refused when optimum's lookup could not find it;
3. one commit to the repository: the build's NEFF folders (`neuronxcc-<ver>/MODULE_*`, from the
   store's compile cache), the entry and its alias (`artifacts.hub_registry.commit_build`);
4. optimum's own lookup of the repository (`get_hub_cached_entries` / `select_hub_cached_entries`,
   what `cache lookup` and `serve` run): the result goes into the manifest (`hub_registry.lookup`);
   a lookup that does not return the build is a warning, never a refusal of the build, which the
   smoke test already passed.

`run` is the stage's adapter and `STAGE` its declaration, listed in `neuronforge.pipeline.runner.STAGES`.
"""

from __future__ import annotations

import json
import logging
import shutil
import time
from pathlib import Path

from neuronforge.artifacts import layout
from neuronforge.artifacts.hub_registry import CacheRepo, commit_build, registry_paths
from neuronforge.artifacts.localcache import read_tree_file
from neuronforge.common import settings
from neuronforge.common.errors import InvalidInput, StoreError
from neuronforge.compilation.backends.child import ChildFailed
from neuronforge.compilation.compile_cache import DONE, CompileCache
from neuronforge.pipeline.buildstate import BuildState
from neuronforge.pipeline.stage import Context, Stage
from neuronforge.profiles.optimum_registry import same_entry
from neuronforge.records.artifact_manifest import ArtifactManifest
from neuronforge.records.hub_registry import HubRegistration, LookupCheck
from neuronforge.spec.toolchain import Toolchain
from neuronforge.stores import ArtifactStore

log = logging.getLogger(__name__)


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def _modules(state: BuildState, store: ArtifactStore, toolchain: Toolchain, into: Path) -> dict[str, Path]:
    """The build's compile-cache entries (the compile record's graphs), pulled complete from the store's
    `neuron-cache/` into a local cache under `into` (`CompileCache.preseed`, as a compile pre-seeds):
    what the consumer's compile cache proxy fetches from the repository."""
    names = sorted({str(g.get("entry")) for g in state.need("compiled").record.get("graphs") or [] if g.get("entry")})
    cache = CompileCache(into, toolchain.compiler, toolchain.compiler_version, store)
    cache.preseed(names)
    for name in names:
        if not (cache.entry(name) / DONE).exists():
            prefix = f"{cache.store_prefix}/{name}"
            raise StoreError(
                f"{store.uri(prefix)} is not a complete compile-cache entry (no {DONE}); run the build again"
            )
    return {name: cache.entry(name) for name in names}


def register(state: BuildState, ctx: Context) -> HubRegistration:
    """Steps 1-4 of the module docstring; returns what the manifest records."""
    from huggingface_hub import constants

    profile = state.profile
    registry = profile.hub_registry
    if registry is None or not state.hub_registry:
        raise RuntimeError("register runs only for a profile with a Hub registry and a run that names a repository")
    smoke = state.need("smoke")
    if not smoke.passed:
        raise InvalidInput(f"refusing to register {state.need('key')[:12]}: the smoke test failed; nothing written")
    toolchain = state.pinned_toolchain()
    registry.check_versions(dict(toolchain.packages))
    if constants.HF_HUB_OFFLINE:
        raise InvalidInput(
            f"--hub-registry {state.hub_registry}: HF_HUB_OFFLINE is set on this worker, and registering writes to "
            "the Hub; unset it on the workers of the profile's compile queue"
        )
    source = state.pinned_source()
    compiled = state.need("compiled")
    work = ctx.work_dir / "hub-registry" / state.need("key")[:16]
    shutil.rmtree(work, ignore_errors=True)
    (work / "checkpoint").mkdir(parents=True)
    try:
        config = read_tree_file(ctx.store, state.need("checkpoint"), "config.json")
        (work / "checkpoint" / "config.json").write_bytes(config)
        neuron_config = json.loads(read_tree_file(ctx.store, compiled.build, f"{profile.folder}/neuron_config.json"))
        entry = registry.entry(
            profile.backend,
            profile.python(),
            checkpoint_dir=work / "checkpoint",
            neuron_config=neuron_config,
            model_id=source.location,
            revision=source.resolved_revision or "",
        )
        compiler_dir = layout.compiler_dir(toolchain.compiler, toolchain.compiler_version)
        if not compiler_dir.startswith(f"neuronxcc-{registry.neuronx_cc.split('+')[0]}"):
            raise InvalidInput(f"{compiler_dir}: optimum-neuron reads registries under neuronxcc-{registry.neuronx_cc}")
        entry_path, alias_path = registry_paths(
            compiler_dir, entry.registry_folder, entry.arch_digest, entry.model_type, source.location, entry.hash
        )
        modules = _modules(state, ctx.store, toolchain, work / "modules")
        repo = CacheRepo.open(state.hub_registry, settings.current().hub_registry_conn_id, ctx.connections)
        message = f"neuronforge: {source.location} {state.target.slug} (build {state.need('key')[:12]})"
        done = commit_build(repo, compiler_dir, modules, entry_path, alias_path, entry.json, message)
        log.info(
            "registered %s in %s at %s: %d files (%d bytes) committed%s",
            state.target.slug,
            repo.repo_id,
            repo.shown_endpoint,
            done.uploaded_files,
            done.uploaded_bytes,
            f", {len(done.present_modules)} NEFF folder(s) already there" if done.present_modules else "",
        )
        try:
            found = registry.lookup(profile.backend, profile.python(), repo, source.location, entry.neuron)
        except ChildFailed as exc:  # the entry is committed: the self-test's failure is its result, not the build's
            found = {"error": str(exc).splitlines()[0]}
    finally:
        shutil.rmtree(work, ignore_errors=True)
    check = _check(found, entry.neuron, f"{entry.model_type}/{source.location}", repo.repo_id)
    if not check.found:
        log.warning("optimum-neuron's lookup does not return this build: %s", check.reason)
    else:
        log.info("optimum-neuron's lookup in %s returns this build (%d selected)", repo.repo_id, check.selected)
    return HubRegistration(
        repo_id=repo.repo_id,
        endpoint=repo.shown_endpoint,
        commit=done.commit,
        compiler_dir=compiler_dir,
        entry_path=entry_path,
        alias_path=alias_path,
        arch_digest=entry.arch_digest,
        entry_hash=entry.hash,
        modules=sorted(modules),
        uploaded_files=done.uploaded_files,
        uploaded_bytes=done.uploaded_bytes,
        versions={
            "optimum-neuron": toolchain.packages.get("optimum-neuron", ""),
            "neuronx-cc": toolchain.compiler_version,
            "transformers": toolchain.packages.get("transformers", ""),
        },
        neuron=entry.neuron,
        lookup=check,
        registered_at=_now(),
    )


def _check(found: dict, ours: dict, model: str, repo_id: str) -> LookupCheck:
    """`model`: model_type/org/name, as `get_hub_cached_models` names it."""
    model_id = model.partition("/")[2]
    entries = list(found.get("entries") or [])
    selected = list(found.get("selected") or [])
    hit = any(same_entry(e, ours) for e in selected)
    listed = model in set(found.get("models") or [])
    reason = ""
    if found.get("error"):
        reason = f"optimum-neuron's lookup of {repo_id} failed: {found['error']}"
    elif not hit:
        reason = (
            f"select_hub_cached_entries({model_id}) in {repo_id} returned {len(selected)} of {len(entries)} entries, "
            "none equal to this build's"
        )
    elif not listed:
        reason = f"get_hub_cached_models() of {repo_id} does not list {model_id} (cache lookup's model list)"
    return LookupCheck(
        found=hit,
        selected=len(selected),
        entries=len(entries),
        listed_model=listed,
        reason=reason,
        checked_at=_now(),
    )


def hit_note(state: BuildState, manifest: ArtifactManifest) -> str | None:
    """For a target already published when the run asks to register it: None when its manifest says it
    is registered in that repository, else why it is not (registration runs when a build is published,
    and a published build is never rewritten)."""
    if not state.hub_registry or state.profile.hub_registry is None:
        return None
    done = manifest.hub_registry
    if done is not None and done.repo_id == state.hub_registry:
        return None
    where = f"; it is registered in {done.repo_id}" if done is not None else ""
    return (
        f"{state.target.slug} was published before (build {manifest.cache_key[:12]}) and is not registered in "
        f"{state.hub_registry}{where}: a build is registered when it is published, and a published build is never "
        "rewritten"
    )


def run(state: BuildState, ctx: Context) -> BuildState:
    """Register the smoke-tested build when the run asks and its profile has a registry; else pass it on."""
    if not state.hub_registry or state.profile.hub_registry is None:
        return state
    if ctx.keeper is not None:
        ctx.keeper.assert_held()  # a run whose lease was taken over writes nothing
    return state.model_copy(update={"registered": register(state, ctx)})


STAGE = Stage(
    "register_hub_cache",
    run,
    "with --hub-registry: the build's NEFFs and optimum-neuron registry entry into the cache repository, "
    "then optimum's own lookup of it",
    kind="toolchain",
    reads=("source", "toolchain", "key", "compiled", "smoke"),
)
