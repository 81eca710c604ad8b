"""The optimum backend (profile `optimum-neuron`): its mapping and refusals, and the whole pipeline
through the FAKE `optimum.neuron` entry point + FAKE Neuron SDK (tests/fakes), read back with the REAL
optimum-neuron. The profile's own contract tests are in tests/profiles/test_optimum_neuron.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from neuronforge.common.errors import InvalidInput
from neuronforge.compilation.backends.base import neuron_compile_env
from neuronforge.compilation.backends.optimum import export_kwargs, unsupported
from neuronforge.pipeline.planner import PlanRejected, plan
from neuronforge.pipeline.runner import run_target
from neuronforge.spec.target import TargetSpec
from neuronforge.spec.toolchain import Toolchain
from neuronforge.stores import open_store

VERSION = "2.21.33363.0+82129205"  # neuronx-cc of SDK 2.26.1 (the profile's pin), full version


def target(**kw) -> TargetSpec:
    base = {"instance_type": "inf2.xlarge", "tp_degree": 2, "batch_size": 1, "sequence_length": 64, "dtype": "fp32"}
    return TargetSpec.parse({**base, "profile": "optimum-neuron", **kw})


@pytest.fixture
def checkpoint(tmp_path: Path) -> Path:
    """A tiny Llama with its tokenizer: `optimum-cli neuron serve` (vLLM) loads it from the folder."""
    from neuronforge.spec.tinymodel import make_tiny_llama

    return make_tiny_llama(tmp_path / "tiny-llama", tokenizer=True)


def test_every_target_field_reaches_get_neuron_config() -> None:
    assert export_kwargs(target(batch_size=4, sequence_length=128, dtype="bf16")) == {
        "instance_type": "inf2",
        "batch_size": 4,
        "sequence_length": 128,
        "tensor_parallel_size": 2,
        "dtype": "bfloat16",
    }
    assert export_kwargs(target(instance_type="trn2.48xlarge", tp_degree=4))["instance_type"] == "trn2"


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"context_encoding_buckets": [32, 64]}, "no bucket parameters"),
        ({"max_context_length": 32}, "max_context_length=32 must equal sequence_length"),
        ({"quantization": "int8:per_channel_symmetric"}, "does not export quantized decoders"),
        ({"instance_type": "trn2.48xlarge", "logical_nc_config": 1}, "logical_nc_config=1 is not configurable"),
        ({"backend_options": {"fused_qkv": False}}, "takes no backend_options"),
    ],
)
def test_what_optimum_cannot_express_is_refused_before_any_work(fields: dict, message: str) -> None:
    t = target(**fields)
    assert any(message in p for p in unsupported(t))
    with pytest.raises(InvalidInput, match=message):
        export_kwargs(t)


def test_the_planner_reports_the_refusals(tiny_llama: Path) -> None:
    from neuronforge.checkpoints.checkpoint import verify_checkpoint

    verified = verify_checkpoint(tiny_llama)
    result = plan(verified.arch, target(context_encoding_buckets=[32, 64]), tensors=verified.tensors)
    assert not result.ok and any("use profile vllm-neuron for buckets" in p for p in result.problems)


def test_cross_compiling_sets_the_platform_override(tmp_path: Path) -> None:
    env = neuron_compile_env(target(instance_type="trn2.48xlarge", tp_degree=4), tmp_path, ("-O1",))
    assert env == {
        "NEURON_COMPILE_CACHE_URL": str(tmp_path),
        "NEURON_CC_FLAGS": "-O1",
        "NEURON_PLATFORM_TARGET_OVERRIDE": "trn2",
    }
    assert (
        neuron_compile_env(target(), tmp_path, ())["NEURON_PLATFORM_TARGET_OVERRIDE"] == "trn1"
    )  # optimum: inf2 -> trn1


def test_export_smoke_and_publish_read_back_by_the_real_optimum_neuron(
    fake_optimum: Path, checkpoint: Path, tmp_path: Path
) -> None:
    import optimum.neuron
    from optimum.neuron.models.inference.backend.config import NxDNeuronConfig

    from neuronforge.profiles.base import Artifact
    from neuronforge.profiles.optimum_neuron import PROFILE, read_neuron_config

    assert "fakes" not in optimum.neuron.__file__  # this process reads with the real package
    store = open_store(f"file://{tmp_path / 'store'}")
    out = run_target(str(checkpoint), target(batch_size=2), store, tmp_path / "work")
    assert out.status == "published" and out.compiler_invocations == 2
    assert len(fake_optimum.read_text().splitlines()) == 2
    manifest = out.published.manifest.to_json()  # as stored
    assert manifest["toolchain"]["packages"]["optimum-neuron"] == "0.4.5"
    assert manifest["toolchain"]["compiler_version"] == VERSION
    assert manifest["profile"]["ref"] == "optimum-neuron@2.26.1"
    assert manifest["toolchain"]["worker"]["architectures"] == sorted(
        ["granite", "llama", "llama4_text", "mixtral", "phi3", "qwen2", "qwen3", "qwen3_moe", "smollm3"]
    )
    assert manifest["smoke"]["passed"], manifest["smoke"]
    sync = manifest["compile"]["cache_sync"]  # the failed entry the fake compiler leaves is reported
    assert sync["failed"] == ["MODULE_00000000000000000bad+00000000"] and sync["graph_set_recorded"]
    assert set(manifest["formats"]) == {"optimum-neuron", "launch"}

    dl = tmp_path / "dl"
    store.get_tree(out.published.prefix, dl)
    # The real reader; it compares neuronxcc_version with neuronxcc.__version__ (the serving host's: the pin).
    nc, why = read_neuron_config(dl / "optimum-neuron")
    assert why is None and isinstance(nc, NxDNeuronConfig), why
    assert (nc.tp_degree, nc.batch_size, nc.sequence_length, nc.target) == (2, 2, 64, "trn1")
    assert str(nc.torch_dtype) == "torch.float32" and nc.continuous_batching and nc.on_device_sampling
    assert (dl / "optimum-neuron/model.pt").exists() and (dl / "optimum-neuron/config.json").exists()
    assert sorted(p.name for p in (dl / "optimum-neuron/checkpoint/weights").iterdir()) == [
        "tp0_sharded_checkpoint.safetensors",
        "tp1_sharded_checkpoint.safetensors",
    ]
    assert sorted(p.name for p in (dl / "launch").iterdir()) == ["load.py", "optimum-neuron.env", "serve.sh"]
    assert f"MODEL_URI={out.published.uris['optimum-neuron']}\n" in (dl / "launch/optimum-neuron.env").read_text()
    assert "--tensor_parallel_size 2 --batch_size 2 --sequence_length 64" in (dl / "launch/serve.sh").read_text()
    assert not (dl / "lmi").exists() and not (dl / "tnx").exists() and not (dl / "optimum").exists()
    # What `neuronforge verify` does with a downloaded artifact: the profile's preflight again.
    assert PROFILE.preflight(Artifact.from_manifest(dl, out.published.manifest)) == []


def test_a_second_target_reuses_the_cache(fake_optimum: Path, checkpoint: Path, tmp_path: Path) -> None:
    """A fresh worker (new work dir) pre-seeded from the store compiles nothing."""
    store = open_store(f"file://{tmp_path / 'store'}")
    run_target(str(checkpoint), target(), store, tmp_path / "w1")
    store.delete_prefix("index")  # forget the artifact, keep the compile cache
    store.delete_prefix("artifacts")
    again = run_target(str(checkpoint), target(), store, tmp_path / "w2")
    assert again.status == "published" and again.compiler_invocations == 0
    assert len(fake_optimum.read_text().splitlines()) == 2
    assert all(g["cached"] for g in again.published.manifest.compile["graphs"])


def test_an_export_its_consumer_would_refuse_is_not_published(
    fake_optimum: Path, checkpoint: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """publish runs the profile's preflight before uploading: a checkpoint without a tokenizer
    would not start under `optimum-cli neuron serve`, so nothing reaches the store."""
    from neuronforge.pipeline.stages.payload import PreflightFailed

    for name in ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"):
        (checkpoint / name).unlink()
    store = open_store(f"file://{tmp_path / 'store'}")
    with pytest.raises(PreflightFailed, match=r"no tokenizer\.json or tokenizer\.model"):
        run_target(str(checkpoint), target(), store, tmp_path / "work")
    assert store.list("artifacts") == [] and store.list("index") == []


def test_a_target_the_worker_toolchain_cannot_build_fails_in_the_plan(
    fake_optimum: Path, tiny_llama: Path, tmp_path: Path
) -> None:
    from neuronforge.pipeline.stages.plan import check_plan

    old = Toolchain(
        "optimum", "0.4.5", "neuronxcc", "2.15.128.0", {"optimum-neuron": "0.4.5"}, (), {"architectures": ["qwen2"]}
    )
    with pytest.raises(PlanRejected) as exc:
        check_plan(tiny_llama, target(instance_type="trn2.48xlarge", tp_degree=1), old)
    message = str(exc.value)
    assert "neuronx-cc 2.15.128.0 on this worker cannot compile for trn2 (needs >= 2.16" in message
    assert "has no modeling code for llama (it has: qwen2)" in message
    assert "profile optimum-neuron@2.26.1 needs neuronx-cc 2.21.33363.0+82129205; the worker has 2.15.128.0" in message
    current = Toolchain(
        "optimum", "0.4.5", "neuronxcc", VERSION, {"optimum-neuron": "0.4.5"}, (), {"architectures": ["llama"]}
    )
    assert any(c.name == "toolchain" and c.ok for c in check_plan(tiny_llama, target(), current).checks)
