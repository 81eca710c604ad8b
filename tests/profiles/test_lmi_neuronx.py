"""Contract tests of profile `lmi-neuronx`: what LMI (DJL Serving) does with the published
`serving.properties`, encoded from its source, and the artifact the pipeline publishes through the
FAKE transformers-neuronx 0.13.380 (tests/fakes/neuron_sdk_2_21_1).

Sources, all at djl-serving afece25d (= 1132e3ab~1, the last commit with Neuron support),
engines/python/setup/djl_python/:
- P = properties_manager/tnx_properties.py (TransformerNeuronXProperties: validation, amp from dtype,
  load_in_8bit from quantize=static_int8, on_device_embedding from load_split_model);
- C = transformers_neuronx.py set_configs (batch_size = max_rolling_batch_size under rolling batch;
  continuous batching for llama/mistral with max_rolling_batch_size > 1);
- L = neuron_utils/model_loader.py TNXModelLoader (set_neuron_config, get_model_specific_kwargs,
  maybe_compile_model: model.load(dir) for a local compiled_graph_path);
- U = neuron_utils/utils.py build_context_length_estimates.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from neuronforge.common.errors import InvalidInput
from neuronforge.pipeline.runner import run_target
from neuronforge.profiles.base import Artifact
from neuronforge.profiles.lmi_neuronx import (
    PROFILE,
    build_context_length_estimates,
    lmi_load,
    parse_properties,
    render_properties,
)
from neuronforge.profiles.registry import target_problems
from neuronforge.records.neff_cache import NeffCacheRecord
from neuronforge.spec.target import TargetSpec
from neuronforge.spec.tinymodel import make_tiny_llama
from neuronforge.spec.toolchain import Toolchain
from neuronforge.stores import open_store
from tests.fakes import SDK_2_21_1
from tests.profiles.edits import assert_named, delete, edit_json, edit_text

LLAMA = {"model_type": "llama", "hidden_size": 64, "num_attention_heads": 4, "num_key_value_heads": 2,
         "num_hidden_layers": 2, "intermediate_size": 128, "vocab_size": 128}  # fmt: skip


def target(**kw) -> TargetSpec:
    base = {"instance_type": "inf2.xlarge", "tp_degree": 2, "batch_size": 4, "sequence_length": 2048}
    return TargetSpec.parse({**base, "profile": "lmi-neuronx", **kw})


def props(t: TargetSpec, model_config: dict | None = None, **changes: str | None) -> dict[str, str]:
    out = render_properties(t, model_config or LLAMA, "s3://b/a/split/model", "s3://b/neuron-cache")
    for key, value in changes.items():
        key = key if key == "engine" else key.removesuffix("_top") if key.endswith("_top") else f"option.{key}"
        if value is None:
            out.pop(key, None)
        else:
            out[key] = value
    return out


# -- what LMI loads for our properties ------------------------------------------------------------------
def test_rolling_batch_on_llama_is_continuous_batching_with_lmis_buckets() -> None:
    """C: batch_size = max_rolling_batch_size; llama with > 1 sequences -> continuous batching.
    L: ContinuousBatchingConfig(batch_size_for_shared_caches), n_positions as a list, the default
    buckets of U; P: load_split_model -> on_device_embedding; amp = Dtype name (bf16 -> bf16)."""
    load, problems = lmi_load(props(target()), "llama")
    assert problems == []
    assert load.kwargs == {
        "batch_size": 4,
        "amp": "bf16",
        "tp_degree": 2,
        "n_positions": [2048],
        "context_length_estimate": [128, 1024, 2048],
    }
    assert load.neuron_config == {
        "on_device_embedding": True,
        "continuous_batching": {"batch_size_for_shared_caches": 4},
        "group_query_attention": "shard-over-heads",
    }


@pytest.mark.parametrize(
    ("model_type", "batch", "continuous"),
    [("llama", 4, True), ("mistral", 2, True), ("llama", 1, False), ("mixtral", 4, False), ("opt", 4, False)],
)
def test_continuous_batching_only_for_llama_and_mistral_with_more_than_one_sequence(
    model_type: str, batch: int, continuous: bool
) -> None:
    """C: OPTIMUM_CAUSALLM_CONTINUOUS_BATCHING_MODELS = {llama, mistral}; else naive rolling batch,
    where n_positions stays an int."""
    load, _ = lmi_load(props(target(batch_size=batch)), model_type)
    assert ("continuous_batching" in load.neuron_config) is continuous
    assert load.kwargs["n_positions"] == ([2048] if continuous else 2048)


def test_dynamic_batching_reads_batch_size_and_static_int8_quantizes_at_load() -> None:
    """P: rolling_batch=disable keeps option.batch_size; quantize=static_int8 sets load_in_8bit, and
    L builds QuantizationConfig(quant_dtype='s8', dequant_dtype=amp); fp16 -> amp f16."""
    t = target(dtype="fp16", quantization="int8:per_channel", backend_options={"rolling_batch": "disable"})
    p = props(t)
    assert p["option.batch_size"] == p["batch_size"] == "4" and "option.max_rolling_batch_size" not in p
    assert p["option.quantize"] == "static_int8"
    load, problems = lmi_load(p, "llama")
    assert problems == [] and load.kwargs["batch_size"] == 4 and load.kwargs["amp"] == "f16"
    assert load.neuron_config["quant"] == {"quant_dtype": "s8", "dequant_dtype": "f16"}
    assert "continuous_batching" not in load.neuron_config


def test_lmis_default_context_buckets() -> None:
    """U build_context_length_estimates (INITIAL_BUCKET_SIZE = 1024)."""
    assert build_context_length_estimates(64) == [64]
    assert build_context_length_estimates(128) == [128]
    assert build_context_length_estimates(2048) == [128, 1024, 2048]
    assert build_context_length_estimates(4096) == [128, 1024, 2048, 4096]
    assert build_context_length_estimates(3000) == [128, 1024, 2048, 3000]


REFUSED = {
    # P validate_rolling_batch + the Java LmiConfigRecommender (auto depends on the batch size)
    "auto": ({"rolling_batch": "auto"}, "its meaning depends on the batch size"),
    "vllm": ({"rolling_batch": "vllm"}, "only tnx or disable load the tnx graphs"),
    # P validate_schema_loader_combination
    "optimum schema": ({"partition_schema": "optimum"}, "partition_schema=optimum is refused with model_loader=tnx"),
    "optimum loader": ({"model_loader": "optimum"}, "option.model_loader='optimum'"),
    "not split": ({"load_split_model": "false"}, "option.load_split_model must be true"),
    # P Dtype / TnXQuantizeMethods / validate_gqa
    "fp8 dtype": ({"dtype": "fp8"}, "option.dtype='fp8'"),
    "awq": ({"quantize": "awq"}, "knows only static_int8"),
    "bad gqa": ({"group_query_attention": "shard-over-layers"}, "option.group_query_attention='shard-over-layers'"),
    # P validate_batch_size
    "both batches": ({"batch_size": "4"}, "LMI refuses both at once"),
    # the Java LmiConfigRecommender.setRollingBatch: a server-side batch_size > 1 turns rolling batch off
    "dynamic batching": ({"engine": "Python", "batch_size_top": "4"}, "makes the front end set rolling_batch=disable"),
    # smart defaults we never rely on
    "no n_positions": ({"n_positions": None}, "option.n_positions is not set"),
    "bad buckets": ({"context_length_estimate": "128,x"}, "comma-separated integers"),
    "other entry point": ({"entryPoint": "djl_python.huggingface"}, "must be djl_python.transformers_neuronx"),
}


@pytest.mark.parametrize("case", sorted(REFUSED))
def test_properties_lmi_refuses_or_misreads_are_named(case: str) -> None:
    changes, expected = REFUSED[case]
    load, problems = lmi_load(props(target(), **changes), "llama")
    assert load is None or problems
    assert any(expected in p for p in problems), problems


def test_properties_are_read_as_java_properties() -> None:
    text = "# comment\n! also a comment\nengine = Python\noption.n_positions: 64\noption.model_id=s3://b/k=v\n\n"
    assert parse_properties(text) == {"engine": "Python", "option.n_positions": "64", "option.model_id": "s3://b/k=v"}


# -- what the planner refuses for this profile ------------------------------------------------------------
@pytest.mark.parametrize(
    ("kw", "model_type", "expected"),
    [
        ({"quantization": "f8e4m3"}, "llama", "use int8:per_channel"),
        ({"quantization": "int8:per_tensor"}, "llama", "use int8:per_channel"),
        ({"quantization": "int8:per_channel"}, "gptj", "no int8 support"),
        (
            {"quantization": "int8:per_channel", "modules_to_not_convert": ["model.layers.0"]},
            "llama",
            "no_quantize_list",
        ),
        ({"token_generation_buckets": [1024, 2048]}, "llama", "passes n_positions as one value"),
        ({"backend_options": {"rolling_batch": "auto"}}, "llama", "auto depends on the batch size"),
        ({"backend_options": {"fuse_qkv": True}}, "llama", "not accepted by profile lmi-neuronx"),
        ({"instance_type": "trn2.48xlarge", "tp_degree": 4}, "llama", "serves inf2, trn1, trn1n instances"),
        ({}, "qwen2", "does not support qwen2"),
    ],
)
def test_problems_refuse_what_lmi_cannot_load(kw: dict, model_type: str, expected: str) -> None:
    problems = target_problems(PROFILE, target(**kw), model_type)
    assert any(expected in p for p in problems), problems


def test_a_tp_that_splits_kv_heads_unevenly_is_refused_by_the_plan() -> None:
    """transformers-neuronx's GQA strategies replicate or shard KV heads; 3 heads over tp 2 fit neither."""
    from neuronforge.spec.modelconfig import ModelArch

    arch = ModelArch.from_config({**LLAMA, "num_attention_heads": 6, "num_key_value_heads": 3, "hidden_size": 96})
    assert "neither divide nor are divided by tp=2" in PROFILE.arch_problems(target(), arch)[0]
    replicated = ModelArch.from_config({**LLAMA, "num_key_value_heads": 1})
    assert PROFILE.arch_problems(target(), replicated) == []
    assert props(target(), {**LLAMA, "num_key_value_heads": 1})["option.group_query_attention"] == "replicated-heads"


def test_compile_settings_are_the_load_lmi_builds_from_the_published_properties() -> None:
    t = target()
    assert PROFILE.compile_settings(t, "llama", model_config=LLAMA)["tnx"] == lmi_load(props(t), "llama")[0]


def test_settings_lmi_cannot_load_fail_before_compiling() -> None:
    with pytest.raises(InvalidInput, match="LMI would not load"):
        PROFILE.compile_settings(target(backend_options={"rolling_batch": "auto"}), "llama", model_config=LLAMA)


# -- the published artifact ------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def published_s3(tmp_path_factory: pytest.TempPathFactory, s3_endpoint: str) -> Iterator[tuple]:
    """A tiny Llama built for lmi-neuronx (tp 2, 2 sequences: continuous batching) through the whole
    pipeline, with the FAKE SDK 2.21.1 on the path, into a store on the local S3 endpoint."""
    import boto3

    from tests.conftest import use_fake_sdk

    base = tmp_path_factory.mktemp("lmi")
    checkpoint = make_tiny_llama(base / "tiny-llama", tokenizer=True)
    bucket = f"nf-{uuid.uuid4().hex[:12]}"
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("AWS_ENDPOINT_URL", s3_endpoint)
        use_fake_sdk(mp, "2.21.1", SDK_2_21_1, base)
        mp.setenv("FAKE_NEURON_COMPILE_LOG", str(base / "compiles.log"))
        boto3.client("s3", endpoint_url=s3_endpoint).create_bucket(Bucket=bucket)
        store = open_store(f"s3://{bucket}/nf")
        t = TargetSpec.parse(
            {
                "instance_type": "inf2.xlarge",
                "tp_degree": 2,
                "batch_size": 2,
                "sequence_length": 64,
                "profile": "lmi-neuronx",
            }
        )
        out = run_target(str(checkpoint), t, store, base / "work")
        yield store, out, base, mp


@pytest.fixture
def artifact(published_s3: tuple, tmp_path: Path) -> Artifact:
    """A fresh local copy of the published artifact, to break one rule at a time."""
    store, out, _, _ = published_s3
    root = tmp_path / "artifact"
    store.get_tree(out.published.prefix, root)
    return Artifact.from_manifest(root, out.published.manifest)


def test_the_published_artifact_is_what_lmi_loads(published_s3: tuple, artifact: Artifact) -> None:
    store, out, _base, _ = published_s3
    assert out.status == "published" and out.published.manifest.smoke.passed
    measured = out.published.manifest.smoke.measurement  # through the fake transformers-neuronx: synthetic
    assert measured is not None and measured.synthetic and measured.host.runtime_line == "transformers-neuronx 0.13"
    properties = parse_properties((artifact.root / "launch/serving.properties").read_text())
    # L/P: an s3:// compiled_graph_path becomes NEURON_COMPILE_CACHE_URL: the cache ROOT
    assert properties["option.compiled_graph_path"] == store.uri("neuron-cache")
    assert properties["option.model_id"] == f"{store.uri(out.published.prefix)}/split/model"
    assert properties["option.rolling_batch"] == "tnx" and properties["option.max_rolling_batch_size"] == "2"
    cache = json.loads((artifact.root / "launch/neff-cache.json").read_text())
    assert cache["compiler_dir"] == "neuronxcc-2.16.372.0+4a9b2326"
    assert cache["load"]["neuron_config"]["continuous_batching"] == {"batch_size_for_shared_caches": 2}
    for entry in cache["entries"]:  # the graphs are in the store's cache, complete
        assert store.exists(f"neuron-cache/neuronxcc-2.16.372.0+4a9b2326/{entry}/model.done")
    assert sorted(p.name for p in (artifact.root / "split/model").iterdir()) == [
        "config.json",
        "generation_config.json",
        "model.safetensors",
        "special_tokens_map.json",
        "tokenizer.json",
        "tokenizer_config.json",
    ]
    assert "neuron" not in json.loads((artifact.root / "split/model/config.json").read_text())
    assert PROFILE.preflight(artifact) == []
    # the graph-shaping environment the compile ran with is recorded (backends.base.graph_env)
    graph_env = out.published.manifest.compile["graph_env"]
    assert graph_env["NEURON_CC_FLAGS"] == cache["neuron_cc_flags"] and "NEURON_COMPILE_CACHE_URL" not in graph_env
    assert out.published.manifest.formats["split"] == "split/model"  # relative: the store renders it
    assert out.published.uris["split"] == f"{store.uri(out.published.prefix)}/split/model"


def test_lmis_own_load_through_the_published_cache_compiles_nothing(published_s3: tuple, tmp_path: Path) -> None:
    """What LMI does at start-up, with the fake transformers-neuronx: the load replayed from the
    published serving.properties, NEURON_COMPILE_CACHE_URL = a copy of the store's cache (what
    compiled_graph_path names): to_neuron() finds every graph, and the fake's compile log stays empty."""
    from neuronforge.compilation.backends.base import GenerateJob
    from neuronforge.compilation.backends.tnx import BACKEND, TnxLoad
    from neuronforge.compilation.compile_cache import CompileCache

    store, out, base, _ = published_s3
    root = tmp_path / "a"
    store.get_tree(out.published.prefix, root)
    properties = parse_properties((root / "launch/serving.properties").read_text())
    load, problems = lmi_load(properties, "llama")
    assert problems == []
    flags = json.loads((root / "launch/neff-cache.json").read_text())["neuron_cc_flags"]
    assert flags == "--logfile /tmp/compile.log --temp-dir=/tmp"  # the LMI image's ENV NEURON_CC_FLAGS
    cache = CompileCache(tmp_path / "cache", "neuronxcc", "2.16.372.0+4a9b2326", store)
    entries = json.loads((root / "launch/neff-cache.json").read_text())["entries"]
    assert sorted(cache.preseed(entries)) == sorted(entries)
    log = base / "compiles.log"
    before = log.read_text() if log.exists() else ""
    settings = {"tnx": load, "neuron_cc_flags": flags, "neff_dir": root / "split/neff"}
    job = GenerateJob(root / "split/model", [[1, 2, 3]], 4, 300, cache, settings, python=PROFILE.python())
    result = BACKEND.generate(job)
    assert result["compiled"] == [] and len(result["rows"][0]["tokens"]) == 4
    assert (log.read_text() if log.exists() else "") == before
    assert TnxLoad.from_json(load.to_json()) == load


def test_verify_passes_and_names_a_missing_cache_entry(published_s3: tuple, tmp_path: Path) -> None:
    from neuronforge.farm.verify import verify_artifact

    store, out, _, _ = published_s3
    manifest_key = f"{out.published.prefix}/manifest.json"
    assert verify_artifact(store, manifest_key, tmp_path / "v1").problems == []
    entries = json.loads(store.get_bytes(f"{out.published.prefix}/launch/neff-cache.json"))["entries"]
    done = f"neuron-cache/neuronxcc-2.16.372.0+4a9b2326/{entries[0]}/model.done"
    data = store.get_bytes(done)
    store.delete_prefix(done)
    try:
        problems = verify_artifact(store, manifest_key, tmp_path / "v2").problems
    finally:
        store.put_bytes(data, done)
    assert any(
        "NEFF cache entries are not complete" in p and "LMI would compile them at start-up" in p for p in problems
    )


BROKEN: dict[str, tuple[Callable[[Path], None], str]] = {
    # P / C / L, as LMI reads the published properties
    "auto rolling batch": (
        edit_text("launch/serving.properties", "option.rolling_batch=tnx", "option.rolling_batch=auto"),
        "its meaning depends on the batch size",
    ),
    "optimum loader": (
        edit_text("launch/serving.properties", "option.model_loader=tnx", "option.model_loader=optimum"),
        "option.model_loader='optimum'",
    ),
    "longer sequences": (
        edit_text("launch/serving.properties", "option.n_positions=64", "option.n_positions=128"),
        "but the NEFFs were compiled with",
    ),
    "another dtype": (
        edit_text("launch/serving.properties", "option.dtype=bf16", "option.dtype=fp16"),
        "LMI would load with kwargs",
    ),
    "int8 at load": (
        edit_text("launch/serving.properties", "option.dtype=bf16", "option.dtype=bf16\noption.quantize=static_int8"),
        "LMI would load with neuron_config",
    ),
    "a graph-changing option": (
        edit_text("launch/serving.properties", "option.dtype=bf16", "option.dtype=bf16\noption.fuse_qkv=true"),
        "['option.fuse_qkv'] are not options this profile compiled with",
    ),
    # L/P compiled_path_validator: s3:// or a local directory, and the cache ROOT
    "file uri": (
        edit_text(
            "launch/serving.properties", "option.compiled_graph_path=s3://", "option.compiled_graph_path=file:///"
        ),
        "LMI reads only s3:// URIs and local paths",
    ),
    "compiler folder": (
        edit_text("launch/serving.properties", "/neuron-cache\n", "/neuron-cache/neuronxcc-2.16.372.0+4a9b2326\n"),
        "names a compiler folder: it must be the cache ROOT",
    ),
    # the split model folder (L set_neuron_model; transformers-neuronx module.py from_pretrained)
    "optimum export config": (
        edit_json("split/model/config.json", lambda d: d.update(neuron={"compiler_version": "2.16.372.0"})),
        "LMI would read the folder as an Optimum export",
    ),
    "no weights": (delete("split/model/model.safetensors"), "no model.safetensors or model.safetensors.index.json"),
    "no tokenizer": (delete("split/model/tokenizer.json"), "no tokenizer.json or tokenizer.model"),
    "no config": (delete("split/model/config.json"), "split/model/config.json: missing"),
    # the NEFFs
    "no entries": (edit_json("launch/neff-cache.json", lambda d: d.update(entries=[])), "lists no cache entries"),
    "other compiler": (
        edit_json("launch/neff-cache.json", lambda d: d.update(compiler_dir="neuronxcc-2.21.33363.0+82129205")),
        "runs 2.16.372.0+4a9b2326 and looks in neuronxcc-2.16.372.0+4a9b2326/",
    ),
    # the env form
    "env disagrees": (
        edit_text("launch/lmi.env", "OPTION_N_POSITIONS=64", "OPTION_N_POSITIONS=96"),
        "lmi.env and serving.properties disagree",
    ),
    # the image's NEURON_CC_FLAGS (pytorch-inf2.Dockerfile ENV) name every cache entry LMI looks up
    "env flags": (
        edit_text("launch/lmi.env", "OPTION_DTYPE=bf16", "OPTION_DTYPE=bf16\nNEURON_CC_FLAGS=-O3"),
        "LMI runs with NEURON_CC_FLAGS='-O3', but the NEFFs were compiled with '--logfile /tmp/compile.log",
    ),
    "compiled without the image's flags": (
        edit_json("launch/neff-cache.json", lambda d: d.update(neuron_cc_flags="")),
        "LMI runs with NEURON_CC_FLAGS='--logfile /tmp/compile.log --temp-dir=/tmp', but the NEFFs were compiled",
    ),
}


@pytest.mark.parametrize("case", sorted(BROKEN))
def test_each_broken_rule_is_named_by_preflight(artifact: Artifact, case: str) -> None:
    assert_named(PROFILE, artifact, BROKEN, case)


def test_a_file_store_names_local_paths_and_the_model_save_neffs(fake_tnx: Path, served_llama: Path, tmp_path: Path):
    """LMI takes no file:// URIs; a local compiled_graph_path is passed to model.load(dir), which
    reads `<hlo hash>.neff` files (transformers-neuronx base.py), so the properties name split/neff/.
    Also: an int8 target is the unquantized split model + option.quantize=static_int8."""
    store = open_store(f"file://{tmp_path / 'store'}")
    t = TargetSpec.parse(
        {
            "instance_type": "inf2.xlarge",
            "tp_degree": 2,
            "sequence_length": 64,
            "profile": "lmi-neuronx",
            "quantization": "int8:per_channel",
        }
    )
    out = run_target(str(served_llama), t, store, tmp_path / "work")
    root = tmp_path / "store" / out.published.prefix
    properties = parse_properties((root / "launch/serving.properties").read_text())
    # paths of LMI's container, which run-lmi.sh mounts wherever the store is (never this host's)
    assert properties["option.model_id"] == "/opt/ml/model/split/model"
    assert properties["option.compiled_graph_path"] == "/opt/ml/model/split/neff"
    assert "kind=local;" in (root / "launch/run-lmi.sh").read_text()
    assert properties["option.quantize"] == "static_int8"
    assert len(list((root / "split/neff").glob("*.neff"))) == len(out.published.manifest.compile["graphs"])
    assert (root / "split/model/model.safetensors").read_bytes() == (served_llama / "model.safetensors").read_bytes()
    assert PROFILE.preflight(Artifact.from_manifest(root, out.published.manifest)) == []
    assert out.published.manifest.smoke.passed


def test_a_load_that_would_compile_fails_the_smoke_test(published_s3: tuple, tmp_path: Path) -> None:
    """The smoke test loads through a cache holding only the entries the launch files name, pulled
    from the store: with one missing there, transformers-neuronx compiles it, and LMI would too."""
    from neuronforge.compilation.compile_cache import CompileCache
    from neuronforge.pipeline.stages.smoke import SmokeInput, smoke_test

    store, out, _, _ = published_s3
    payload = tmp_path / "payload"
    store.get_tree(out.published.prefix, payload)
    load = PROFILE.smoke_load(payload)
    assert load.model_dir == "split/model" and load.cache_entries and not load.settings["load_neffs"]
    partial = CompileCache(tmp_path / "partial", "neuronxcc", "2.16.372.0+4a9b2326", store)
    partial.preseed(list(load.cache_entries[1:]))  # the first entry is lost
    smoke = smoke_test(SmokeInput(payload, load, "tnx", partial, PROFILE.python()))
    assert not smoke.passed
    assert "graph(s) the published payload lacks" in smoke.reason and "would compile at start-up" in smoke.reason
    assert load.cache_entries[0] in smoke.reason


# -- the families LMI serves with transformers-neuronx -------------------------------------------------
# Each class as aws-neuron/transformers-neuronx 1ade6d74 defines it (neuronforge.compilation.backends.tnx.CLASSES):
# GPT2ForSampling, GPTJForSampling and GPTNeoXForSampling take no context_length_estimate (their config
# class raises KeyError on it); GPT-J / GPT-NeoX derive from module.PretrainedModel: no load(dir), no int8.
# L maybe_compile_model calls model.load(compiled_graph_path) on a local directory.
TINY = {
    "gpt2": {"model_type": "gpt2", "n_embd": 32, "n_layer": 2, "n_head": 4, "n_positions": 1024},
    "gptj": {"model_type": "gptj", "n_embd": 32, "n_layer": 2, "n_head": 4, "n_positions": 2048},
    "gpt_neox": {"model_type": "gpt_neox", "hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 4},
    "opt": {"model_type": "opt", "hidden_size": 32, "max_position_embeddings": 2048},
    "bloom": {"model_type": "bloom", "hidden_size": 32, "n_head": 4},
}


@pytest.mark.parametrize("model_type", sorted(TINY))
def test_each_family_gets_only_the_properties_its_class_takes(model_type: str) -> None:
    from neuronforge.compilation.backends.tnx import CLASSES, load_problems

    p = props(target(sequence_length=1024), TINY[model_type])
    assert ("option.context_length_estimate" in p) == CLASSES[model_type].context_length_estimate
    assert "option.group_query_attention" not in p  # llama, mistral, mixtral only
    load, problems = lmi_load(p, model_type)
    assert problems == [] and load is not None
    assert load_problems(load, TINY[model_type]) == []
    assert "continuous_batching" not in load.neuron_config  # LMI: naive rolling batch outside llama/mistral


@pytest.mark.parametrize(
    ("model_type", "kw", "expected"),
    [
        ("gpt2", {"context_encoding_buckets": [64]}, "GPT2ForSampling has no context_length_estimate"),
        ("gptj", {"context_encoding_buckets": [64]}, "GPTJForSampling has no context_length_estimate"),
        ("gpt_neox", {"quantization": "int8:per_channel"}, "GPTNeoXForSampling raises NotImplementedError"),
    ],
)
def test_the_plan_refuses_what_a_family_cannot_take(model_type: str, kw: dict, expected: str) -> None:
    problems = target_problems(PROFILE, target(**kw), model_type)
    assert any(expected in p for p in problems), problems


def test_settings_a_class_would_raise_on_fail_before_compiling() -> None:
    with pytest.raises(InvalidInput, match="exceeds the checkpoint's n_positions=1024"):
        PROFILE.compile_settings(target(), "gpt2", model_config=TINY["gpt2"])  # sequence_length 2048
    neox = {**TINY["gpt_neox"], "use_parallel_residual": False}
    with pytest.raises(InvalidInput, match="use_parallel_residual=False is not yet implemented"):
        PROFILE.compile_settings(target(sequence_length=64), "gpt_neox", model_config=neox)


@pytest.fixture(scope="module")
def gptj_file_store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, Path, Path]]:
    """A tiny GPT-J compiled by the tnx backend in the FAKE SDK 2.21.1 and assembled for a file://
    store by the backend and the profile alone (the file store's launch files as such, broken one rule at
    a time below; test_lmi_families_pipeline.py runs GPT-J through the whole pipeline). Yields
    (artifact root, compile cache root, compile log)."""
    from neuronforge.compilation.backends.base import CompileJob
    from neuronforge.compilation.backends.tnx import BACKEND
    from neuronforge.compilation.compile_cache import CompileCache
    from neuronforge.profiles.base import AssembleJob, LaunchContext
    from tests.backends.tiny_families import make_tiny
    from tests.conftest import use_fake_sdk

    base = tmp_path_factory.mktemp("lmi-gptj")
    checkpoint = make_tiny("gptj", base / "tiny-gptj")
    config = json.loads((checkpoint / "config.json").read_text())
    t = target(batch_size=2, sequence_length=64).normalized()
    with pytest.MonkeyPatch.context() as mp:
        use_fake_sdk(mp, "2.21.1", SDK_2_21_1, base)
        mp.setenv("FAKE_NEURON_COMPILE_LOG", str(base / "compiles.log"))
        cache = CompileCache(base / "neuron-cache", "neuronxcc", COMPILER)
        settings = PROFILE.compile_settings(t, "gptj", model_config=config)
        build = base / "build"
        BACKEND.compile(
            CompileJob(checkpoint, "gptj", t, build, cache, (), 300, base, settings, python=PROFILE.python())
        )
        root = base / "artifact"
        ctx = LaunchContext(t, TOOLCHAIN, f"file://{root}", f"file://{cache.root}", "gptj", config, build)
        PROFILE.assemble(AssembleJob(build, checkpoint, root, ctx))
        yield root, cache.root, base / "compiles.log"


COMPILER = "2.16.372.0+4a9b2326"
TOOLCHAIN = Toolchain("tnx", "0.13.380", "neuronxcc", COMPILER, {"transformers-neuronx": "0.13.380"})


def test_gptj_on_a_file_store_names_the_cache_not_a_model_save_folder(gptj_file_store: tuple) -> None:
    """GPTJForSampling has no load(dir), so a local compiled_graph_path would be an AttributeError in
    L maybe_compile_model: the properties name none, lmi.env points NEURON_COMPILE_CACHE_URL at the
    compile cache, and the smoke load reads that cache alone, compiling nothing."""
    from neuronforge.compilation.backends.base import GenerateJob
    from neuronforge.compilation.backends.tnx import BACKEND
    from neuronforge.compilation.compile_cache import CompileCache
    from neuronforge.profiles.base import read_env_file

    root, cache_root, log = gptj_file_store
    p = parse_properties((root / "launch/serving.properties").read_text())
    assert "option.compiled_graph_path" not in p and "option.context_length_estimate" not in p
    assert p["option.model_id"] == "/opt/ml/model/split/model" and p["option.max_rolling_batch_size"] == "2"
    # the container's cache run-lmi.sh fills, named by serving.properties itself (option.env) and lmi.env
    assert p["option.env"] == "NEURON_COMPILE_CACHE_URL=/opt/ml/model/neuron-cache"
    assert read_env_file(root / "launch/lmi.env")["NEURON_COMPILE_CACHE_URL"] == "/opt/ml/model/neuron-cache"
    assert not (root / "split/neff").exists()
    t = target(batch_size=2, sequence_length=64).normalized()
    assert PROFILE.preflight(Artifact(root, t, TOOLCHAIN)) == []

    load = PROFILE.smoke_load(root)
    assert not load.settings["load_neffs"] and load.cache_entries
    before = log.read_text()
    cache = CompileCache(cache_root, "neuronxcc", COMPILER)
    job = GenerateJob(root / load.model_dir, [[7, 5, 6]], 4, 300, cache, load.settings, python=PROFILE.python())
    with pytest.MonkeyPatch.context() as mp:
        from tests.conftest import use_fake_sdk

        use_fake_sdk(mp, "2.21.1", SDK_2_21_1, root.parent)
        mp.setenv("FAKE_NEURON_COMPILE_LOG", str(log))
        result = BACKEND.generate(job)
    assert len(result["rows"][0]["tokens"]) == 4 and log.read_text() == before


PROPS = "launch/serving.properties"
GPTJ_BROKEN: dict[str, tuple[Callable[[Path], None], str]] = {
    "local compiled_graph_path": (
        edit_text(PROPS, "engine=Python", "engine=Python\noption.compiled_graph_path=/m/neff"),
        "has no load (AttributeError",
    ),
    "context_length_estimate": (
        edit_text(PROPS, "engine=Python", "engine=Python\noption.context_length_estimate=64"),
        'Found invalid key "context_length_estimate"',
    ),
    "static_int8": (
        edit_text(PROPS, "engine=Python", "engine=Python\noption.quantize=static_int8"),
        "Support for quantization is not yet implemented",
    ),
    "no cache url": (
        edit_text("launch/lmi.env", "NEURON_COMPILE_CACHE_URL=", "NEURON_COMPILE_CACHE_URLX="),
        "lmi.env: NEURON_COMPILE_CACHE_URL=None",
    ),
    "a path of the publishing host": (
        edit_text(PROPS, "option.model_id=/opt/ml/model/split/model", "option.model_id=/home/me/nf/a/split/model"),
        "option.model_id='/home/me/nf/a/split/model' is not the path LMI's container sees",
    ),
    "no option.env": (
        edit_text(PROPS, "option.env=NEURON_COMPILE_CACHE_URL=", "option.envx=NEURON_COMPILE_CACHE_URL="),
        "option.env does not set NEURON_COMPILE_CACHE_URL=/opt/ml/model/neuron-cache",
    ),
    "no run-lmi.sh": (delete("launch/run-lmi.sh"), "launch/run-lmi.sh: missing: nothing mounts the artifact"),
}


@pytest.mark.parametrize("case", sorted(GPTJ_BROKEN))
def test_what_lmi_or_gptj_would_reject_is_named_by_preflight(gptj_file_store: tuple, case: str, tmp_path: Path) -> None:
    import shutil

    root = tmp_path / "artifact"
    shutil.copytree(gptj_file_store[0], root)
    t = target(batch_size=2, sequence_length=64).normalized()
    assert_named(PROFILE, Artifact(root, t, TOOLCHAIN), GPTJ_BROKEN, case)


def test_dynamic_batching_env_file_carries_the_front_ends_batch_size(tmp_path: Path) -> None:
    """djl-serving afece25d ModelInfo.configPerModelSettings: with rolling_batch=disable the front end
    batches `batch_size` requests (the model's property, else the server's SERVING_BATCH_SIZE);
    OPTION_BATCH_SIZE only reaches the handler. lmi.env alone must carry the front end's size too,
    and preflight names an env file without it."""
    from neuronforge.compilation.backends.tnx import LOAD_FILE
    from neuronforge.profiles.base import LaunchContext
    from neuronforge.profiles.lmi_neuronx import ENV_FILE, PROPERTIES_FILE, parse_properties, read_env_file

    build = tmp_path / "build"
    build.mkdir()
    from neuronforge.profiles.lmi_neuronx import LMI_CC_FLAGS

    record = {"model_type": "llama", "kwargs": {}, "cache_entries": [], "neuron_cc_flags": LMI_CC_FLAGS}
    (build / LOAD_FILE).write_text(json.dumps(record))
    t = target(backend_options={"rolling_batch": "disable"}).normalized()
    ctx = LaunchContext(t, TOOLCHAIN, "s3://b/artifacts/k", "s3://b/neuron-cache", "llama", LLAMA, build)
    files = PROFILE.launch_spec(ctx)
    launch = tmp_path / "launch"
    launch.mkdir()
    for name, text in files.items():
        (launch / name).write_text(text)
    env = read_env_file(launch / ENV_FILE)
    assert env["SERVING_BATCH_SIZE"] == env["OPTION_BATCH_SIZE"] == "4"
    properties = parse_properties(files[PROPERTIES_FILE])
    cache = NeffCacheRecord.from_json(json.loads(files["neff-cache.json"]))
    assert not PROFILE._env_problems(launch, properties, cache)
    (launch / ENV_FILE).write_text(files[ENV_FILE].replace("SERVING_BATCH_SIZE=4\n", ""))
    assert any("SERVING_BATCH_SIZE=None" in p for p in PROFILE._env_problems(launch, properties, cache))
    # rolling batch: the front end does not batch, nothing to carry
    rolling = PROFILE.launch_spec(LaunchContext(target(), TOOLCHAIN, "s3://b/a/k", "s3://b/c", "llama", LLAMA, build))
    assert "SERVING_BATCH_SIZE" not in rolling[ENV_FILE]


def test_a_graph_shaping_variable_the_profile_does_not_set_is_refused_before_compiling() -> None:
    """XLA_* and NEURON_CC_FLAGS change the compiled graphs; the compile's child inherits the worker's
    environment, so one the backend does not set itself would go unrecorded: refused, named."""
    from neuronforge.compilation.backends.base import graph_env

    declared = {"NEURON_CC_FLAGS": "-O1", "NEURON_COMPILE_CACHE_URL": "/c", "NEURON_PLATFORM_TARGET_OVERRIDE": "trn1"}
    recorded = {"NEURON_CC_FLAGS": "-O1", "NEURON_PLATFORM_TARGET_OVERRIDE": "trn1"}
    # the worker's own NEURON_CC_FLAGS is replaced by the declared one: fine
    assert graph_env(declared, {"NEURON_CC_FLAGS": "-O3", "PATH": "/bin"}) == recorded
    stray = r"^compile: XLA_FLAGS='--x' is set in the worker's environment.*also \['XLA_USE_BF16'\]"
    with pytest.raises(InvalidInput, match=stray):
        graph_env(declared, {"XLA_USE_BF16": "1", "XLA_FLAGS": "--x"})
    with pytest.raises(InvalidInput, match="NEURON_CC_FLAGS='-O3'"):
        graph_env({"NEURON_COMPILE_CACHE_URL": "/c"}, {"NEURON_CC_FLAGS": "-O3"})
    assert graph_env(declared, {"XLA_USE_BF16": ""}) == recorded  # empty: unset


def test_run_lmi_says_in_one_line_what_it_cannot_find(gptj_file_store: tuple, tmp_path: Path) -> None:
    """run-lmi.sh finds the store from where the artifact is; an artifact copied out of its store needs
    STORE_ROOT (GPT-J's NEFFs are in the store's cache, not in the artifact), and says so in one line."""
    import os
    import shutil
    import subprocess
    import sys

    from tests.profiles.lmi_host import run_lmi_print

    root, cache_root, _log = gptj_file_store
    alone = tmp_path / "copied" / "a-copy"
    shutil.copytree(root, alone)
    env = {"PATH": os.environ["PATH"], "LMI_RUN_DIR": str(tmp_path / "run"), "HOME": str(tmp_path)}
    done, run = run_lmi_print(alone / "launch", env)
    assert run is None and done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr
    assert done.stderr.startswith(f"run-lmi.sh: {alone} is not at artifact in a store: set STORE_ROOT")
    done, run = run_lmi_print(alone / "launch", {**env, "STORE_ROOT": str(cache_root.parent)})
    assert run is not None, done.stderr
    assert run.host_path("/opt/ml/model/split/model") == alone / "split" / "model"
    assert run.host_path("/opt/ml/model/neuron-cache") == tmp_path / "run" / "neuron-cache"
    entries = json.loads((root / "launch/neff-cache.json").read_text())
    for entry in entries["entries"]:  # copied whole from the store's cache
        assert (tmp_path / "run" / "neuron-cache" / entries["compiler_dir"] / entry / "model.done").is_file()
    done, run = run_lmi_print(alone / "launch", {**env, "STORE_ROOT": str(tmp_path / "nowhere")})
    assert done.returncode == 2 and "is not a complete NEFF cache entry (no model.done)" in done.stderr
    # without --print the command runs: without Docker, one line that says so
    bare = tmp_path / "bin"
    bare.mkdir()
    for tool in ("bash", "cat", "cp", "dirname", "mkdir", "mv", "rm"):
        (bare / tool).symlink_to(shutil.which(tool, path="/usr/bin:/bin") or tool)
    (bare / "python3").symlink_to(sys.executable)
    started = subprocess.run(
        ["bash", str(alone / "launch" / "run-lmi.sh")],
        env={**env, "PATH": str(bare), "STORE_ROOT": str(cache_root.parent)},
        capture_output=True,
        text=True,
        check=False,
    )
    assert started.returncode == 2
    assert started.stderr == "run-lmi.sh: docker is not on PATH: run the command above where Docker is\n"
    assert started.stdout.startswith("docker run --rm -p 8080:8080 --device /dev/neuron0 -v ")


def test_run_lmi_of_an_s3_artifact_mounts_only_the_run_folder(artifact: Artifact, tmp_path: Path) -> None:
    """An s3:// store: LMI reads the URIs itself, so run-lmi.sh mounts only the run folder (the published
    serving.properties and lmi.env, as they are) and passes the AWS variables the host has, by name."""
    import os

    from tests.profiles.lmi_host import run_lmi_print

    launch = artifact.root / "launch"
    env = {"PATH": os.environ["PATH"], "LMI_RUN_DIR": str(tmp_path / "run"), "AWS_REGION": "us-west-2"}
    done, run = run_lmi_print(launch, env)
    assert run is not None, done.stderr
    assert run.mounts == ((tmp_path / "run", "/opt/ml/model", False),) and run.env_file == tmp_path / "run" / "lmi.env"
    assert " -e AWS_REGION " in done.stdout and "us-west-2" not in done.stdout  # the name only
    for name in ("serving.properties", "lmi.env"):
        assert (tmp_path / "run" / name).read_text() == (launch / name).read_text()
