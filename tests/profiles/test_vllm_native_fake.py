"""Contract tests of the FAKE vLLM Neuron plugin (tests/fakes/vllm_neuron_native) against the real
plugin's code and docs, one per difference issue 38 found (each failed on the fake before it was
corrected). Sources: the in-plugin cache of 0.21
(Infinity-AI-Institute/vllm-neuron@7f4cca75 vllm_neuron/compile/cache.py, longdct/vllm-neuron@2124255a
vllm_neuron/compile/backend.py), the plugin's model registry (release-0.24.0.1.1.0
vllm_neuron/model/registry.py), the SDK's CPU-compilation doc (aws-neuron-sdk@81ce03ae
vllm-neuron/docs/design/compilation/cpu_compilation.md l.79-92) and vLLM v1's block pool."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from neuronforge.spec.tinymodel import make_tiny_llama
from tests.fakes import VLLM_SDK_2_32_0, VLLM_SDK_2_33_0, fake_python

# SDK 2.32.0's fake image: the versions the key hashes (tests/fakes/vllm_sdk_2_32_0 dist-infos).
VERSIONS_2_32 = "torch_neuronx:2.11.0.1.0.1284+f49d8626|neuronxcc:2.27.5334.0+f702b353|nki:0.6.0+31049202112.g85070674"
FAIL_CLOSED = {"VLLM_NEURON_DISABLE_WARMUP_COMPILE": "1", "NEURON_LIBTORCH_DISABLE_GRAPH_CAPTURE_BACKEND": "1"}


def _run(tmp_path: Path, code: str, env: dict[str, str], folders: tuple[Path, ...] = VLLM_SDK_2_32_0) -> str:
    python = fake_python(tmp_path / f"py-{uuid.uuid4().hex[:6]}", *folders)
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("NEURON_", "VLLM_"))}
    done = subprocess.run([str(python), "-c", code], env={**clean, **env}, capture_output=True, text=True, check=False)
    return done.stdout + done.stderr


def _last_json(out: str):
    return json.loads(out.strip().splitlines()[-1])


HASH = (
    "import json, sys; from libtorch_neuronx_lite.compile.cache import create_cache_hash as h; "
    "print(json.dumps([h('g', [('bfloat16', (2, 4), (4, 1))], {'compiler_args': a}) for a in json.loads(sys.argv[1])]))"
)


def _keys(tmp_path: Path, args: list, env: dict[str, str] | None = None) -> list[str]:
    python = fake_python(tmp_path / f"py-{uuid.uuid4().hex[:6]}", *VLLM_SDK_2_32_0)
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("NEURON_", "VLLM_"))}
    done = subprocess.run(
        [str(python), "-c", HASH, json.dumps(args)], env={**clean, **(env or {})}, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    return _last_json(done.stdout)


def _plugin_key(graph: str, inputs: str, canonical: str) -> str:
    """create_cache_hash's recipe (cache.py @7f4cca75), computed here from its parts."""
    return hashlib.md5("|".join([graph, inputs, VERSIONS_2_32, f"compiler_args:{canonical}"]).encode()).hexdigest()[:32]


# -- case 9: the key ------------------------------------------------------------------------------------
def test_a_standalone_compiler_flag_enters_the_key_as_true(tmp_path: Path) -> None:
    """`_normalize_compiler_args`: "standalone flags map to "True""; `--k=v` splits at the first `=`;
    `-k v` is a pair. The key is md5 over the plugin's components, so it is computed here independently."""
    env = {"NEURON_PLATFORM_TARGET_OVERRIDE": "trn2"}
    (o1, mixed) = _keys(tmp_path, ["-O1", ["--auto-cast=none", "-O2", "--logfile", "x.log", "--verbose"]], env)
    assert o1 == _plugin_key("g", "bfloat16_2x4_4x1", "--target=trn2 -O1=True")
    assert mixed == _plugin_key(
        "g", "bfloat16_2x4_4x1", "--auto-cast=none --logfile=x.log --target=trn2 --verbose=True -O2=True"
    )


def test_target_in_the_args_is_honoured_below_the_environment(tmp_path: Path) -> None:
    """`resolve_target`: NEURON_PLATFORM_TARGET_OVERRIDE > `--target` in the args > the runtime."""
    on_trn2 = {"FAKE_NEURON_PLATFORM": "trn2"}  # what the runtime detects
    (by_args, by_args_eq, runtime) = _keys(tmp_path, ["--target trn3", "--target=trn3", ""], on_trn2)
    (by_env,) = _keys(tmp_path, [""], {**on_trn2, "NEURON_PLATFORM_TARGET_OVERRIDE": "trn3"})
    (env_wins,) = _keys(tmp_path, ["--target trn2"], {**on_trn2, "NEURON_PLATFORM_TARGET_OVERRIDE": "trn3"})
    assert by_args == by_args_eq == by_env == env_wins == _plugin_key("g", "bfloat16_2x4_4x1", "--target=trn3")
    assert runtime == _plugin_key("g", "bfloat16_2x4_4x1", "--target=trn2")


LOOKUP = (
    "import os; from pathlib import Path; from libtorch_neuronx_lite.compile import cache; "
    "print(cache.lookup_or_compile(Path(os.environ['LOCAL']), os.environ['KEY'], 'hlo', 'cmd'))"
)
KEY = "0123456789abcdef0123456789abcdef"


@pytest.mark.parametrize("other", ["VLLM_NEURON_DISABLE_WARMUP_COMPILE", "NEURON_LIBTORCH_ASSERT_CACHE_HIT"])
def test_disabling_the_cache_with_a_fail_closed_switch_is_a_value_error(tmp_path: Path, other: str) -> None:
    """backend.py compile() (0.21, verbatim there with the VLLM_NEURON_ names; LNL's text UNVERIFIED)."""
    env = {"LOCAL": str(tmp_path / "c"), "KEY": KEY, "NEURON_LIBTORCH_DISABLE_COMPILE_CACHE": "1", other: "1"}
    out = _run(tmp_path, LOOKUP, env)
    assert (
        "ValueError: NEURON_LIBTORCH_DISABLE_COMPILE_CACHE cannot both be set with VLLM_NEURON_DISABLE_WARMUP_COMPILE "
        "or  NEURON_LIBTORCH_ASSERT_CACHE_HIT"
    ) in out, out
    assert not (tmp_path / "c").exists()


# -- case 9: the per-key lock ---------------------------------------------------------------------------
def test_a_compile_and_a_remote_fetch_hold_the_keys_lock_beside_the_entries(tmp_path: Path) -> None:
    """CompilationLock: `.<key>.compilation_metadata.lock` (filelock) and `.<key>.compilation_metadata`
    (the holder) in the cache root, not in the entry; a remote copy leaves the host's files behind."""
    remote = tmp_path / "remote"
    assert _run(tmp_path, LOOKUP, {"LOCAL": str(remote), "KEY": KEY}).strip().endswith("compiled")
    assert (remote / f".{KEY}.compilation_metadata.lock").is_file()
    assert not (remote / f".{KEY}.compilation_metadata").exists()  # the holder's record goes with the holder
    assert not list((remote / KEY).glob("*.lock")) and not list((remote / KEY).glob(".compilation_metadata*"))
    (remote / KEY / ".cache_accessed").touch()
    local = tmp_path / "local"
    env = {"LOCAL": str(local), "KEY": KEY, "NEURON_LIBTORCH_REMOTE_CACHE": str(remote)}
    assert _run(tmp_path, LOOKUP, env).strip().endswith("remote")
    assert (local / f".{KEY}.compilation_metadata.lock").is_file() and not (local / KEY / ".cache_accessed").exists()


HOLD = (
    "import fcntl, os, sys, time; from pathlib import Path; d = Path(sys.argv[1]); d.mkdir(parents=True); "
    "f = open(d / f'.{sys.argv[2]}.compilation_metadata.lock', 'a'); fcntl.flock(f, fcntl.LOCK_EX); "
    "(d / f'.{sys.argv[2]}.compilation_metadata').write_text(f'pid:{os.getpid()}\\nprocess_name:x\\n'); "
    "print('held', flush=True); time.sleep(60)"
)


def test_a_waiter_takes_the_lock_holders_entry_or_fails_when_the_holder_dies(tmp_path: Path) -> None:
    """Only the lock winner fetches or compiles; the others poll for its entry, and raise "Lock holder
    process died - cache invalidated, please retry compilation" when it dies first."""
    cache = tmp_path / "c"
    holder = subprocess.Popen([sys.executable, "-c", HOLD, str(cache), KEY], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        python = fake_python(tmp_path / "py", *VLLM_SDK_2_32_0)
        waiter = subprocess.Popen(
            [str(python), "-c", LOOKUP],
            env={**os.environ, "LOCAL": str(cache), "KEY": KEY},
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        time.sleep(1.5)
        assert waiter.poll() is None and not (cache / KEY).exists()  # waiting, compiling nothing
        holder.send_signal(signal.SIGKILL)
        holder.wait()
        out, _ = waiter.communicate(timeout=30)
        assert "Lock holder process died - cache invalidated, please retry compilation" in out, out
        assert not (cache / f".{KEY}.compilation_metadata").exists()
    finally:
        holder.kill()
    # a holder that finishes: the waiter takes its entry as a hit
    done = _run(tmp_path, LOOKUP, {"LOCAL": str(tmp_path / "built"), "KEY": KEY})
    assert done.strip().endswith("compiled")
    holder = subprocess.Popen([sys.executable, "-c", HOLD, str(cache / "x"), KEY], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        waiter = subprocess.Popen(
            [str(fake_python(tmp_path / "py", *VLLM_SDK_2_32_0)), "-c", LOOKUP],
            env={**os.environ, "LOCAL": str(cache / "x"), "KEY": KEY},
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        time.sleep(1.5)
        import shutil

        shutil.copytree(tmp_path / "built" / KEY, cache / "x" / KEY)  # the holder's entry appears
        out, _ = waiter.communicate(timeout=30)
        assert out.strip().endswith("hit"), out
    finally:
        holder.kill()
        holder.wait()


# -- the engine: registry, fail-closed pair, cache root, NKI, null block ---------------------------------
def _llm(model: Path, **kw) -> str:
    args = {"tensor_parallel_size": 2, "max_model_len": 256, "max_num_seqs": 2, "block_size": 32, **kw}
    return f"import transformers; from vllm import LLM; llm = LLM({str(model)!r}, **{args!r}); "


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_tiny_llama(tmp_path_factory.mktemp("tiny") / "m", tokenizer=True)


@pytest.mark.parametrize("folders", [VLLM_SDK_2_32_0, VLLM_SDK_2_33_0], ids=["0.24", "0.29"])
def test_the_plugin_cannot_load_an_architecture_its_registry_lacks(
    tmp_path: Path, tiny: Path, folders: tuple[Path, ...]
) -> None:
    """Case 2: the worker registers registry.get_models() over vLLM's classes; Qwen2ForCausalLM is in
    vLLM's registry but not the plugin's, so it resolves to vLLM's GPU class, which the plugin's runner
    cannot build. Llama and Qwen3 load."""
    qwen2 = tmp_path / "qwen2"
    qwen2.mkdir()
    config = json.loads((tiny / "config.json").read_text())
    (qwen2 / "config.json").write_text(
        json.dumps({**config, "architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2"})
    )
    env = {
        "VLLM_CACHE_ROOT": str(tmp_path / "c"),
        "VLLM_NEURON_CPU_COMPILE": "1",
        "NEURON_PLATFORM_TARGET_OVERRIDE": "trn2",
    }
    out = _run(tmp_path, _llm(qwen2, num_gpu_blocks_override=17), env, folders)
    assert "AttributeError: type object 'Qwen2ForCausalLM' has no attribute 'from_configs'" in out, out[-800:]
    assert "warmup done" in _run(tmp_path, _llm(tiny, num_gpu_blocks_override=17), env, folders)
    listed = _run(
        tmp_path,
        "import json; from vllm_neuron.model.registry import get_models as g; print(json.dumps([n for n, _ in g()]))",
        {},
        folders,
    )
    names = set(_last_json(listed))
    assert {"LlamaForCausalLM", "Qwen3ForCausalLM", "GptOssForCausalLM"} <= names and "Qwen2ForCausalLM" not in names


def test_warmup_compile_off_alone_still_compiles_through_the_graph_capture_backend(tmp_path: Path, tiny: Path) -> None:
    """Case 3: the docs pair the switches "to guarantee that no compilation occurs": with only
    VLLM_NEURON_DISABLE_WARMUP_COMPILE=1 the graph-capture backend compiles what it captured; with
    NEURON_LIBTORCH_DISABLE_GRAPH_CAPTURE_BACKEND=1 too, a miss fails the start."""
    device = {"FAKE_NEURON_DEVICES": "2", "NEURON_PLATFORM_TARGET_OVERRIDE": "trn2"}
    half = _run(
        tmp_path,
        _llm(tiny, num_gpu_blocks_override=17),
        {**device, "VLLM_CACHE_ROOT": str(tmp_path / "a"), "VLLM_NEURON_DISABLE_WARMUP_COMPILE": "1"},
    )
    assert "Compiling graph" in half and "warmup done" in half, half[-800:]
    pair = _run(
        tmp_path,
        _llm(tiny, num_gpu_blocks_override=17),
        {**device, "VLLM_CACHE_ROOT": str(tmp_path / "b"), **FAIL_CLOSED},
    )
    assert "VLLM_NEURON_DISABLE_WARMUP_COMPILE: local compile cache miss for key" in pair, pair[-800:]
    assert "Compiling graph" not in pair


def test_libtorch_neuronx_lites_cache_root_is_read_before_vllms(tmp_path: Path, tiny: Path) -> None:
    """Case 4: with NEURON_LIBTORCH_CACHE_ROOT set (an image's or a pod's), the server looks there, not
    in the synced $VLLM_CACHE_ROOT (the precedence the fake takes: UNVERIFIED, the harmful case)."""
    compile_env = {
        "VLLM_CACHE_ROOT": str(tmp_path / "synced"),
        "VLLM_NEURON_CPU_COMPILE": "1",
        "NEURON_PLATFORM_TARGET_OVERRIDE": "trn2",
    }
    assert "warmup done" in _run(tmp_path, _llm(tiny, num_gpu_blocks_override=17), compile_env)
    serve = {
        "VLLM_CACHE_ROOT": str(tmp_path / "synced"),
        "NEURON_PLATFORM_TARGET_OVERRIDE": "trn2",
        "FAKE_NEURON_DEVICES": "2",
        **FAIL_CLOSED,
    }
    assert "warmup done" in _run(tmp_path, _llm(tiny, num_gpu_blocks_override=17), serve)
    elsewhere = _run(
        tmp_path,
        _llm(tiny, num_gpu_blocks_override=17),
        {**serve, "NEURON_LIBTORCH_CACHE_ROOT": str(tmp_path / "image")},
    )
    assert "local compile cache miss" in elsewhere, elsewhere[-800:]
    same = _run(
        tmp_path,
        _llm(tiny, num_gpu_blocks_override=17),
        {**serve, "NEURON_LIBTORCH_CACHE_ROOT": str(tmp_path / "synced")},
    )
    assert "warmup done" in same


def test_graphs_that_call_nki_kernels_leave_their_results_in_nki(tmp_path: Path, tiny: Path) -> None:
    """Case 9: LNL keeps NKI compile results in `<cache>/nki/<key>.json` (Kiln, SDK 2.32); in the fake
    every decode graph calls one kernel, so a CPU compile leaves one result per decode bucket."""
    env = {
        "VLLM_CACHE_ROOT": str(tmp_path / "c"),
        "VLLM_NEURON_CPU_COMPILE": "1",
        "NEURON_PLATFORM_TARGET_OVERRIDE": "trn2",
    }
    out = _run(
        tmp_path, _llm(tiny, num_gpu_blocks_override=17) + "import json; print(json.dumps(sorted(llm.graphs)))", env
    )
    graphs = _last_json(out)
    nki = sorted((tmp_path / "c" / "neuron" / "compile_cache" / "nki").glob("*.json"))
    assert len(nki) == sum(g.startswith("decode_") for g in graphs) == 2
    assert all(len(p.stem) == 32 and "attention_tkg" in json.loads(p.read_text())["kernel"] for p in nki)


def test_neuron_cc_flags_change_every_key(tmp_path: Path, tiny: Path) -> None:
    """NEURON_CC_FLAGS: appended to the hashed args in the fake (whether LNL hashes it is UNVERIFIED):
    a flag on the compile worker that the launch files lack misses every graph."""
    env = {"VLLM_NEURON_CPU_COMPILE": "1", "NEURON_PLATFORM_TARGET_OVERRIDE": "trn2"}
    plain = _run(tmp_path, _llm(tiny, num_gpu_blocks_override=17), {**env, "VLLM_CACHE_ROOT": str(tmp_path / "a")})
    flagged = _run(
        tmp_path,
        _llm(tiny, num_gpu_blocks_override=17),
        {**env, "VLLM_CACHE_ROOT": str(tmp_path / "b"), "NEURON_CC_FLAGS": "-O2"},
    )
    keys = {line.rsplit(" ", 1)[1] for line in plain.splitlines() if "Compilation cache key" in line}
    other = {line.rsplit(" ", 1)[1] for line in flagged.splitlines() if "Compilation cache key" in line}
    assert len(keys) == len(other) == 4 and keys.isdisjoint(other)


GENERATE = (
    "from vllm import SamplingParams; "
    "out = llm.generate([{'prompt_token_ids': [1 + i % 50 for i in range(200)]}] * 2, "
    "SamplingParams(temperature=0.0, max_tokens=56, ignore_eos=True)); "
    "print(llm.preemptions, [len(o.outputs[0].token_ids) for o in out])"
)


@pytest.mark.parametrize(("blocks", "preempted"), [(16, True), (17, False)])
def test_the_null_block_leaves_one_block_fewer_than_the_override(
    tmp_path: Path, tiny: Path, blocks: int, preempted: bool
) -> None:
    """Case 6: vLLM v1 pops block 0 as its null block (vllm/v1/core/block_pool.py), so two 256-token
    sequences of 32-token blocks need 2 x 8 + 1 = 17: with 16 the scheduler preempts one."""
    env = {
        "VLLM_CACHE_ROOT": str(tmp_path / "c"),
        "FAKE_NEURON_DEVICES": "2",
        "NEURON_PLATFORM_TARGET_OVERRIDE": "trn2",
    }
    out = _run(tmp_path, _llm(tiny, num_gpu_blocks_override=blocks) + GENERATE, env)
    count, lengths = out.strip().splitlines()[-1].split(" ", 1)
    assert lengths == "[56, 56]", out[-800:]
    assert (int(count) > 0) is preempted
    assert ("preempted: no free KV block" in out) is preempted
