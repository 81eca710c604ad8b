"""Contract tests of profile `vllm-neuron`: each consumer rule, with the source it was read from.

Sources (read at these revisions):
- V: vllm-project/vllm-neuron tag 0.2.0 (commit a9671254, = branch release-0.2.x)
  - V/loader: vllm_neuron/worker/neuronx_distributed_model_loader.py
  - V/platform: vllm_neuron/platform.py NeuronPlatform.check_and_update_config
  - V/README: README.md (Prerequisites: SDK 2.26.1, Inf2/Trn1/Trn1n/Trn2; Known Issues)
- N: aws-neuron/neuronx-distributed-inference tag v0.6.10598 (commit e07f0567)
  - N/config: src/neuronx_distributed_inference/models/config.py
  - N/app: src/neuronx_distributed_inference/models/application_base.py
  - N/types: src/neuronx_distributed_inference/utils/constants.py MODEL_TYPES
The build is made by the FAKE NxD Inference 0.6.10598 in tests/fakes (compile in a child process,
as on a worker), then staged with the profile's own `assemble` and checked with its `preflight`.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from neuronforge.compilation.backends.base import CompileJob
from neuronforge.compilation.backends.nxdi import BACKEND
from neuronforge.compilation.compile_cache import CompileCache
from neuronforge.profiles.base import Artifact, AssembleJob, LaunchContext
from neuronforge.profiles.registry import target_problems
from neuronforge.profiles.vllm_neuron import (
    PROFILE,
    launch_flags,
    launch_mismatches,
    read_env_file,
    render_serve_command,
    serve_flags,
)
from neuronforge.spec.target import TargetSpec
from neuronforge.spec.tinymodel import make_tiny_llama
from neuronforge.spec.toolchain import Toolchain
from tests.fakes import SDK_2_26_1
from tests.profiles.edits import assert_named, delete, edit_json, edit_text

VERSION = "2.21.33363.0+82129205"


def target(**kw) -> TargetSpec:
    base = {"instance_type": "inf2.xlarge", "tp_degree": 2, "batch_size": 4, "sequence_length": 64}
    return TargetSpec.parse({**base, "profile": "vllm-neuron@2.26.1", **kw})


def settings(t: TargetSpec, quantized_dir: Path | None = None) -> dict:
    return PROFILE.compile_settings(t, "llama", quantized_dir)["neuron_config"]


# -- compile settings: what vLLM's scheduler needs (V/loader _get_default_neuron_config) -----------------
def test_settings_are_the_neuron_config_vllm_builds_from_the_serve_flags() -> None:
    """V/loader _get_default_neuron_config @0.2.0: tp_degree = --tensor-parallel-size, batch_size =
    --max-num-seqs, ctx_batch_size = 1, seq_len = max_context_length = --max-model-len (chunked prefill
    is off under the custom scheduler, V/platform), enable_bucketing, is_continuous_batching =
    batch > 1, padding_side right, OnDeviceSamplingConfig(dynamic=True, deterministic=False); without
    prefix caching V/platform sets block_size = max_model_len, so pa_block_size = seq_len and
    pa_num_blocks = max_num_seqs. Plus neuronforge's fields (pre-sharded weights, LNC, fused QKV)."""
    assert settings(target()) == {
        "tp_degree": 2,
        "batch_size": 4,
        "ctx_batch_size": 1,
        "seq_len": 64,
        "max_context_length": 64,
        "enable_bucketing": True,
        "is_continuous_batching": True,
        "quantized": False,
        "torch_dtype": "bfloat16",
        "padding_side": "right",
        "on_device_sampling_config": {"dynamic": True, "deterministic": False},
        "lora_config": None,
        "pa_num_blocks": 4,
        "pa_block_size": 64,
        "is_block_kv_layout": False,
        "is_prefix_caching": False,
        "save_sharded_checkpoint": True,
        "logical_nc_config": 1,
        "fused_qkv": True,
    }
    # V/loader: "is_continuous_batching": (batch_size > 1)
    assert settings(target(batch_size=1))["is_continuous_batching"] is False
    # V/loader: TORCH_DTYPE_TO_NEURON_AMP["float16"]; NxD config.py _get_lnc: trn2 defaults to LNC 2
    assert settings(target(dtype="fp16"))["torch_dtype"] == "float16"
    assert settings(target(instance_type="trn2.48xlarge", tp_degree=4))["logical_nc_config"] == 2


def test_prefix_caching_compiles_the_block_kv_layout_vllm_asks_for() -> None:
    """V/loader: is_block_kv_layout = is_prefix_caching = --enable-prefix-caching, pa_block_size =
    --block-size; V/platform adds 1 to --num-gpu-blocks-override (vLLM's null block), which becomes
    pa_num_blocks; V/README Known Issues 2: pass --num-gpu-blocks-override =
    ceil(max_model_len / block_size) * max_num_seqs."""
    t = target(backend_options={"prefix_caching": True, "block_size": 16})
    nc = settings(t)
    assert (nc["is_block_kv_layout"], nc["is_prefix_caching"], nc["pa_block_size"]) == (True, True, 16)
    assert nc["pa_num_blocks"] == 64 // 16 * 4 + 1
    flags = serve_flags(t)
    assert (flags["enable_prefix_caching"], flags["block_size"], flags["num_gpu_blocks_override"]) == (True, 16, 16)
    more = settings(target(backend_options={"prefix_caching": True, "block_size": 16, "num_blocks": 40}))
    assert more["pa_num_blocks"] == 41


def test_buckets_quantization_and_passthrough_options_travel_in_override_neuron_config(tmp_path: Path) -> None:
    """V/loader _get_neuron_config_after_override: override_neuron_config is merged over the defaults;
    a `quantized` override carries the quantization fields. The serve command carries exactly the
    fields the flags do not set, so a recompile by vLLM (on a failed load) rebuilds the same model."""
    t = target(
        context_encoding_buckets=[32, 64],
        token_generation_buckets=[64],
        quantization="int8:per_channel",
        backend_options={"flash_decoding_enabled": True},
    )
    flags = PROFILE.launch_command_flags(t, tmp_path)
    override = flags["additional_config"]["override_neuron_config"]
    assert override == {
        "context_encoding_buckets": [32, 64],
        "token_generation_buckets": [64],
        "flash_decoding_enabled": True,
        "fused_qkv": True,
        "logical_nc_config": 1,
        "save_sharded_checkpoint": True,
        "quantized": True,
        "quantized_checkpoints_path": str(tmp_path),
        "quantization_dtype": "int8",
        "quantization_type": "per_channel_symmetric",
        "modules_to_not_convert": ["lm_head"],
    }
    nc = settings(t, tmp_path)
    assert all(nc[k] == v for k, v in override.items()) and nc["enable_bucketing"] is True


# -- planning: what vLLM cannot ask NxD Inference for --------------------------------------------------
@pytest.mark.parametrize(
    ("kw", "model_type", "expected"),
    [
        # V/loader: max_context_length = seq_len = --max-model-len
        ({"max_context_length": 32}, "llama", "vLLM sets max_context_length = seq_len = --max-model-len"),
        # N/types has no "mistral": V/loader _get_neuron_model_cls refuses MistralForCausalLM
        ({}, "mistral", "profile 'vllm-neuron' does not support mistral"),
        # V/loader: OnDeviceSamplingConfig(dynamic=True) is always set; options vLLM cannot ask for
        ({"backend_options": {"on_device_sampling": False}}, "llama", "backend_options ['on_device_sampling']"),
        ({"backend_options": {"turbo": 1}}, "llama", "accepted: ['block_size', 'flash_decoding_enabled'"),
        # V/README Known Issues 3: prefix caching with batch size 1 generates incorrect outputs
        ({"batch_size": 1, "backend_options": {"prefix_caching": True}}, "llama", "prefix_caching with batch_size 1"),
        # V/loader _validate_neuron_config: blocks >= ceil(max_model_len / block_size) * max_num_seqs
        (
            {"backend_options": {"prefix_caching": True, "block_size": 16, "num_blocks": 8}},
            "llama",
            "num_blocks=8: vLLM needs at least ceil(64/16) × 4 = 16",
        ),
        ({"backend_options": {"prefix_caching": True, "block_size": 24}}, "llama", "not a multiple of block_size=24"),
        # V/platform: without prefix caching the block size is max_model_len
        ({"backend_options": {"block_size": 16}}, "llama", "block_size / num_blocks need prefix_caching: true"),
    ],
)
def test_problems_refuse_what_vllm_cannot_serve(kw: dict, model_type: str, expected: str) -> None:
    problems = target_problems(PROFILE, target(**kw), model_type)
    assert any(expected in p for p in problems), problems


def test_problems_include_nxdi_quantization_limits() -> None:
    """NxD Inference 0.6's quantization refusals (neuronforge.compilation.backends.nxdi_quantization) apply."""
    from neuronforge.compilation.backends.nxdi_quantization import quantization_problems

    t = target(quantization="f8e5m2")
    assert quantization_problems(t, "llama") and set(quantization_problems(t, "llama")) <= set(
        PROFILE.problems(t, "llama")
    )
    assert PROFILE.problems(target(), "llama") == []
    assert PROFILE.problems(target(backend_options={"prefix_caching": True, "block_size": 16}), "qwen3") == []


# -- the launch command parser -----------------------------------------------------------------------
def test_launch_flags_reads_the_command_back() -> None:
    flags = serve_flags(target(backend_options={"prefix_caching": True}))
    flags["additional_config"] = {"override_neuron_config": {"fused_qkv": True}}
    script = "#!/bin/sh\n# vllm serve in a comment\nexec " + render_serve_command(flags) + "\n"
    parsed = launch_flags(script, {"MODEL_DIR": "/m", "PORT": "9000"})
    assert parsed == {"model": "/m", **flags, "port": 9000}
    # vLLM's parser takes --flag=value and underscores too
    assert launch_flags("vllm serve /m --max_num_seqs=8 --no-enable-prefix-caching") == {
        "model": "/m",
        "max_num_seqs": 8,
        "enable_prefix_caching": False,
    }
    with pytest.raises(ValueError, match="no `vllm serve` command"):
        launch_flags("python -m something")


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        ({"max_num_seqs": 8}, "compiled batch_size=4, but vLLM builds batch_size=8 from --max-num-seqs"),
        ({"max_num_seqs": 1}, "compiled is_continuous_batching=True, but vLLM builds is_continuous_batching=False"),
        ({"max_model_len": 128}, "compiled seq_len=64, but vLLM builds seq_len=128 from --max-model-len"),
        ({"tensor_parallel_size": 4}, "compiled tp_degree=2, but vLLM builds tp_degree=4 from --tensor-parallel-size"),
        ({"dtype": "float16"}, "compiled torch_dtype='bfloat16', but vLLM builds torch_dtype='float16' from --dtype"),
        # vLLM 0.11 V1 turns prefix caching on unless told not to; V/platform then wants --block-size
        ({"enable_prefix_caching": None}, "prefix caching is on but --block-size is not given"),
        ({"max_model_len": None}, "--max-model-len is not given"),
        (
            {"additional_config": {"override_neuron_config": {"fused_qkv": False}}},
            "compiled fused_qkv=True, but vLLM builds fused_qkv=False from --additional-config",
        ),
    ],
)
def test_a_launch_that_does_not_match_the_build_is_refused(change: dict, expected: str) -> None:
    t = target()
    compiled = settings(t)
    compiled["on_device_sampling_config"] = {"dynamic": True, "deterministic": False, "global_topk": 256}
    flags = PROFILE.launch_command_flags(t)
    assert launch_mismatches(compiled, flags) == []
    flags.update(change)
    flags = {k: v for k, v in flags.items() if v is not None}
    assert any(expected in m for m in launch_mismatches(compiled, flags)), launch_mismatches(compiled, flags)


# -- the published artifact: assembled from a build of the fake NxD Inference ------------------------------
@pytest.fixture(scope="module")
def staged(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, TargetSpec]]:
    """Compile a tiny Llama with the profile's settings through NxdiBackend (fake NxDI in the child),
    then stage it with the profile's `assemble` as publish does."""
    base = tmp_path_factory.mktemp("vllm-neuron")
    checkpoint = make_tiny_llama(base / "tiny-llama", tokenizer=True)
    t = target().normalized()
    from tests.conftest import use_fake_sdk

    with pytest.MonkeyPatch.context() as mp:
        use_fake_sdk(mp, "2.26.1", SDK_2_26_1, base)
        cache = CompileCache(base / "cache", "neuronxcc", VERSION, None)
        settings = PROFILE.compile_settings(t, "llama")
        job = CompileJob(
            checkpoint, "llama", t, base / "build", cache, (), 300, base, settings, python=PROFILE.python()
        )
        BACKEND.compile(job)
    toolchain = Toolchain("nxdi", "0.6.10598", "neuronxcc", VERSION)
    ctx = LaunchContext(t, toolchain, "s3://bucket/artifacts/k1", "s3://bucket/neuron-cache", "llama")
    out = base / "artifact"
    assert PROFILE.assemble(AssembleJob(base / "build", None, out, ctx)) == {"nxdi": "nxdi", "launch": "launch"}
    yield out, t


@pytest.fixture
def artifact(staged: tuple[Path, TargetSpec], tmp_path: Path) -> Artifact:
    root = tmp_path / "artifact"
    shutil.copytree(staged[0], root)
    return Artifact(root, staged[1], Toolchain("nxdi", "0.6.10598", "neuronxcc", VERSION))


def test_the_fake_writes_neuron_config_json_as_nxdi_0_6_does(artifact: Artifact) -> None:
    """N/config InferenceConfig.save -> to_json_string: json.dumps(to_dict(config), indent=2,
    sort_keys=True) + newline; the whole InferenceConfig (HF fields at the top, `neuron_config` nested,
    torch dtypes by bare name). N/app compile: neuron_config.json, model.pt, weights/tp{r}_sharded_checkpoint."""
    folder = artifact.root / "nxdi"
    text = (folder / "neuron_config.json").read_text()
    raw = json.loads(text)
    assert text == json.dumps(raw, indent=2, sort_keys=True) + "\n"
    assert raw["architectures"] == ["LlamaForCausalLM"] and raw["fused_spec_config"] is None
    nc = raw["neuron_config"]
    assert (nc["torch_dtype"], nc["ctx_batch_size"], nc["tkg_batch_size"], nc["padding_side"]) == (
        "bfloat16",
        1,
        4,
        "right",
    )
    assert nc["on_device_sampling_config"] == {
        "do_sample": False,
        "top_k": 1,
        "top_p": 1.0,
        "temperature": 1.0,
        "dynamic": True,
        "deterministic": False,
        "global_topk": 256,
        "on_device_sampling_config": True,
        "top_k_kernel_enabled": False,
    }
    assert sorted(p.name for p in (folder / "weights").iterdir()) == [
        "tp0_sharded_checkpoint.safetensors",
        "tp1_sharded_checkpoint.safetensors",
    ]
    assert {"model.pt", "config.json", "tokenizer.json"} <= {p.name for p in folder.iterdir()}


def test_the_fake_drops_unknown_keywords_with_a_warning_like_nxdi(caplog: pytest.LogCaptureFixture) -> None:
    """N/config NeuronConfig.__init__: unknown keywords are logged ("Unexpected keyword arguments")
    and not kept, so they never reach neuron_config.json."""
    import sys

    sys.path.insert(0, str(SDK_2_26_1[0]))
    try:
        from neuronx_distributed_inference.models.config import NeuronConfig, to_dict
    finally:
        sys.path.remove(str(SDK_2_26_1[0]))
    with caplog.at_level("WARNING"):
        nc = NeuronConfig(tp_degree=2, is_continous_batching=True)
    assert "Unexpected keyword arguments: {'is_continous_batching': True}" in caplog.text
    assert "is_continous_batching" not in to_dict(nc) and to_dict(nc)["is_continuous_batching"] is False


def test_an_assembled_build_passes_preflight(artifact: Artifact) -> None:
    assert PROFILE.preflight(artifact) == []
    env = read_env_file(artifact.root / "launch" / "vllm.env")
    assert env["NEURON_COMPILED_ARTIFACTS"] == env["MODEL_DIR"] == "/opt/neuronforge/models/k1/nxdi"
    assert env["MODEL_URI"] == "s3://bucket/artifacts/k1/nxdi"
    serve = (artifact.root / "launch" / "serve.sh").read_text()
    assert 'aws s3 sync --only-show-errors "$MODEL_URI" "$MODEL_DIR"' in serve
    assert 'exec vllm serve "$MODEL_DIR" \\\n  --tensor-parallel-size 2 \\\n  --max-num-seqs 4 \\\n' in serve
    assert "--max-model-len 64 \\\n  --dtype bfloat16 \\\n  --no-enable-prefix-caching \\\n" in serve


BROKEN: dict[str, tuple[Callable[[Path], None], str]] = {
    # N/app load + N/config InferenceConfig.load
    "no neuron_config.json": (delete("nxdi/neuron_config.json"), "nxdi/neuron_config.json: missing"),
    "no model.pt": (delete("nxdi/model.pt"), "nxdi/model.pt: missing (torch.jit.load"),
    "a missing shard": (
        delete("nxdi/weights/tp1_sharded_checkpoint.safetensors"),
        "nxdi/weights/tp1_sharded_checkpoint.safetensors: missing (1 of 2",
    ),
    "not pre-sharded": (
        edit_json("nxdi/neuron_config.json", lambda d: d["neuron_config"].update(save_sharded_checkpoint=False)),
        "save_sharded_checkpoint is not true",
    ),
    # V/loader _get_model_configs / _get_neuron_model_cls (N/types)
    "no architectures": (edit_json("nxdi/config.json", lambda d: d.pop("architectures")), "no architectures"),
    "Mistral": (
        edit_json("nxdi/config.json", lambda d: d.update(architectures=["MistralForCausalLM"])),
        "'MistralForCausalLM' is not served by vllm-neuron 0.2.0",
    ),
    "no KV heads": (
        edit_json("nxdi/config.json", lambda d: d.pop("num_key_value_heads")),
        "needs num_key_value_heads",
    ),
    "no config.json": (delete("nxdi/config.json"), "nxdi/config.json: missing"),
    # vLLM loads the tokenizer from the served folder
    "no tokenizer": (delete("nxdi/tokenizer.json"), "no tokenizer.json or tokenizer.model"),
    # the scheduler settings the build must have been compiled with (V/loader)
    "static batching": (
        edit_json("nxdi/neuron_config.json", lambda d: d["neuron_config"].update(is_continuous_batching=False)),
        "compiled is_continuous_batching=False, but vLLM builds is_continuous_batching=True from --max-num-seqs > 1",
    ),
    "left padding": (
        edit_json("nxdi/neuron_config.json", lambda d: d["neuron_config"].update(padding_side="left")),
        "compiled padding_side='left'",
    ),
    "context batch": (
        edit_json("nxdi/neuron_config.json", lambda d: d["neuron_config"].update(ctx_batch_size=4)),
        "compiled ctx_batch_size=4, but vLLM builds ctx_batch_size=1",
    ),
    "static sampling": (
        edit_json(
            "nxdi/neuron_config.json", lambda d: d["neuron_config"]["on_device_sampling_config"].update(dynamic=False)
        ),
        "compiled on_device_sampling_config=",
    ),
    "no on-device sampling": (
        edit_json("nxdi/neuron_config.json", lambda d: d["neuron_config"].update(on_device_sampling_config=None)),
        "compiled on_device_sampling_config=None",
    ),
    "short context": (
        edit_json("nxdi/neuron_config.json", lambda d: d["neuron_config"].update(max_context_length=32)),
        "compiled max_context_length=32, but vLLM builds max_context_length=64 from --max-model-len",
    ),
    "built for another batch": (
        edit_json("nxdi/neuron_config.json", lambda d: d["neuron_config"].update(batch_size=8)),
        "nxdi/neuron_config.json: batch_size=8, the target says 4",
    ),
    "per-tensor quantized with fused QKV": (
        edit_json(
            "nxdi/neuron_config.json",
            lambda d: d["neuron_config"].update(
                fused_qkv=True, quantized=True, quantization_type="per_tensor_symmetric"
            ),
        ),
        "nxdi/neuron_config.json: fused_qkv=true with per-tensor quantization",
    ),
    # the launch files (V/loader _get_compiled_model_path; N/config _get_lnc)
    "no serve.sh": (delete("launch/serve.sh"), "launch/serve.sh: missing"),
    "artifacts elsewhere": (
        edit_text("launch/vllm.env", "NEURON_COMPILED_ARTIFACTS=/opt", "NEURON_COMPILED_ARTIFACTS=/srv"),
        "launch/vllm.env: NEURON_COMPILED_ARTIFACTS='/srv/neuronforge/models/k1/nxdi' is not MODEL_DIR",
    ),
    "another LNC": (
        edit_text("launch/vllm.env", "NEURON_LOGICAL_NC_CONFIG=1", "NEURON_LOGICAL_NC_CONFIG=2"),
        "NEURON_LOGICAL_NC_CONFIG=2 overrides the compiled logical_nc_config=1",
    ),
    "serves another folder": (
        edit_text("launch/serve.sh", 'vllm serve "$MODEL_DIR"', "vllm serve meta-llama/Llama-3.1-8B"),
        "vllm serve 'meta-llama/Llama-3.1-8B' is not MODEL_DIR",
    ),
    "more sequences": (
        edit_text("launch/serve.sh", "--max-num-seqs 4", "--max-num-seqs 8"),
        "launch/serve.sh: compiled batch_size=4, but vLLM builds batch_size=8 from --max-num-seqs",
    ),
    "longer sequences": (
        edit_text("launch/serve.sh", "--max-model-len 64", "--max-model-len 128"),
        "launch/serve.sh: compiled seq_len=64, but vLLM builds seq_len=128 from --max-model-len",
    ),
    "prefix caching by default": (
        edit_text("launch/serve.sh", "--no-enable-prefix-caching \\\n  ", ""),
        "launch/serve.sh: vllm serve: prefix caching is on but --block-size is not given",
    ),
    "broken override": (
        edit_text("launch/serve.sh", "--additional-config '{", "--additional-config '{{"),
        "launch/serve.sh: --additional-config is not a JSON object",
    ),
}


@pytest.mark.parametrize("case", sorted(BROKEN))
def test_each_broken_rule_is_named_by_preflight(artifact: Artifact, case: str) -> None:
    assert_named(PROFILE, artifact, BROKEN, case)


def test_file_stores_are_copied_not_served_in_place(staged: tuple[Path, TargetSpec]) -> None:
    """V/loader: when loading fails vLLM compiles INTO NEURON_COMPILED_ARTIFACTS, so the launch never
    points it at the store: file:// folders are copied to MODEL_DIR like s3:// ones are synced."""
    t = staged[1]
    ctx = LaunchContext(t, Toolchain("nxdi", "", "neuronxcc", VERSION), "file:///data/store/a/k2", "", "llama")
    files = PROFILE.launch_spec(ctx)
    assert 'file://*) cp -R "${MODEL_URI#file://}/." "$MODEL_DIR/" ;;' in files["serve.sh"]
    assert "NEURON_COMPILED_ARTIFACTS=/opt/neuronforge/models/k2/nxdi\n" in files["vllm.env"]


def test_a_quantized_launch_names_no_worker_path_and_still_matches(tmp_path: Path) -> None:
    """N/config: a quantized NeuronConfig needs quantized_checkpoints_path set; vLLM reads it only to
    recompile (V/loader _compile_and_load_model). The launch names a host path, and the worker's path
    in the build is not compared (it cannot be equal on another host); every other field is."""
    from neuronforge.profiles.vllm_neuron import QUANTIZED_ON_HOST

    t = target(quantization="int8:per_channel")
    launch = PROFILE.launch_command_flags(t)
    assert launch["additional_config"]["override_neuron_config"]["quantized_checkpoints_path"] == QUANTIZED_ON_HOST
    compiled = settings(t, tmp_path)
    assert compiled["quantized_checkpoints_path"] == str(tmp_path)
    assert launch_mismatches(compiled, launch) == []
    compiled["quantization_type"] = "per_tensor_symmetric"
    assert any("compiled quantization_type='per_tensor_symmetric'" in m for m in launch_mismatches(compiled, launch))


# -- fused QKV and per-tensor scales (N/modeling_llama convert_state_dict_to_fused_qkv @ v0.6.10598) -----
def test_per_tensor_quantized_targets_compile_without_fused_qkv(tmp_path: Path) -> None:
    """The q/k/v per-tensor scales ([1] each) would be concatenated into [3] for a [1] parameter: fused
    QKV is off for per-tensor targets, on for per-channel ones, in the build and in the launch."""
    per_tensor = target(quantization="int8:per_tensor")
    assert settings(per_tensor, tmp_path)["fused_qkv"] is False
    flags = PROFILE.launch_command_flags(per_tensor)
    assert flags["additional_config"]["override_neuron_config"]["fused_qkv"] is False
    assert settings(target(quantization="int8:per_channel"), tmp_path)["fused_qkv"] is True
    assert settings(target(), tmp_path)["fused_qkv"] is True


def test_fused_qkv_asked_for_a_per_tensor_target_is_refused(tmp_path: Path) -> None:
    t = target(quantization="f8e4m3:per_tensor", backend_options={"fused_qkv": True})
    assert any(
        "fused_qkv=true with quantization f8e4m3" in p and "convert_state_dict_to_fused_qkv" in p
        for p in PROFILE.problems(t, "llama")
    )
    assert not any("fused_qkv" in p for p in PROFILE.problems(target(quantization="int8:per_tensor"), "llama"))
    from neuronforge.common.errors import InvalidInput

    with pytest.raises(InvalidInput, match="fused_qkv=true with quantization"):
        settings(t, tmp_path)
