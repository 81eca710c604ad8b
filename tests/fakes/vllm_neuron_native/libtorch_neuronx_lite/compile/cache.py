"""FAKE of the vLLM Neuron plugin's compile cache, as libtorch-neuronx-lite's `compile/cache.py` has it
from vllm-neuron 0.24 (SDK 2.32) — the in-plugin `vllm_neuron/compile/cache.py` and `backend.py`
`compile()` of 0.21 before it. LNL's own source is not public: each rule below is the 0.21 code's
(CODE: Infinity-AI-Institute/vllm-neuron@7f4cca75 vllm_neuron/compile/cache.py, longdct/vllm-neuron@2124255a
vllm_neuron/compile/backend.py, AWShtokoyo/vllm-neuron@eabd4c9f vllm_neuron/envs.py — forks of
vllm-project/vllm-neuron), with the names LNL uses from 0.24 (DOCS: aws-neuron/aws-neuron-sdk@81ce03ae
vllm-neuron/docs/design/compilation/{compilation_cache,cpu_compilation}.md).

- `create_cache_hash`: md5 of "|".join(components)[:32] — the FX graph text, the TP replica groups,
  `dtype_shape_stride` of every input, `torch_neuronx:<v>` (libtorch-neuronx-lite's version, or with
  FAKE_LNL_VERSION_HASHED=0 torch-neuronx's: which one LNL hashes is UNVERIFIED, `torch_neuronx_version`),
  `neuronxcc:<v>`, `nki:<v>`, and
  `compiler_args:` sorted `k=v` of `_normalize_compiler_args`: `--k=v` split at the first `=`, `-k v`
  a pair when the next word does not start with `-`, any other word a standalone flag mapped to
  "True"; `--target` always set by `resolve_target(args)`: NEURON_PLATFORM_TARGET_OVERRIDE > `--target`
  in the args > the runtime's detection.
- an entry `<root>/<key>/` is complete with graph.hlo, graph_<key>.neff, .compilation_complete and a
  `.artifact_metadata_v0.json` whose cache_key is the folder's name (else "Cache key mismatch");
  `_store_local` writes the marker LAST; a local hit touches `.cache_accessed`.
- `compile()`: DISABLE_COMPILE_CACHE with VLLM_NEURON_DISABLE_WARMUP_COMPILE or ASSERT_CACHE_HIT is a
  ValueError (0.21's text, prefix per release: LNL's own text is UNVERIFIED); local lookup (no lock);
  with VLLM_NEURON_DISABLE_WARMUP_COMPILE=1 a local miss raises at once (the remote tier is never read);
  with ASSERT_CACHE_HIT=1 and no remote tier it raises; else `fetch_remote_or_compile` under the
  per-key lock `<root>/.<key>.compilation_metadata(.lock)` (filelock beside the entries, holder's pid,
  name and command line in the metadata file; a waiter polls for the entry every second and raises
  when the holder died): the remote tier (`<prefix>REMOTE_CACHE`, copied to `<key>.tmp.<pid>` without
  the host's lock/metadata/.cache_accessed files, then renamed in), then ASSERT_CACHE_HIT raises, then
  compile. `precompile` is the graph-capture backend's path: the same lock and remote tier, but not
  the backend's VLLM_NEURON_DISABLE_WARMUP_COMPILE check — why the docs pair that switch with
  `<prefix>DISABLE_GRAPH_CAPTURE_BACKEND=1` "to guarantee that no compilation occurs" (cpu_compilation.md
  l.79-92; the capture backend's code is not public: this is the docs' account, modelled).
- a graph that calls an NKI kernel leaves its NKI compile result in `<root>/nki/<nki key>.json` (LNL's
  `nki/nki_cache.py` `_NKI_CACHE_SUBDIR`, SDK 2.32: foxl-ai/kiln@a04d1fab kiln/compile_cache.py), with
  its per-key lock `nki/<nki key>.lock`; the kernel binaries it points at (outside the cache, under
  /var/tmp/nki-intermediate-cache) are not reproduced.
- the switches' prefix: `VLLM_NEURON_` for plugin 0.21, `NEURON_LIBTORCH_` from 0.24 (`prefix()`);
  VLLM_NEURON_DISABLE_WARMUP_COMPILE keeps its name (compilation_cache.md l.153).
The NEFF bytes are a function of the key (what the fake "compiles"), so a NEFF from another graph is
refused on load, as the runtime refuses a NEFF whose inputs do not match.
"""

import fcntl
import hashlib
import json
import os
import shlex
import shutil
import sys
import time
from importlib import metadata
from pathlib import Path

MARKER = ".compilation_complete"
METADATA = ".artifact_metadata_v0.json"
LOCK_METADATA = ".compilation_metadata"  # `.<key>.compilation_metadata` in the cache root
LOCK_SUFFIX = ".lock"
HOST_FILES = (LOCK_METADATA, LOCK_METADATA + LOCK_SUFFIX, ".cache_accessed")  # never copied between tiers
NKI_DIR = "nki"
POLL_S = 1.0  # a waiter's poll for the lock holder's entry


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


def _parse_compiler_args(raw):
    """backend.py: a str is shlex-split, a list copied, None or empty is no args."""
    if raw is None or raw == "":
        return []
    if isinstance(raw, str):
        return shlex.split(raw)
    if isinstance(raw, (list, tuple)):
        return list(raw)
    raise TypeError(f"compiler_args must be a str, list, or None, got {type(raw).__name__}")


def resolve_target(compiler_args=()):
    """NEURON_PLATFORM_TARGET_OVERRIDE > --target in the args > the runtime's detection."""
    override = os.environ.get("NEURON_PLATFORM_TARGET_OVERRIDE")
    if override:
        return override
    args = list(compiler_args)
    for i, arg in enumerate(args):
        if arg.startswith("--target="):
            return arg.split("=", 1)[1]
        if arg == "--target" and i + 1 < len(args):
            return args[i + 1]
    if os.environ.get("VLLM_NEURON_CPU_COMPILE") == "1":
        raise RuntimeError("VLLM_NEURON_CPU_COMPILE=1 requires NEURON_PLATFORM_TARGET_OVERRIDE (trn2 or trn3)")
    return os.environ.get("FAKE_NEURON_PLATFORM", "trn2")  # what the runtime reports on this host


def _normalize_compiler_args(compiler_args):
    """The args as one dict: `--k=v` split at the first `=`, `-k v` a pair when the next word does not
    start with `-`, any other word a standalone flag ("True"); the last of a repeated key wins;
    `--target` resolved whatever the args say."""
    out, i = {}, 0
    while i < len(compiler_args):
        arg = compiler_args[i]
        if arg.startswith("--") and "=" in arg:
            key, value = arg.split("=", 1)
            out[key] = value
        elif arg.startswith("-") and i + 1 < len(compiler_args) and not compiler_args[i + 1].startswith("-"):
            out[arg] = compiler_args[i + 1]
            i += 1
        else:
            out[arg] = "True"
        i += 1
    out["--target"] = resolve_target(compiler_args)
    return out


def create_cache_hash(graph_text, example_inputs, options, replica_groups=None):
    """`example_inputs`: (dtype, shape, stride) per input; `options`: {"compiler_args": str | list}."""
    components = [graph_text]
    if replica_groups is not None:
        components.append(f"replica_groups:{replica_groups}")
    for dtype, shape, stride in example_inputs:
        components.append(f"{dtype}_{'x'.join(map(str, shape))}_{'x'.join(map(str, stride))}")
    components += [
        f"torch_neuronx:{torch_neuronx_version()}",
        f"neuronxcc:{version('neuronx-cc')}",
        f"nki:{version('nki')}",
    ]
    canonical = _normalize_compiler_args(_parse_compiler_args(options.get("compiler_args")))
    components.append("compiler_args:" + " ".join(f"{k}={v}" for k, v in sorted(canonical.items())))
    return hashlib.md5("|".join(components).encode()).hexdigest()[:32]


# Which version `torch_neuronx:<v>` hashes is UNVERIFIED: LNL's source is not public; the 0.21 code
# hashed `torch_neuronx.__version__` (its `get_torch_neuronx_version`), and LNL replaced torch-neuronx.
# By default the fake hashes libtorch-neuronx-lite's own version, the reading in which a release that
# rebuilds LNL (SDK 2.33.1) misses every published key; FAKE_LNL_VERSION_HASHED=0 is the other reading:
# torch-neuronx's version (which 2.33.1 did not change).
LNL_HASHED = "FAKE_LNL_VERSION_HASHED"


def torch_neuronx_version():
    """The version the key's `torch_neuronx:` component names, by the reading `LNL_HASHED` selects."""
    if os.environ.get(LNL_HASHED, "1") == "0":
        return version("torch-neuronx")
    return version("libtorch-neuronx-lite")


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


def nki_key(kernel):
    """The NKI cache key of one kernel call: its name and operand shapes and the versions (the fork's
    `create_nki_cache_key` hashes these among others; 32 hex)."""
    text = f"{kernel}|nki:{version('nki')}|neuronxcc:{version('neuronx-cc')}|{resolve_target()}"
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def _store_nki(cache_dir, kernel):
    """The NKI compile result of `kernel` (written atomically, under its per-key lock)."""
    folder = cache_dir / NKI_DIR
    folder.mkdir(parents=True, exist_ok=True)
    key = nki_key(kernel)
    path = folder / f"{key}.json"
    with open(folder / f"{key}{LOCK_SUFFIX}", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not path.exists():
            tmp = folder / f"{key}.json.tmp.{os.getpid()}"
            tmp.write_text(
                json.dumps(
                    {
                        "schema_version": 1,
                        "kernel": kernel,
                        "dumped_config": hashlib.sha256(kernel.encode()).hexdigest(),
                        "return_types": [],
                        "operand_output_aliases": {},
                    },
                    sort_keys=True,
                )
            )
            os.replace(tmp, path)
    return key


def _store_local(entry, key, hlo, command):
    """Compile (pretend) into a fresh entry: data first, the marker last; an NKI call in the graph
    leaves its NKI result beside the entries."""
    for line in hlo.splitlines():
        if line.startswith("nki_call "):
            _store_nki(entry.parent, line.removeprefix("nki_call ").strip())
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


def _holder_alive(meta_path):
    try:
        fields = dict(line.split(":", 1) for line in meta_path.read_text().splitlines() if ":" in line)
        os.kill(int(fields["pid"]), 0)
    except (OSError, KeyError, ValueError):
        return False
    return True


class CompilationLock:
    """The per-key lock around the remote fetch and the compile: `.<key>.compilation_metadata.lock` (a
    file lock) and `.<key>.compilation_metadata` (who holds it) in the cache root. Entered: True when
    this process holds it, False when another live process does (the caller waits for its entry); a
    holder that died leaves both files, which the next taker deletes."""

    def __init__(self, key, cache_dir):
        self.key, self.cache_dir = key, cache_dir
        self.meta = cache_dir / f".{key}{LOCK_METADATA}"
        self.path = cache_dir / f".{key}{LOCK_METADATA}{LOCK_SUFFIX}"
        self.fd = None

    def __enter__(self):
        self.cache_dir.mkdir(parents=True, exist_ok=True)
        if self.meta.exists() and not _holder_alive(self.meta):  # _del_stale_lock
            self.meta.unlink(missing_ok=True)
            self.path.unlink(missing_ok=True)
        self.fd = open(self.path, "a")
        try:
            fcntl.flock(self.fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            self.fd.close()
            self.fd = None
            return False
        self.meta.write_text(
            f"pid:{os.getpid()}\nprocess_name:{Path(sys.argv[0]).name or 'python'}\ncmdline:{sys.argv}\n"
            f"timestamp:{time.time()}\n"
        )
        return True

    def __exit__(self, *exc):
        if self.fd is not None:
            self.meta.unlink(missing_ok=True)
            fcntl.flock(self.fd, fcntl.LOCK_UN)
            self.fd.close()  # filelock leaves the lock file itself on Unix
        return False

    def wait(self, entry):
        """Another process holds the lock: its entry, once complete; raise if it died first."""
        while not _is_cache_complete(entry, self.key):
            if not self.meta.exists() or not _holder_alive(self.meta):
                self.meta.unlink(missing_ok=True)
                self.path.unlink(missing_ok=True)
                raise RuntimeError("Lock holder process died - cache invalidated, please retry compilation")
            time.sleep(POLL_S)


def _switch(name):
    return os.environ.get(name) == "1"


def _check_switches():
    p = prefix()
    use_cache = not _switch(f"{p}DISABLE_COMPILE_CACHE")
    if (_switch("VLLM_NEURON_DISABLE_WARMUP_COMPILE") or _switch(f"{p}ASSERT_CACHE_HIT")) and not use_cache:
        raise ValueError(
            f"{p}DISABLE_COMPILE_CACHE cannot both be set with VLLM_NEURON_DISABLE_WARMUP_COMPILE or  "
            f"{p}ASSERT_CACHE_HIT"
        )
    return use_cache


def _local_hit(cache_dir, key):
    entry = cache_dir / key
    if _is_cache_complete(entry, key):
        _check_key(entry, key)
        (entry / ".cache_accessed").touch()
        return True
    return False


def fetch_remote_or_compile(cache_dir, key, hlo, command):
    """Under the key's lock: the remote tier, then ASSERT_CACHE_HIT, then compile. Returns "hit"
    (another process built it meanwhile), "remote" or "compiled"."""
    p = prefix()
    entry = cache_dir / key
    lock = CompilationLock(key, cache_dir)
    with lock as held:
        if not held:
            lock.wait(entry)
            return "hit"
        if _local_hit(cache_dir, key):
            return "hit"
        remote = os.environ.get(f"{p}REMOTE_CACHE")
        if remote and _is_cache_complete(Path(remote) / key, key):
            tmp = cache_dir / f"{key}.tmp.{os.getpid()}"
            shutil.rmtree(tmp, ignore_errors=True)
            shutil.copytree(Path(remote) / key, tmp, ignore=shutil.ignore_patterns(*HOST_FILES))
            if entry.exists():
                entry.rename(cache_dir / f"{key}.trash.{os.getpid()}")
            tmp.rename(entry)
            _check_key(entry, key)
            return "remote"
        if _switch(f"{p}ASSERT_CACHE_HIT"):
            raise RuntimeError(
                f"{p}ASSERT_CACHE_HIT: remote compile cache miss for key {key}. All graphs must be a cache hit."
            )
        print(f"INFO [vllm_neuron.compile.backend] Compiling graph {key} with neuronx-cc", flush=True)
        _store_local(entry, key, hlo, command)
        return "compiled"


def lookup_or_compile(cache_dir, key, hlo, command):
    """What the plugin's backend `compile()` does for one graph; returns "hit", "remote", "compiled" or
    "uncached" (DISABLE_COMPILE_CACHE: compiled, nothing kept)."""
    print(f"INFO [vllm_neuron.compile.backend] Compilation cache key: {key}", flush=True)
    p = prefix()
    if not _check_switches():
        return "uncached"
    if _local_hit(cache_dir, key):
        return "hit"
    if _switch("VLLM_NEURON_DISABLE_WARMUP_COMPILE"):
        raise RuntimeError(
            f"VLLM_NEURON_DISABLE_WARMUP_COMPILE: local compile cache miss for key {key}. All graphs must be "
            "pre-compiled when warmup compilation is disabled."
        )
    if _switch(f"{p}ASSERT_CACHE_HIT") and not os.environ.get(f"{p}REMOTE_CACHE"):
        raise RuntimeError(
            f"{p}ASSERT_CACHE_HIT: local compile cache miss for key {key} and remote cache is disabled. All graphs "
            "must be a cache hit."
        )
    return fetch_remote_or_compile(cache_dir, key, hlo, command)


def precompile(cache_dir, key, hlo, command):
    """The graph-capture backend's compile of a captured graph (parallel in the real code): local, then
    `fetch_remote_or_compile`, without the backend's VLLM_NEURON_DISABLE_WARMUP_COMPILE check."""
    if not _check_switches():
        return "uncached"
    if _local_hit(cache_dir, key):
        return "hit"
    return fetch_remote_or_compile(cache_dir, key, hlo, command)
