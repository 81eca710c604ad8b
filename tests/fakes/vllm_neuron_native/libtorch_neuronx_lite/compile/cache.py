"""FAKE of the vLLM Neuron plugin's compile cache, as libtorch-neuronx-lite's `compile/cache.py` has it
from vllm-neuron 0.24 (SDK 2.32) — the in-plugin `vllm_neuron/compile/cache.py` of 0.21 before it.
Facts from shared/reference/VLLM_NEURON_NATIVE.md §1.2–1.4 (sources V6, V7, V8 there):

- `create_cache_hash`: md5 of "|".join(components)[:32] — the FX graph text, the TP replica groups,
  `dtype_shape_stride` of every input, `torch_neuronx:<v>`, `neuronxcc:<v>`, `nki:<v>`, and
  `compiler_args:` sorted `k=v` with `--target` set from NEURON_PLATFORM_TARGET_OVERRIDE.
- an entry `<root>/<key>/` is complete with graph.hlo, graph_<key>.neff, .compilation_complete and a
  `.artifact_metadata_v0.json` whose cache_key is the folder's name (else "Cache key mismatch");
  `_store_local` writes the marker LAST; a local hit touches `.cache_accessed`.
- lookup order: local; with VLLM_NEURON_DISABLE_WARMUP_COMPILE=1 a local miss raises at once (the
  remote tier is never consulted); then the remote tier (`<prefix>REMOTE_CACHE`, copied to
  `<key>.tmp.<pid>` and renamed in); then `<prefix>ASSERT_CACHE_HIT=1` raises; else compile.
- the switches' prefix: `VLLM_NEURON_` for plugin 0.21, `NEURON_LIBTORCH_` from 0.24 (`prefix()`).
The NEFF bytes are a function of the key (what the fake "compiles"), so a NEFF from another graph is
refused on load, as the runtime refuses a NEFF whose inputs do not match.
"""

import hashlib
import json
import os
import shutil
import time
from importlib import metadata
from pathlib import Path

MARKER = ".compilation_complete"
METADATA = ".artifact_metadata_v0.json"


def version(package):
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return "none"


def prefix():
    """The cache switches' names: in-plugin (0.21) or libtorch-neuronx-lite (0.24+)."""
    plugin = tuple(int(x) for x in version("vllm-neuron").split("+")[0].split(".")[:2])
    return "VLLM_NEURON_" if plugin < (0, 24) else "NEURON_LIBTORCH_"


def get_neff_filename(key):
    return f"graph_{key}.neff"


def neff_bytes(key):
    return b"NEFF " + hashlib.sha256(key.encode()).hexdigest().encode()


def resolve_target():
    """NEURON_PLATFORM_TARGET_OVERRIDE > --target in the args > the runtime's detection."""
    override = os.environ.get("NEURON_PLATFORM_TARGET_OVERRIDE")
    if override:
        return override
    if os.environ.get("VLLM_NEURON_CPU_COMPILE") == "1":
        raise RuntimeError("VLLM_NEURON_CPU_COMPILE=1 requires NEURON_PLATFORM_TARGET_OVERRIDE (trn2 or trn3)")
    return os.environ.get("FAKE_NEURON_PLATFORM", "trn2")  # what the runtime reports on this host


def create_cache_hash(graph_text, example_inputs, options, replica_groups=None):
    """`example_inputs`: (dtype, shape, stride) per input; `options`: {"compiler_args": "..."}."""
    components = [graph_text]
    if replica_groups is not None:
        components.append(f"replica_groups:{replica_groups}")
    for dtype, shape, stride in example_inputs:
        components.append(f"{dtype}_{'x'.join(map(str, shape))}_{'x'.join(map(str, stride))}")
    components += [
        f"torch_neuronx:{version('libtorch-neuronx-lite')}",
        f"neuronxcc:{version('neuronx-cc')}",
        f"nki:{version('nki')}",
    ]
    args = dict(a.split("=", 1) if "=" in a else (a, "") for a in options.get("compiler_args", "").split())
    args["--target"] = resolve_target()
    components.append("compiler_args:" + " ".join(f"{k}={v}" for k, v in sorted(args.items())))
    return hashlib.md5("|".join(components).encode()).hexdigest()[:32]


def _is_cache_complete(entry, key):
    if not all((entry / n).is_file() for n in ("graph.hlo", get_neff_filename(key), MARKER)):
        return False
    return any(entry.glob(".artifact_metadata_v*.json"))


def _check_key(entry, key):
    for meta in entry.glob(".artifact_metadata_v*.json"):
        if json.loads(meta.read_text()).get("cache_key") != key:
            raise RuntimeError(f"Cache key mismatch: {meta} does not record key {key}")
    if (entry / get_neff_filename(key)).read_bytes() != neff_bytes(key):
        raise RuntimeError(f"NRT: {entry / get_neff_filename(key)} is not the NEFF of graph {key} (load failed)")


def _store_local(entry, key, hlo, command):
    """Compile (pretend) into a fresh entry: data first, the marker last."""
    tmp = entry.with_name(f"{key}.tmp.{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    (tmp / "graph.hlo").write_text(hlo)
    (tmp / "command.txt").write_text(command + "\n")
    (tmp / "log-neuron-cc.txt").write_text("Compiler status PASS\n")
    neff = neff_bytes(key)
    (tmp / get_neff_filename(key)).write_bytes(neff)
    (tmp / METADATA).write_text(
        json.dumps(
            {
                "cache_key": key,
                "output_count": 1,
                "io_map": {},
                "unused_input_indices": [],
                "has_rng_seed_parameter": False,
            }
        )
    )
    (tmp / MARKER).write_text(f"completed:{time.time()}\nneff_size:{len(neff)}\ncompleted_by_rank:0\n")
    shutil.rmtree(entry, ignore_errors=True)
    tmp.rename(entry)


def lookup_or_compile(cache_dir, key, hlo, command):
    """What the plugin's backend does for one graph; returns "hit", "remote" or "compiled"."""
    print(f"INFO [vllm_neuron.compile.backend] Compilation cache key: {key}", flush=True)
    entry = cache_dir / key
    if _is_cache_complete(entry, key):
        _check_key(entry, key)
        (entry / ".cache_accessed").touch()
        return "hit"
    if os.environ.get("VLLM_NEURON_DISABLE_WARMUP_COMPILE") == "1":
        raise RuntimeError(
            f"VLLM_NEURON_DISABLE_WARMUP_COMPILE=1: local compile cache miss for key {key} in {cache_dir}"
        )
    p = prefix()
    remote = os.environ.get(f"{p}REMOTE_CACHE")
    if remote and _is_cache_complete(Path(remote) / key, key):
        tmp = cache_dir / f"{key}.tmp.{os.getpid()}"
        shutil.copytree(Path(remote) / key, tmp)
        tmp.rename(entry)
        _check_key(entry, key)
        return "remote"
    if os.environ.get(f"{p}ASSERT_CACHE_HIT") == "1":
        raise RuntimeError(f"{p}ASSERT_CACHE_HIT=1: compile cache miss for key {key} (local and remote)")
    print(f"INFO [vllm_neuron.compile.backend] Compiling graph {key} with neuronx-cc", flush=True)
    _store_local(entry, key, hlo, command)
    return "compiled"
