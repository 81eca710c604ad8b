"""The nxdi backend against the FAKE Neuron toolchain in tests/fakes (see its README)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from neuronforge.common.errors import InvalidInput
from neuronforge.compilation.backends.base import CompileJob
from neuronforge.compilation.backends.child import ChildFailed
from neuronforge.compilation.backends.nxdi import BACKEND, neuron_config_kwargs
from neuronforge.compilation.compile_cache import CacheUse, CompileCache
from neuronforge.profiles.registry import compile_request, detect_toolchain, get_profile
from neuronforge.profiles.request import cache_key
from neuronforge.spec.source import ModelSource
from neuronforge.spec.target import TargetSpec
from neuronforge.stores import open_store

VERSION = "2.21.33363.0+82129205"  # neuronxcc.__version__ of SDK 2.26.1, local label included


def target(**kw) -> TargetSpec:
    base = {
        "instance_type": "trn1.32xlarge",
        "tp_degree": 8,
        "batch_size": 4,
        "sequence_length": 2048,
        "profile": "vllm-neuron@2.26.1",
    }
    return TargetSpec.parse({**base, **kw})


def test_every_target_field_reaches_neuron_config() -> None:
    t = target(
        max_context_length=1024,
        dtype="fp16",
        context_encoding_buckets=[512, 1024],
        token_generation_buckets=[2048],
        backend_options={"fused_qkv": False},
    )
    kw = neuron_config_kwargs(t)
    assert kw == {
        "tp_degree": 8,
        "batch_size": 4,
        "seq_len": 2048,
        "max_context_length": 1024,
        "torch_dtype": "float16",
        "logical_nc_config": 1,
        "enable_bucketing": True,
        "context_encoding_buckets": [512, 1024],
        "token_generation_buckets": [2048],
        "fused_qkv": False,
        "on_device_sampling_config": {"do_sample": False},
        "save_sharded_checkpoint": True,
    }
    assert neuron_config_kwargs(target(instance_type="trn2.48xlarge"))["logical_nc_config"] == 2


def test_quantized_target_points_at_the_quantized_checkpoint(tmp_path: Path) -> None:
    t = target(quantization="f8e4m3:per_channel")
    with pytest.raises(InvalidInput, match="needs the quantized checkpoint"):
        neuron_config_kwargs(t)
    kw = neuron_config_kwargs(t, quantized_checkpoint=tmp_path)
    assert (kw["quantized"], kw["quantization_dtype"], kw["quantization_type"]) == (
        True,
        "f8e4m3",
        "per_channel_symmetric",
    )
    assert kw["quantized_checkpoints_path"] == str(tmp_path)


def test_unknown_options_and_architectures_are_refused(tiny_llama: Path, tmp_path: Path) -> None:
    with pytest.raises(InvalidInput, match="unknown backend_options"):
        neuron_config_kwargs(target(backend_options={"turbo": True}))
    # options a serving profile maps itself are left to it, and named among the known ones
    t = target(backend_options={"prefix_caching": True})
    assert "prefix_caching" not in neuron_config_kwargs(t, handled={"prefix_caching"})
    with pytest.raises(InvalidInput, match=r"known: .*'prefix_caching'"):
        neuron_config_kwargs(target(backend_options={"turbo": True}), handled={"prefix_caching"})
    from neuronforge.compilation.backends.nxdi import architecture

    with pytest.raises(InvalidInput, match="no NxD Inference model class for model_type 'gpt2'"):
        architecture("gpt2")


def test_toolchain_is_detected_and_keyed(fake_neuron: Path) -> None:
    tc = detect_toolchain("vllm-neuron@2.26.1", "--model-type transformer")
    assert (tc.backend_version, tc.compiler, tc.compiler_version) == ("0.6.10598", "neuronxcc", VERSION)
    request = compile_request(ModelSource.parse("org/m").pinned("a" * 40), target())
    bumped = type(tc)(tc.backend, tc.backend_version, tc.compiler, "2.22.12471.0", tc.packages, tc.compiler_flags)
    assert cache_key(request, tc) != cache_key(request, bumped)


def compile_nxdi(
    checkpoint: Path,
    model_type: str,
    t: TargetSpec,
    out: Path,
    cache: CompileCache,
    flags: tuple[str, ...],
    timeout_s: float,
    preseed: list[str] | None = None,
) -> CacheUse:
    """The backend's compile in the SDK 2.26.1 toolchain interpreter (the fake's, named by the
    fixture), returning which cache entries it created and reused."""
    job = CompileJob(
        checkpoint,
        model_type,
        t,
        out,
        cache,
        flags,
        timeout_s,
        out.parent,
        preseed=preseed,
        python=get_profile(t.profile).python(),
    )
    return BACKEND.compile_use(job)


def _compile(
    tiny_llama: Path, root: Path, store, t: TargetSpec, preseed: list[str] | None = None
) -> tuple[CacheUse, CompileCache, Path]:
    cache = CompileCache(root, "neuronxcc", VERSION, store)
    out = root.parent / "out"
    use = compile_nxdi(tiny_llama, "llama", t, out, cache, ("-O1",), timeout_s=300, preseed=preseed)
    return use, cache, out


def test_compile_in_a_child_writes_the_cache_and_sync_uploads_only_complete_entries(
    fake_neuron: Path, tiny_llama: Path, tmp_path: Path
) -> None:
    store = open_store(f"file://{tmp_path / 'store'}")
    t = target(tp_degree=2, instance_type="inf2.xlarge")
    use, cache, out = _compile(tiny_llama, tmp_path / "a" / "cache", store, t)
    assert use.failed == ["MODULE_00000000000000000bad+00000000"] and use.reused == []
    # InferenceConfig.save (models/config.py @ v0.6.10598): the whole config, dtypes by bare name
    record = json.loads((out / "neuron_config.json").read_text())
    assert record["architectures"] == ["LlamaForCausalLM"] and "router_config" not in record["neuron_config"]
    assert record["neuron_config"]["tp_degree"] == 2 and record["neuron_config"]["torch_dtype"] == "bfloat16"
    assert sorted(p.name for p in (out / "weights").iterdir()) == [
        "tp0_sharded_checkpoint.safetensors",
        "tp1_sharded_checkpoint.safetensors",
    ]
    good = use.created
    assert len(good) == 2 and all(c.endswith("+" + hashlib.md5(b"-O1").hexdigest()[:8]) for c in good)

    report = cache.sync_to_store()
    assert sorted(report.uploaded) == sorted(good)
    assert report.failed == ["MODULE_00000000000000000bad+00000000"]
    keys = [o.key for o in store.list(f"neuron-cache/neuronxcc-{VERSION}")]
    assert not any(k.endswith(".lock") for k in keys) and not any("0bad" in k for k in keys)
    for name in good:
        files = {k.rsplit("/", 1)[-1] for k in keys if f"/{name}/" in k}
        assert files == {"model.hlo_module.pb", "model.neff", "compile_flags.json", "model.done"}
    assert cache.sync_to_store().already_present == sorted(good)


def test_a_second_worker_is_preseeded_with_the_graph_set_and_never_recompiles(
    fake_neuron: Path, tiny_llama: Path, tmp_path: Path
) -> None:
    store = open_store(f"file://{tmp_path / 'store'}")
    t = target(tp_degree=2, instance_type="inf2.xlarge")
    unrelated = tmp_path / "other" / f"neuronxcc-{VERSION}" / "MODULE_11111111111111111111+d41d8cd9"
    unrelated.mkdir(parents=True)
    (unrelated / "model.neff").write_bytes(b"another model's graph")
    (unrelated / "model.done").write_text("")
    store.put_tree(tmp_path / "other", "neuron-cache")
    first_use, first, _ = _compile(tiny_llama, tmp_path / "a" / "cache", store, t)
    assert not (first.entry(unrelated.name)).exists()  # nothing recorded for these graphs: no pre-seed
    first.sync_to_store()
    assert first.record_graph_set("g" * 64, first_use.used)
    assert len(fake_neuron.read_text().splitlines()) == 2

    second_cache = CompileCache(tmp_path / "b" / "cache", "neuronxcc", VERSION, store)
    recorded = second_cache.graph_set("g" * 64)
    assert recorded == first_use.created
    second, cache_b, _ = _compile(tiny_llama, tmp_path / "b" / "cache", store, t, preseed=recorded)
    assert len(fake_neuron.read_text().splitlines()) == 2  # no new compiler invocation
    assert second.created == [] and second.reused == first_use.created  # named in the compiler's log
    assert not cache_b.entry(unrelated.name).exists()  # only the graph set's entries were pulled


def test_graph_sets_are_shared_by_fine_tunes_but_not_by_other_shapes() -> None:
    from neuronforge.compilation.compile_cache import graph_set_key

    config = {"model_type": "llama", "hidden_size": 4096, "_name_or_path": "/a", "transformers_version": "4.57.6"}
    tc = {"compiler_version": VERSION}
    t = target().normalized().model_dump(mode="json")
    same = graph_set_key({**config, "_name_or_path": "/b", "transformers_version": "4.58"}, t, tc)
    assert graph_set_key(config, t, tc) == same
    assert graph_set_key(config, target(batch_size=8).normalized().model_dump(mode="json"), tc) != same
    assert graph_set_key({**config, "hidden_size": 2048}, t, tc) != same
    assert graph_set_key(config, t, {"compiler_version": "2.22.12471.0"}) != same


def test_a_graph_set_is_recorded_only_when_all_its_entries_are_in_the_store(tmp_path: Path) -> None:
    store = open_store(f"file://{tmp_path / 'store'}")
    cache = CompileCache(tmp_path / "cache", "neuronxcc", VERSION, store)
    assert not cache.record_graph_set("k" * 64, ["MODULE_22222222222222222222+d41d8cd9"])
    assert cache.graph_set("k" * 64) is None


def test_moe_models_get_the_moe_config(fake_neuron: Path, tmp_path: Path) -> None:
    from neuronforge.spec.tinymodel import make_tiny_llama

    ck = make_tiny_llama(tmp_path / "m")
    cache = CompileCache(tmp_path / "cache", "neuronxcc", VERSION, None)
    compile_nxdi(ck, "mixtral", target(), tmp_path / "out", cache, (), timeout_s=300)
    # MixtralInferenceConfig.get_neuron_config_cls() is MoENeuronConfig: its MoE fields are saved
    record = json.loads((tmp_path / "out" / "neuron_config.json").read_text())
    assert record["neuron_config"]["router_config"] == {"act_fn": "softmax", "dtype": "float32"}
    assert record["neuron_config"]["moe_tp_degree"] == 1 and record["neuron_config"]["glu_mlp"] is True


def test_a_hung_compile_is_killed_at_the_timeout(
    fake_neuron: Path, tiny_llama: Path, tmp_path: Path, monkeypatch
) -> None:
    monkeypatch.setenv("FAKE_NEURON_SLEEP", "60")
    cache = CompileCache(tmp_path / "cache", "neuronxcc", VERSION, None)
    with pytest.raises(ChildFailed, match="did not finish within 3s; killed"):
        compile_nxdi(tiny_llama, "llama", target(), tmp_path / "out", cache, (), timeout_s=3)


def test_a_failing_compile_reports_the_child_output(fake_neuron: Path, tmp_path: Path) -> None:
    cache = CompileCache(tmp_path / "cache", "neuronxcc", VERSION, None)
    with pytest.raises(ChildFailed, match=r"failed \(exit 1\)") as exc:
        compile_nxdi(tmp_path / "missing", "llama", target(), tmp_path / "out", cache, (), timeout_s=60)
    assert "config.json" in str(exc.value)
