"""The `vllm-native` backend: the vLLM Neuron plugin (SDK 2.32+) compiles through torch.compile into
its own cache, not through NxD Inference or the Neuron persistent cache.

Compile (a CPU worker of the SDK's image): the toolchain side builds `vllm.LLM` from the exact
`vllm serve` arguments the launch files will use, in the plugin's CPU-compile mode
(`VLLM_NEURON_CPU_COMPILE=1` with `NEURON_PLATFORM_TARGET_OVERRIDE`), into a cache root of this
host; the plugin logs `Compilation cache key: <key>` for every graph it compiles or finds
(vllm_neuron/compile/backend.py). Each of those entries must be complete (`neuronforge.compilation.vllm_cache`);
they go to the store under `vllm-neuron-cache/<sdk>/<key>/` (marker last), and the build holds the
checkpoint vLLM loads plus the cache manifest (`vllm-cache.json`: versions, argv, env, entries with
sha256).

Load (the smoke test, a Neuron host): a fresh cache root gets exactly the manifest's entries from the
store, verified, and the toolchain side builds `vllm.LLM` with the launch files' command and
environment, compiling forbidden; any entry the load adds is a graph a server would compile.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from neuronforge.common.errors import InvalidInput
from neuronforge.compilation.backends.base import Backend, CompileJob, CompileResult, GenerateJob, Generation
from neuronforge.compilation.backends.child import copy_served_files, generation_rows
from neuronforge.compilation.retrace import Retrace
from neuronforge.spec.modelconfig import ARCHITECTURES as MODEL_TYPES
from neuronforge.spec.modelconfig import GPT_FAMILIES

if TYPE_CHECKING:
    from neuronforge.stores import ArtifactStore

CACHE_MANIFEST = "vllm-cache.json"
# The model types neuronforge can hand to the plugin: the decoder configs it plans (spec/modelconfig.py,
# the Llama layout). Which of them a plugin release loads is its model registry's answer, per release
# (`neuronforge.profiles.vllm_native.Release.architectures`).
ARCHITECTURES = frozenset(MODEL_TYPES) - GPT_FAMILIES
# What the plugin logs for each graph (vllm_neuron/compile/backend.py: "Compilation cache key: %s").
KEY_LINE = re.compile(r"Compilation cache key: ([0-9a-f]{32})")
# What its `compile()` raises on a miss with compiling forbidden (VLLM_NEURON_DISABLE_WARMUP_COMPILE or
# <prefix>ASSERT_CACHE_HIT: "... compile cache miss for key <key>").
MISS_LINE = re.compile(r"cache miss for key ([0-9a-f]{32})")
WEIGHT_FILES = ("*.safetensors", "model.safetensors.index.json", "generation_config.json")


class VllmNativeBackend(Backend):
    name = "vllm-native"
    library = "vllm-neuron"
    packages = ("vllm", "vllm-neuron", "libtorch-neuronx-lite", "nki", "neuronx-cc")
    architectures = ARCHITECTURES
    modeling_modules: ClassVar[dict[str, str]] = {}
    toolchain_module = "vllm_native"

    def compile(self, job: CompileJob) -> CompileResult:
        from neuronforge.artifacts import layout
        from neuronforge.compilation.vllm_cache import (
            CacheManifest,
            compile_cache_dir,
            entry_problems,
            entry_record,
            upload_entry,
            upload_nki,
        )
        from neuronforge.records.local import write_local

        settings = job.settings
        # Kept on this host: a later compile of the same graphs finds them. One root per SDK release: its
        # nki/ results (uploaded whole, beside the entries) are that release's only.
        root = job.work_dir / "vllm-cache" / settings["profile_version"]
        cache_dir = compile_cache_dir(root)
        before = {p.name for p in cache_dir.iterdir()} if cache_dir.is_dir() else set()
        env = {
            **settings["env"],
            "VLLM_CACHE_ROOT": str(root),
            "NEURON_LIBTORCH_CACHE_ROOT": str(root),  # LNL's own root: the same folder, whatever the worker set
            "VLLM_NEURON_CPU_COMPILE": "1",
            f"{settings['cache_env']}PARALLEL_COMPILE_WORKERS": "1",
        }
        # The stray-environment rule, as for every Neuron backend: NEURON_CC_FLAGS or an XLA_* switch
        # on the worker would change every key without the manifest or vllm.env saying so.
        env = self.compile_env(job, env)
        spec = {"model": str(job.checkpoint_dir), "argv": settings["argv"]}
        job.out.mkdir(parents=True, exist_ok=True)
        found, lines = self.run(
            job.python, "compile", spec, env=env, timeout_s=job.timeout_s, what=f"vllm-neuron compile {job.target.slug}"
        )
        keys = sorted(_logged(lines))
        if not keys:
            raise InvalidInput("the vLLM Neuron compile logged no `Compilation cache key` line: nothing to publish")
        broken = [p for key in keys for p in entry_problems(cache_dir / key)]
        if broken:
            raise InvalidInput(f"the vLLM Neuron compile left incomplete cache entries: {'; '.join(broken)}")
        store: ArtifactStore | None = job.cache.store
        prefix = layout.vllm_cache_prefix(settings["profile_version"])
        uploaded = []
        if store is not None:
            uploaded = [k for k in keys if upload_entry(store, prefix, cache_dir / k)]
            nki = upload_nki(store, prefix, cache_dir)
        else:
            nki = []
        copy_served_files(job.checkpoint_dir, job.out)
        for pattern in WEIGHT_FILES:
            for path in job.checkpoint_dir.glob(pattern):
                shutil.copyfile(path, job.out / path.name)
        versions = dict(found.get("versions") or {})  # what the interpreter that compiled has
        manifest = CacheManifest(
            profile=settings["profile"],
            store_prefix=store.uri(prefix) if store is not None else prefix,
            versions=versions,
            argv=list(settings["argv"]),
            env=dict(settings["env"]),  # holds every graph-shaping variable the compile ran with (job.graph_env)
            target=settings["env"]["NEURON_PLATFORM_TARGET_OVERRIDE"],
            route=settings["route"],
            image=settings["image"],
            entries=[entry_record(cache_dir / k) for k in keys],
            nki=nki,
            built={"mode": "cpu-compile", "uploaded": uploaded},
        )
        write_local(manifest, job.out / CACHE_MANIFEST)
        graphs = [{"name": k, "entry": k, "cached": k in before, "seconds": None} for k in keys]
        return CompileResult(graphs, sum(1 for k in keys if k not in before))

    def on_published_cache(
        self,
        python: Any,
        action: str,
        spec: dict[str, Any],
        env: dict[str, str],
        *,
        manifest: Any,
        store: ArtifactStore,
        prefix: str,
        root: Path,
        timeout_s: float,
        what: str,
    ) -> tuple[dict[str, Any], list[str], list[str]]:
        """Run a toolchain action on a fresh cache root holding exactly the manifest's entries,
        pulled from `prefix` of `store` and checked against it (`SyncFailed` otherwise); returns its
        result, its output lines and the keys the action added (graphs a server would have compiled).
        The caller's `env` says how: fail-closed for the smoke load, CPU-compile mode too for the re-trace."""
        from neuronforge.compilation.vllm_cache import compile_cache_dir, local_keys, pull

        shutil.rmtree(root, ignore_errors=True)
        cache_dir = compile_cache_dir(root)
        pull(store, prefix, manifest, cache_dir)
        before = local_keys(cache_dir)
        try:
            roots = {"VLLM_CACHE_ROOT": str(root), "NEURON_LIBTORCH_CACHE_ROOT": str(root)}
            result, lines = self.run(python, action, spec, env={**env, **roots}, timeout_s=timeout_s, what=what)
            return result, lines, sorted(local_keys(cache_dir) - before)
        finally:
            shutil.rmtree(root, ignore_errors=True)

    def generate(self, job: GenerateJob) -> Generation:
        from neuronforge.compilation.vllm_cache import CacheManifest, SyncFailed
        from neuronforge.records.local import read_local

        settings = job.settings
        store = job.cache.store
        if store is None:
            raise InvalidInput("the vLLM Neuron smoke test syncs its cache from the store; none was given")
        spec = {
            "model": str(job.model_dir),
            "argv": settings["argv"],
            "prompt_ids": job.prompt_ids,
            "max_new_tokens": job.max_new_tokens,
            "measure": job.measure,
        }
        try:
            result, _, compiled = self.on_published_cache(
                job.python,
                "generate",
                spec,
                dict(settings["env"]),
                manifest=read_local(CacheManifest, Path(settings["manifest"])),
                store=store,
                prefix=settings["prefix"],
                root=job.cache.root / "vllm",
                timeout_s=job.timeout_s,
                what="vllm-neuron smoke load",
            )
        except SyncFailed as exc:
            raise InvalidInput(f"the published cache does not match its manifest: {exc}") from None
        return {**generation_rows(result), "compiled": compiled}

    def retrace(
        self, model_dir: Path, settings: dict[str, Any], python: Any, work_dir: Path, timeout_s: float
    ) -> Retrace:
        """Preflight P1, in the serving image's interpreter on a CPU worker: sync the manifest's entries
        into a fresh cache, then trace the serving command again in CPU-compile mode with compiling
        forbidden (aws-neuron-sdk vllm-neuron/docs/design/compilation/cpu_compilation.md: the plugin
        normalises `meta` to `neuron:0` and sizes KV from the static table in this mode, so CPU and
        device keys agree). The plugin logs `Compilation cache key: <key>` for each graph before it looks
        it up, and with VLLM_NEURON_DISABLE_WARMUP_COMPILE=1 its `compile()` raises on the first local
        miss ("local compile cache miss for key <key>": vllm_neuron/compile/backend.py), so the trace
        stops there: the keys logged before it were found, that one is missing, later graphs untraced."""
        from neuronforge.common.errors import StoreError
        from neuronforge.compilation.backends.child import ChildFailed
        from neuronforge.compilation.vllm_cache import CacheManifest, SyncFailed
        from neuronforge.records.local import read_local
        from neuronforge.stores import open_location

        manifest = read_local(CacheManifest, Path(settings["manifest"]))
        published = {e.key for e in manifest.entries}
        env = {
            **settings["env"],
            "VLLM_NEURON_CPU_COMPILE": "1",
            "VLLM_NEURON_DISABLE_WARMUP_COMPILE": "1",
            f"{settings.get('cache_env', 'NEURON_LIBTORCH_')}DISABLE_GRAPH_CAPTURE_BACKEND": "1",
        }
        try:
            _, lines, new = self.on_published_cache(
                python,
                "compile",
                {"model": str(model_dir), "argv": settings["argv"]},
                env,
                manifest=manifest,
                store=open_location(manifest.store_prefix),
                prefix="",
                root=work_dir / "vllm-retrace",
                timeout_s=timeout_s,
                what="vllm-neuron re-trace",
            )
        except (SyncFailed, StoreError) as exc:
            return Retrace(published=len(published), problem=f"re-trace: the published cache cannot be synced: {exc}")
        except ChildFailed as exc:
            said = str(exc).splitlines()
            miss = next((line for line in said if MISS_LINE.search(line)), None)
            if miss is None:
                why = next((line for line in said if "miss" in line), said[0]).strip()
                problem = f"re-trace of the serving command in CPU-compile mode, compiling forbidden, failed: {why}"
                return Retrace(published=len(published), problem=problem)
            first = MISS_LINE.search(miss).group(1)  # type: ignore[union-attr]
            found = tuple(k for k in _logged(exc.output) if k != first and k in published)
            return Retrace(found, (first,), stopped=True, published=len(published), said=miss.strip())
        found = tuple(k for k in _logged(lines) if k in published)
        return Retrace(found, tuple(new), published=len(published))


def _logged(lines: list[str]) -> list[str]:
    """The keys the plugin logged, in order, each once."""
    return list(dict.fromkeys(m for line in lines for m in KEY_LINE.findall(line)))


BACKEND = VllmNativeBackend()
