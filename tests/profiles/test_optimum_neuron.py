"""Contract tests of profile `optimum-neuron`: each rule optimum-neuron 0.4.5 applies when it loads
an export (or `optimum-cli neuron serve` starts on one), pinned down against an export the FAKE
`NeuronModelForCausalLM` (tests/fakes/optimum_neuron, imitating 0.4.5 on SDK 2.26.1) wrote in a child
process, then broken one rule at a time.

Sources, huggingface/optimum-neuron at tag v0.4.5 (= the installed 0.4.5 wheel):
- V: optimum/neuron/configuration_utils.py, NeuronConfig.from_dict (mandatory keys, version gates)
- L: optimum/neuron/models/inference/backend/pretrained_model.py, NxDPreTrainedModel._from_pretrained
  (target vs host instance type, cores >= tp_degree, model.pt) and load_weights (rank shards)
- S: optimum/commands/neuron/serve.py, ServeCommand.parse_args / run (flags must equal the export's)
- M: optimum/neuron/models/inference/auto_models.py (text-generation model types)
- P: the wheel's METADATA (Requires-Dist of extra `neuronx`) and optimum/neuron/version.py (__sdk_version__)
"""

from __future__ import annotations

import json
import os
import py_compile
import shutil
import subprocess
import sys
from collections.abc import Callable
from importlib import metadata
from pathlib import Path

import pytest

from neuronforge.profiles import optimum_neuron as on
from neuronforge.profiles.base import Artifact, AssembleJob, LaunchContext
from neuronforge.profiles.registry import target_problems
from neuronforge.spec.target import TargetSpec
from neuronforge.spec.tinymodel import make_tiny_llama
from neuronforge.spec.toolchain import Toolchain
from tests.fakes import SDK_2_26_1
from tests.profiles.edits import delete, edit_json, edit_text

PROFILE = on.PROFILE
FAKES = Path(__file__).resolve().parents[1] / "fakes"
ARTIFACT_URI = "s3://models-bucket/artifacts/org/tiny-llama/0123abcd/optimum-neuron-inf2.xlarge/0a1b2c3d4e5f"


def target(**kw) -> TargetSpec:
    base = {"instance_type": "inf2.xlarge", "tp_degree": 2, "batch_size": 2, "sequence_length": 64, "dtype": "fp32"}
    return TargetSpec.parse({**base, "profile": "optimum-neuron", **kw})


TOOLCHAIN = Toolchain("optimum", "0.4.5", "neuronxcc", on.COMPILER_VERSION, {"optimum-neuron": "0.4.5"})


@pytest.fixture(scope="module")
def export(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One export of a tiny Llama (with tokenizer) for inf2, tp 2, batch 2, seq 64, fp32, written by
    the FAKE optimum-neuron through the backend, in the SDK 2.26.1 toolchain interpreter."""
    from neuronforge.compilation.backends.base import CompileJob
    from neuronforge.compilation.backends.optimum import BACKEND
    from neuronforge.compilation.compile_cache import CompileCache
    from tests.conftest import use_fake_sdk
    from tests.fakes import OPTIMUM

    base = tmp_path_factory.mktemp("optimum-export")
    checkpoint = make_tiny_llama(base / "tiny-llama", tokenizer=True)
    with pytest.MonkeyPatch.context() as mp:
        use_fake_sdk(mp, "2.26.1", (OPTIMUM, *SDK_2_26_1), base)
        cache = CompileCache(base / "compile-cache", "neuronxcc", on.COMPILER_VERSION)
        build = base / "build"
        BACKEND.compile(CompileJob(checkpoint, "llama", target(), build, cache, (), 300, base, python=PROFILE.python()))
    return base / "build"


@pytest.fixture
def staged(export: Path, tmp_path: Path) -> Path:
    """The artifact root as publish stages it: profile.assemble on a copy of the export."""
    build = tmp_path / "build"
    shutil.copytree(export, build)
    root = tmp_path / "artifact"
    outputs = PROFILE.assemble(AssembleJob(build, None, root, context()))
    assert outputs == {"optimum-neuron": "optimum-neuron", "launch": "launch"}
    return root


def context(uri: str = ARTIFACT_URI, t: TargetSpec | None = None) -> LaunchContext:
    t = (t or target()).normalized()
    return LaunchContext(t, TOOLCHAIN, uri, "s3://models-bucket/neuron-cache", "llama")


def preflight(root: Path, t: TargetSpec | None = None) -> list[str]:
    return PROFILE.preflight(Artifact(root, (t or target()).normalized(), TOOLCHAIN))


# -- pins --------------------------------------------------------------------------------------------
def test_pins_are_what_optimum_neuron_0_4_5_pins() -> None:
    """P: the SDK release and the [neuronx] extra's exact versions; the compiler's full version
    carries the local label the pip version lacks (cache/hub_cache.py: "the actual path uses the
    extended compiler version (with commit hash)")."""
    from optimum.neuron.version import __sdk_version__, __version__

    assert (PROFILE.pins.sdk_release, __sdk_version__) == ("2.26.1", "2.26.1")
    assert PROFILE.pins.packages == {"optimum-neuron": __version__} == {"optimum-neuron": "0.4.5"}
    requires = {
        r.split("==")[0].replace("_", "-"): r.split("==")[1].split(";")[0].strip()
        for r in metadata.requires("optimum-neuron") or []
        if 'extra == "neuronx"' in r and "==" in r
    }
    requires["vllm"] = next(r for r in metadata.requires("optimum-neuron") if r.startswith("vllm==")).split("==")[1]
    requires["vllm"] = requires["vllm"].split(";")[0].strip()
    assert {p: requires[p] for p in on.SDK_PACKAGES} == on.SDK_PACKAGES
    assert PROFILE.pins.compiler_version == "2.21.33363.0+82129205"
    assert PROFILE.pins.compiler_version.split("+")[0] == requires["neuronx-cc"]
    assert PROFILE.queue == "neuron-compile-2.26.1" and PROFILE.device_queue == "neuron-2.26.1"
    assert PROFILE.ref == "optimum-neuron@2.26.1"


def test_instances_are_optimums_and_inf2_compiles_for_trn1() -> None:
    """optimum/neuron/utils/instance.py: SUPPORTED_INSTANCE_TYPES and normalize_instance_type."""
    from optimum.neuron.utils.instance import SUPPORTED_INSTANCE_TYPES, normalize_instance_type

    assert set(SUPPORTED_INSTANCE_TYPES) == PROFILE.instance_families
    for family in PROFILE.instance_families:
        assert normalize_instance_type(family) == on._target_of(family)
    assert target().instance.compile_target == "trn1"


def test_problems_keep_the_exporters_refusals() -> None:
    """What get_neuron_config cannot express is refused at plan time, pointing at vllm-neuron."""
    problems = PROFILE.problems(target(context_encoding_buckets=[32, 64]), "llama")
    assert any("no bucket parameters; use profile vllm-neuron" in p for p in problems)
    assert PROFILE.problems(target(), "llama") == []
    assert any("does not support mistral" in p for p in target_problems(PROFILE, target(), "mistral"))  # M: no mistral
    assert PROFILE.compile_settings(target(), "llama") == {}


# -- the fake writes what 0.4.5 writes ------------------------------------------------------------------
def test_the_fake_export_has_0_4_5s_files_and_sdk_2_26_1s_compiler_version(export: Path) -> None:
    """L + pretrained_model.py `save`: config.json, neuron_config.json, model.pt and one shard per
    rank under checkpoint/weights/; V: neuron_config.json stamped by NeuronConfig.to_dict with the
    optimum-neuron version and neuronxcc.__version__ (full, with the local label)."""
    files = sorted(str(p.relative_to(export)) for p in export.rglob("*") if p.is_file())
    assert files == [
        "checkpoint/weights/tp0_sharded_checkpoint.safetensors",
        "checkpoint/weights/tp1_sharded_checkpoint.safetensors",
        "config.json",
        "generation_config.json",  # with the tokenizer: copied from the checkpoint by the backend
        "model.pt",
        "neuron_config.json",
        "special_tokens_map.json",
        "tokenizer.json",
        "tokenizer_config.json",
    ]
    raw = json.loads((export / "neuron_config.json").read_text())
    assert raw["neuronxcc_version"] == "2.21.33363.0+82129205"
    assert raw["optimum_neuron_version"] == "0.4.5" and raw["_serialized_key"] == "NxDNeuronConfig"
    assert (raw["target"], raw["tp_degree"], raw["batch_size"], raw["sequence_length"]) == ("trn1", 2, 2, 64)
    assert raw["continuous_batching"] and raw["on_device_sampling"] and raw["fused_qkv"]  # llama's _get_neuron_config


# -- assemble + preflight ---------------------------------------------------------------------------------
def test_the_assembled_export_passes_preflight(staged: Path) -> None:
    assert preflight(staged) == []
    assert (staged / "optimum-neuron/neuron_config.json").is_file()
    assert sorted(p.name for p in (staged / "launch").iterdir()) == ["load.py", "optimum-neuron.env", "serve.sh"]


def test_preflight_reads_with_the_real_installed_reader(staged: Path) -> None:
    """The config preflight judges is the one 0.4.5's own NxDNeuronConfig.from_pretrained returns."""
    nc, error = on.read_neuron_config(staged / "optimum-neuron")
    assert error is None
    assert type(nc).__module__ == "optimum.neuron.models.inference.backend.config"
    assert "fakes" not in __import__("optimum.neuron").neuron.__file__
    assert (nc.tp_degree, nc.batch_size, nc.sequence_length, nc.target, str(nc.torch_dtype)) == (
        2,
        2,
        64,
        "trn1",
        "torch.float32",
    )


def test_the_env_file_and_serve_command(staged: Path) -> None:
    """S: serve.sh's command parsed by the REAL `optimum-cli neuron serve` parser passes exactly
    the export's batch size, sequence length and tensor parallel size; the env file says where the
    folder is and which versions the host needs."""
    env = on.read_env_file(staged / "launch/optimum-neuron.env")
    assert env["MODEL_URI"] == f"{ARTIFACT_URI}/optimum-neuron"
    assert env["MODEL_DIR"] == "/opt/neuronforge/models/0a1b2c3d4e5f/optimum-neuron"
    assert (env["OPTIMUM_NEURON_VERSION"], env["NEURONXCC_VERSION"], env["NEURON_SDK_RELEASE"]) == (
        "0.4.5",
        "2.21.33363.0+82129205",
        "2.26.1",
    )
    assert (env["TENSOR_PARALLEL_SIZE"], env["BATCH_SIZE"], env["SEQUENCE_LENGTH"], env["DTYPE"]) == (
        "2",
        "2",
        "64",
        "float32",
    )
    serve = (staged / "launch/serve.sh").read_text()
    assert 'aws s3 sync --only-show-errors "$MODEL_URI" "$MODEL_DIR"' in serve
    assert (
        'exec optimum-cli neuron serve --model "$MODEL_DIR" --tensor_parallel_size 2 --batch_size 2 '
        '--sequence_length 64 --port "$PORT" "$@"\n'
    ) in serve
    args, error = on.parse_serve_command(serve, env)
    assert error is None
    assert (args.model, args.tensor_parallel_size, args.batch_size, args.sequence_length, args.port) == (
        env["MODEL_DIR"],
        2,
        2,
        64,
        8080,
    )
    assert subprocess.run(["bash", "-n", str(staged / "launch/serve.sh")]).returncode == 0


def test_serve_sh_uses_a_local_store_path_as_is(export: Path, tmp_path: Path) -> None:
    """optimum-cli reads local folders: a file:// artifact is served where it is, not synced."""
    build = tmp_path / "build"
    shutil.copytree(export, build)
    root = tmp_path / "artifact"
    PROFILE.assemble(AssembleJob(build, None, root, context(f"file://{root}")))
    env = on.read_env_file(root / "launch/optimum-neuron.env")
    assert env["MODEL_URI"] == f"file://{root}/optimum-neuron"
    fake_bin = tmp_path / "bin"  # stand-in optimum-cli: prints the arguments serve.sh execs it with
    fake_bin.mkdir()
    (fake_bin / "optimum-cli").write_text('#!/bin/sh\necho "$@"\n')
    (fake_bin / "optimum-cli").chmod(0o755)
    run = subprocess.run(
        ["bash", str(root / "launch/serve.sh"), "--served-model-name", "tiny"],
        capture_output=True,
        text=True,
        env={**os.environ, "PATH": f"{fake_bin}:{os.environ['PATH']}"},
    )
    assert run.returncode == 0, run.stderr
    assert run.stdout.split() == [
        "neuron",
        "serve",
        "--model",
        f"{root}/optimum-neuron",
        "--tensor_parallel_size",
        "2",
        "--batch_size",
        "2",
        "--sequence_length",
        "64",
        "--port",
        "8080",
        "--served-model-name",
        "tiny",
    ]
    assert preflight(root) == []


def test_load_py_calls_from_pretrained_on_the_synced_folder(staged: Path) -> None:
    load = staged / "launch/load.py"
    py_compile.compile(str(load), doraise=True)
    text = load.read_text()
    assert f"MODEL_URI = '{ARTIFACT_URI}/optimum-neuron'" in text
    assert '["aws", "s3", "sync", "--only-show-errors", MODEL_URI, str(model_dir)]' in text
    assert "NeuronModelForCausalLM.from_pretrained(str(model_dir))" in text
    assert '["Hello, my name is"] * 2' in text  # one prompt per batch slot


# -- each rule, broken -------------------------------------------------------------------------------------
def _nc(**fields) -> Callable[[Path], None]:
    return edit_json("optimum-neuron/neuron_config.json", lambda d: d.update(fields))


def _drop_key(key: str) -> Callable[[Path], None]:
    return edit_json("optimum-neuron/neuron_config.json", lambda d: d.pop(key))


BROKEN = {
    # V: from_dict gates
    "older optimum-neuron": (
        _nc(optimum_neuron_version="0.4.4"),
        "optimum_neuron_version='0.4.4'",
        "configuration_utils.py",
    ),
    "pip compiler version": (
        _nc(neuronxcc_version="2.21.33363.0"),
        "neuronxcc_version='2.21.33363.0'",
        "configuration_utils.py",
    ),
    "'+' replaced": (
        _nc(neuronxcc_version="2.21.33363.0-82129205"),
        "neuronxcc_version='2.21.33363.0-82129205'",
        "from_dict",
    ),
    "other SDK's compiler": (
        _nc(neuronxcc_version="2.28.7631.0+1ab2c3d4"),
        "SDK 2.26.1's neuronxcc.__version__",
        "from_dict",
    ),
    "no compiler version": (_drop_key("neuronxcc_version"), "missing mandatory neuronxcc_version", "from_dict"),
    "no optimum version": (
        _drop_key("optimum_neuron_version"),
        "missing mandatory optimum_neuron_version",
        "from_dict",
    ),
    "other config class": (_nc(_serialized_key="NeuronConfig"), "_serialized_key='NeuronConfig'", "from_dict"),
    # V: the real reader constructs NxDNeuronConfig(**rest)
    "unknown field": (_nc(is_block_kv_layout=True), "the real reader refuses it: TypeError", "from_dict"),
    "speculation + sampling": (_nc(speculation_length=4), "IncompatibleConfigError", "from_dict"),
    "not JSON": (lambda r: (r / "optimum-neuron/neuron_config.json").write_text("{"), "not a JSON object", "from_dict"),
    # L: instance type, cores, files, shards
    "compiled for trn2": (_nc(target="trn2"), "target='trn2', but inf2.xlarge is a 'trn1' host", "_from_pretrained"),
    "more ranks than cores": (
        _nc(tp_degree=4, local_ranks_size=4),
        "tp_degree=4 needs 4 NeuronCores; inf2.xlarge has 2",
        "_from_pretrained",
    ),
    "no model.pt": (delete("optimum-neuron/model.pt"), "optimum-neuron/model.pt: missing", "_from_pretrained"),
    "no config.json": (
        delete("optimum-neuron/config.json"),
        "optimum-neuron/config.json: missing",
        "_from_pretrained",
    ),
    "a rank shard missing": (
        delete("optimum-neuron/checkpoint/weights/tp1_sharded_checkpoint.safetensors"),
        "checkpoint/weights/tp1_sharded_checkpoint.safetensors: missing (1 of 2 rank shards",
        "load_weights",
    ),
    "no neuron_config.json": (
        delete("optimum-neuron/neuron_config.json"),
        "neuron_config.json: missing",
        "configuration_utils.py",
    ),
    # S: the export's shape is what the launch spec serves (= the target)
    "other batch size": (_nc(batch_size=4, max_batch_size=4), "batch_size=4, the target says 2", "serve.py"),
    "other sequence length": (
        _nc(sequence_length=128, n_active_tokens=128),
        "sequence_length=128, the target says 64",
        "serve.py",
    ),
    "shorter context": (_nc(max_context_length=32), "max_context_length=32, the target says 64", "serve.py"),
    "other dtype": (_nc(torch_dtype="bfloat16"), "torch_dtype='bfloat16', the target says 'float32'", "serve.py"),
    "config.json dtype": (
        edit_json("optimum-neuron/config.json", lambda d: d.update(dtype="bfloat16")),
        "config.json: dtype='bfloat16'",
        "serve.py",
    ),
    # M
    "unsupported model type": (
        edit_json("optimum-neuron/config.json", lambda d: d.update(model_type="mistral")),
        "model_type='mistral'",
        "auto_models.py",
    ),
    # vLLM's tokenizer
    "no tokenizer": (delete("optimum-neuron/tokenizer.json"), "no tokenizer.json or tokenizer.model", "vllm"),
    # S: the launch files
    "serve.sh batch size": (
        edit_text("launch/serve.sh", "--batch_size 2", "--batch_size 4"),
        "--batch_size 4, but the export has 2",
        "serve.py",
    ),
    "serve.sh tp": (
        edit_text("launch/serve.sh", "--tensor_parallel_size 2", "--tensor_parallel_size 1"),
        "--tensor_parallel_size 1, but the export has 2",
        "serve.py",
    ),
    "serve.sh seq": (
        edit_text("launch/serve.sh", "--sequence_length 64", "--sequence_length 4096"),
        "--sequence_length 4096, but the export has 64",
        "serve.py",
    ),
    "serve.sh bad value": (
        edit_text("launch/serve.sh", "--batch_size 2", "--batch_size two"),
        "invalid int value: 'two'",
        "serve.py",
    ),
    "serve.sh no --model": (
        edit_text("launch/serve.sh", '--model "$MODEL_DIR" ', ""),
        "the following arguments are required: -m/--model",
        "serve.py",
    ),
    "serve.sh unset variable": (
        edit_text("launch/serve.sh", '"$PORT"', '"$SERVE_PORT"'),
        "SERVE_PORT, which optimum-neuron.env does not set",
        "serve.py",
    ),
    "env points at the root": (
        edit_text(
            "launch/optimum-neuron.env", f"MODEL_URI={ARTIFACT_URI}/optimum-neuron\n", f"MODEL_URI={ARTIFACT_URI}\n"
        ),
        f"MODEL_URI={ARTIFACT_URI!r} is not the optimum-neuron/ folder",
        "serve.py",
    ),
    "env compiler version": (
        edit_text(
            "launch/optimum-neuron.env", "NEURONXCC_VERSION=2.21.33363.0+82129205", "NEURONXCC_VERSION=2.21.33363.0"
        ),
        "NEURONXCC_VERSION='2.21.33363.0', the export needs '2.21.33363.0+82129205'",
        "configuration_utils.py",
    ),
    "no serve.sh": (delete("launch/serve.sh"), "launch/serve.sh: missing", ""),
}


@pytest.mark.parametrize("case", list(BROKEN), ids=list(BROKEN))
def test_each_broken_rule_is_reported_with_its_source(staged: Path, case: str) -> None:
    breaking, message, source = BROKEN[case]
    breaking(staged)
    problems = preflight(staged)
    hits = [p for p in problems if message in p]
    assert hits, problems
    assert all(source in p for p in hits), hits


def test_the_export_must_be_for_the_artifacts_target(staged: Path) -> None:
    """The same export judged against another target (what the manifest says it was built for)."""
    problems = preflight(staged, target(batch_size=1))
    assert any("batch_size=2, the target says 1" in p for p in problems), problems
    problems = preflight(staged, target(instance_type="trn2.48xlarge", tp_degree=2))
    assert any("target='trn1', but trn2.48xlarge is a 'trn2' host" in p for p in problems), problems


def test_preflight_needs_optimum_neuron_0_4_5_to_read(staged: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import neuronforge.compilation.detect

    monkeypatch.setattr(neuronforge.compilation.detect, "installed_version", lambda p: "0.4.4")
    problems = preflight(staged)
    assert any("preflight reads with optimum-neuron 0.4.5, this host has 0.4.4" in p for p in problems), problems


def test_reading_leaves_the_platform_override_as_it_was(monkeypatch: pytest.MonkeyPatch) -> None:
    """optimum/neuron/__init__.py sets NEURON_PLATFORM_TARGET_OVERRIDE=trn1 on a CPU host; a later
    compile child of another target in this process must not inherit it."""
    monkeypatch.delenv("NEURON_PLATFORM_TARGET_OVERRIDE", raising=False)
    with on._optimum_imported():
        os.environ["NEURON_PLATFORM_TARGET_OVERRIDE"] = "trn1"
    assert "NEURON_PLATFORM_TARGET_OVERRIDE" not in os.environ
    monkeypatch.setenv("NEURON_PLATFORM_TARGET_OVERRIDE", "trn2")
    with on._optimum_imported():
        os.environ["NEURON_PLATFORM_TARGET_OVERRIDE"] = "trn1"
    assert os.environ["NEURON_PLATFORM_TARGET_OVERRIDE"] == "trn2"


CASES = [
    # models/inference/llama/modeling_llama.py LlamaNxDModelForCausalLM._get_neuron_config
    ("llama", 2, 2, {"continuous_batching": True, "on_device_sampling": True, "fused_qkv": True}),
    ("llama", 1, 2, {"continuous_batching": False, "on_device_sampling": True, "fused_qkv": True}),
    # models/inference/qwen2/modeling_qwen2.py: no on-device sampling with continuous batching at tp 2
    ("qwen2", 2, 2, {"continuous_batching": True, "on_device_sampling": False, "fused_qkv": False}),
    ("qwen2", 2, 4, {"continuous_batching": True, "on_device_sampling": True, "fused_qkv": False}),
    # models/inference/mixtral/modeling_mixtral.py: NxDNeuronConfig's defaults
    ("mixtral", 4, 2, {"continuous_batching": False, "on_device_sampling": False, "fused_qkv": False}),
]


@pytest.fixture(scope="module")
def fake_neuron_configs() -> list[dict]:
    """The FAKE get_neuron_config's NxDNeuronConfig.to_dict() for each of CASES, in one child process
    (the fake is never imported by the test process)."""
    code = (
        "import json, sys, transformers\n"
        "from optimum.neuron import NeuronModelForCausalLM\n"
        "for model_type, batch, tp, _ in json.loads(sys.argv[1]):\n"
        "    cfg = transformers.AutoConfig.for_model(model_type, dtype='bfloat16')\n"
        "    nc = NeuronModelForCausalLM.get_neuron_config('x', config=cfg, instance_type='inf2', batch_size=batch,"
        " sequence_length=64, tensor_parallel_size=tp)\n"
        "    print(json.dumps(nc.to_dict()))\n"
    )
    paths = [str(p) for p in (FAKES / "optimum_neuron", *SDK_2_26_1)]
    out = subprocess.run(
        [sys.executable, "-c", code, json.dumps(CASES)],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(paths)},
        check=True,
    )
    return [json.loads(line) for line in out.stdout.strip().splitlines()[-len(CASES) :]]


@pytest.mark.parametrize("case", range(len(CASES)), ids=[f"{m}-b{b}-tp{t}" for m, b, t, _ in CASES])
def test_the_fake_neuron_config_is_each_model_classes(fake_neuron_configs: list[dict], case: int) -> None:
    expected = CASES[case][3]
    got = fake_neuron_configs[case]
    assert {k: got[k] for k in expected} == expected
    assert (got["target"], got["torch_dtype"], got["_serialized_key"]) == ("trn1", "bfloat16", "NxDNeuronConfig")
