"""Stage `publish`, and the index lookup that lets a request skip everything when already published.

Under `artifacts/<org>/<name>/<revision>/<target-slug>/<key12>/`:
- `optimum/`: the compiled model as its loader reads it — optimum-neuron's export output as is
  (`config.json`, `neuron_config.json`, `model.pt`, `checkpoint/weights/`, tokenizer), NxD
  Inference's compile output (its own `neuron_config.json`, `model.pt`, `weights/`) plus the HF
  config and tokenizer, or for the cpu backend the same skeleton holding its own graphs;
- `lmi/` + `split/model/` (Neuron backends): `serving.properties`/`lmi.env` for LMI containers;
- `tnx/` (Neuron backends, on request): the older Optimum layout LMI's transformers-neuronx loader
  detects — `config.json` with a `"neuron"` block, `checkpoint/`, `compiled/<graph hash>.neff`;
- `smoke.json`: the smoke-test result;
- `manifest.json`, written LAST: cache key, request, revision, toolchain, flags, every file with
  size and sha256, the smoke result, timestamps, neuronforge version.
Then `index/<key>.json` is created with `put_if_absent`. Readers trust only a complete manifest:
`lookup` follows the index to the manifest and checks that every file it lists exists.
"""

from __future__ import annotations

import json
import logging
import shutil
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import neuronforge
from neuronforge import layout
from neuronforge.errors import InvalidInput, StoreError
from neuronforge.request import CompileRequest, Toolchain, cache_key_material
from neuronforge.source import FileEntry, list_relative, sha256_file
from neuronforge.stores import ArtifactStore, NotFound

log = logging.getLogger(__name__)
MANIFEST_SCHEMA = 1
INDEX_SCHEMA = 1
FORMATS = ("optimum", "lmi", "tnx")
NEURON_ONLY_FORMATS = ("lmi", "tnx")


@dataclass
class PublishInput:
    request: CompileRequest
    toolchain: Toolchain
    key: str
    build_dir: Path
    smoke: dict[str, Any]
    compile: dict[str, Any]
    work_dir: Path
    formats: tuple[str, ...] = ("optimum",)
    checkpoint_dir: Path | None = None  # the split model LMI loads (Neuron backends)


@dataclass
class Published:
    key: str
    prefix: str
    manifest_uri: str
    uris: dict[str, str] = field(default_factory=dict)  # format -> URI
    manifest: dict[str, Any] = field(default_factory=dict)


def check_formats(formats: tuple[str, ...] | list[str]) -> None:
    """Refuse unknown publish formats (called before any work, and again at publish time)."""
    unknown = set(formats) - set(FORMATS)
    if unknown:
        raise InvalidInput(f"unknown publish format(s) {sorted(unknown)}; use {list(FORMATS)}")


def neuron_config(request: CompileRequest, toolchain: Toolchain) -> dict[str, Any]:
    """The cpu backend's `neuron_config.json`: the fields optimum-neuron writes, filled from the
    target. (The Neuron backends' own loaders write and read theirs; it is published untouched.)"""
    t = request.target.normalized()
    return {
        "_serialized_key": "NeuronforgeCpuConfig",
        "optimum_neuron_version": toolchain.packages.get("optimum-neuron"),
        "neuronxcc_version": toolchain.compiler_version if toolchain.compiler == "neuronxcc" else None,
        "compiler": toolchain.compiler,
        "compiler_version": toolchain.compiler_version,
        "target": t.instance.compile_target,
        "instance_type": t.instance_type,
        "batch_size": t.batch_size,
        "sequence_length": t.sequence_length,
        "max_context_length": t.max_context_length,
        "tp_degree": t.tp_degree,
        "logical_nc_config": t.logical_nc_config,
        "torch_dtype": t.dtype,
        "quantized": t.quantization.enabled,
        "quantization_dtype": t.quantization.dtype if t.quantization.enabled else None,
        "quantization_type": t.quantization.method,
        "checkpoint_id": request.source.location,
        "checkpoint_revision": request.source.resolved_revision,
    }


def _not_ours(root: Path):
    """copytree filter: leave out the top-level bookkeeping of a materialized folder (its store
    manifest and the local cache's marker), which describe the folder, not the artifact."""
    from neuronforge.localcache import MARKER

    def ignore(folder: str, names: list[str]) -> set[str]:
        return {n for n in names if n in (layout.MANIFEST, MARKER)} if Path(folder) == root else set()

    return ignore


def _stage(inp: PublishInput, store: ArtifactStore, prefix: str) -> Path:
    check_formats(inp.formats)
    stage = inp.work_dir / "publish" / inp.key[:12]
    shutil.rmtree(stage, ignore_errors=True)
    cpu = inp.request.target.backend == "cpu"
    if "optimum" in inp.formats:
        shutil.copytree(inp.build_dir, stage / "optimum", ignore=_not_ours(inp.build_dir))
        if cpu:
            (stage / "optimum" / "neuron_config.json").write_text(
                json.dumps(neuron_config(inp.request, inp.toolchain), indent=2) + "\n"
            )
    for skipped in (f for f in NEURON_ONLY_FORMATS if f in inp.formats and cpu):
        log.info("%s layout skipped: it is served by Neuron containers only", skipped)
    if "tnx" in inp.formats and not cpu:
        _stage_tnx(inp, store, stage / "tnx")
    if "lmi" in inp.formats and not cpu:
        from neuronforge.formats.lmi import render_env, render_properties, serving_options

        if inp.checkpoint_dir is None:
            raise InvalidInput("the lmi format needs the checkpoint (split model) to publish")
        split = stage / "split" / "model"
        shutil.copytree(inp.checkpoint_dir, split, ignore=_not_ours(inp.checkpoint_dir))
        neff_cache = store.uri(layout.neuron_cache_prefix(inp.toolchain.compiler, inp.toolchain.compiler_version))
        options = serving_options(inp.request.target, store.uri(f"{prefix}/split/model"), neff_cache)
        (stage / "lmi").mkdir()
        (stage / "lmi" / "serving.properties").write_text(render_properties(options))
        (stage / "lmi" / "lmi.env").write_text(render_env(options))
    (stage / "smoke.json").parent.mkdir(parents=True, exist_ok=True)
    (stage / "smoke.json").write_text(json.dumps(inp.smoke, indent=2) + "\n")
    return stage


def tnx_neuron_block(request: CompileRequest, toolchain: Toolchain) -> dict[str, Any]:
    """The `"neuron"` block of an optimum-neuron <= 0.0.28 `config.json` (transformers-neuronx era)."""
    t = request.target.normalized()
    return {
        "task": "text-generation",
        "batch_size": t.batch_size,
        "num_cores": t.tp_degree,
        "auto_cast_type": t.dtype,
        "sequence_length": t.sequence_length,
        "compiler_type": "neuronx-cc",
        "compiler_version": toolchain.compiler_version,
        "checkpoint_id": request.source.location,
        "checkpoint_revision": request.source.resolved_revision,
    }


def _stage_tnx(inp: PublishInput, store: ArtifactStore, out: Path) -> None:
    """`config.json` with the `"neuron"` block and no root weights (so the TNX loader treats the
    folder as compiled), the checkpoint under `checkpoint/`, and every NEFF the compile used under
    `compiled/<graph hash>.neff`, taken from the compile cache (local, else the store's copy)."""
    from neuronforge.backends.cpu import TOKENIZER_FILES
    from neuronforge.stages.compile import compile_cache

    if inp.checkpoint_dir is None:
        raise InvalidInput("the tnx format needs the checkpoint to publish")
    graphs = [g["entry"] for g in inp.compile.get("graphs", [])]
    if not graphs:
        raise InvalidInput("the tnx format needs the compiled graphs (no cache entry recorded by the compile)")
    config = json.loads((inp.checkpoint_dir / "config.json").read_text())
    config["neuron"] = tnx_neuron_block(inp.request, inp.toolchain)
    (out / "compiled").mkdir(parents=True)
    (out / "config.json").write_text(json.dumps(config, indent=2) + "\n")
    shutil.copytree(
        inp.checkpoint_dir,
        out / "checkpoint",
        ignore=shutil.ignore_patterns(layout.MANIFEST, *TOKENIZER_FILES),
    )
    for name in TOKENIZER_FILES:
        if (inp.checkpoint_dir / name).exists():
            shutil.copyfile(inp.checkpoint_dir / name, out / name)
    cache = compile_cache(inp.work_dir, inp.toolchain, store)
    for entry in graphs:
        path = cache.lookup(entry)
        if path is None or not (path / "model.neff").exists():
            raise StoreError(f"tnx format: compile-cache entry {entry} is neither local nor in the store")
        graph_hash = entry.removeprefix("MODULE_").split("+", 1)[0]
        shutil.copyfile(path / "model.neff", out / "compiled" / f"{graph_hash}.neff")


def publish(inp: PublishInput, store: ArtifactStore) -> Published:
    if not inp.smoke.get("passed"):
        raise InvalidInput(f"refusing to publish {inp.key[:12]}: the smoke test failed ({inp.smoke.get('reason')})")
    prefix = layout.artifact_prefix(inp.request.source, inp.request.target, inp.key)
    stage = _stage(inp, store, prefix)
    files = _file_list(stage)
    store.put_tree(stage, prefix)
    uris = {f: store.uri(f"{prefix}/{f}") for f in inp.formats if (stage / f).is_dir()}
    manifest = {
        "schema_version": MANIFEST_SCHEMA,
        "cache_key": inp.key,
        "request": cache_key_material(inp.request, inp.toolchain),
        "source": {
            "kind": inp.request.source.kind,
            "location": inp.request.source.location,
            "revision": inp.request.source.resolved_revision,
        },
        "target_slug": inp.request.target.slug,
        "toolchain": inp.toolchain.to_json(),
        "compiler_flags": list(inp.toolchain.compiler_flags),
        "files": files,
        "formats": uris,
        "smoke": inp.smoke,
        "compile": inp.compile,
        "neuronforge_version": neuronforge.__version__,
        "published_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    manifest_key = f"{prefix}/{layout.ARTIFACT_MANIFEST}"
    store.write_json(manifest_key, manifest)  # last: from here on the artifact exists
    index = {"schema_version": INDEX_SCHEMA, "cache_key": inp.key, "manifest": manifest_key, "prefix": prefix}
    if not store.put_if_absent(json.dumps(index, indent=2).encode(), layout.index_entry(inp.key)):
        log.info("index/%s already present (published by an earlier or concurrent run)", inp.key[:12])
    shutil.rmtree(stage, ignore_errors=True)
    return Published(inp.key, prefix, store.uri(manifest_key), uris, manifest)


def _file_list(folder: Path) -> list[dict[str, Any]]:
    """Every file of the staged artifact with size and sha256, for the manifest."""
    return [
        FileEntry(rel, (folder / rel).stat().st_size, sha256_file(folder / rel)).to_json()
        for rel in list_relative(folder)
    ]


def lookup(store: ArtifactStore, key: str) -> Published | None:
    """The published artifact for `key`, if its index entry points at a complete manifest."""
    try:
        index = store.read_json(layout.index_entry(key))
        manifest = store.read_json(index["manifest"])
    except (NotFound, KeyError, StoreError):
        return None
    if manifest.get("cache_key") != key:
        return None
    missing = _missing_files(store, index["prefix"], manifest.get("files", []))
    if missing:
        log.warning("index/%s points at an incomplete artifact (%s missing); ignoring it", key[:12], missing[0])
        return None
    return Published(key, index["prefix"], store.uri(index["manifest"]), manifest.get("formats", {}), manifest)


def published_manifests(store: ArtifactStore) -> Iterator[tuple[str, dict[str, Any], dict[str, Any]]]:
    """(index key, index entry, manifest) of every index entry whose manifest is readable; an entry
    whose manifest is gone or unreadable publishes nothing and is skipped."""
    for obj in store.list("index"):
        try:
            index = store.read_json(obj.key)
            manifest = store.read_json(index["manifest"])
        except (StoreError, KeyError, TypeError):
            continue
        yield obj.key, index, manifest


def verify_manifest(store: ArtifactStore, manifest_key: str, download_to: Path | None = None) -> list[str]:
    """Problems with a published artifact: files missing, sizes or (when downloaded) sha256 wrong."""
    manifest = store.read_json(manifest_key)
    prefix = manifest_key.rsplit("/", 1)[0]
    missing = _missing_files(store, prefix, manifest["files"])
    problems = [f"{path}: missing or wrong size" for path in missing]
    if download_to is not None:
        for f in manifest["files"]:
            if f["path"] in missing:
                continue
            store.get_file(f"{prefix}/{f['path']}", download_to / f["path"])
            if sha256_file(download_to / f["path"]) != f["sha256"]:
                problems.append(f"{f['path']}: sha256 mismatch")
    return problems


def _missing_files(store: ArtifactStore, prefix: str, files: list[dict[str, Any]]) -> list[str]:
    """Manifest entries absent from the store under `prefix`, or present with another size."""
    present = {o.key: o.size for o in store.list(prefix)}
    return [f["path"] for f in files if present.get(f"{prefix}/{f['path']}") != f["size"]]
