"""The optimum backend: its mapping and refusals, and the whole pipeline through the FAKE
`optimum.neuron` entry point + FAKE Neuron SDK (tests/fakes), read back with the REAL optimum-neuron."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from neuronforge.backends.optimum import child_env, export_kwargs, unsupported
from neuronforge.errors import InvalidInput
from neuronforge.pipeline import PlanRejected, run_target
from neuronforge.planner import plan
from neuronforge.request import Toolchain
from neuronforge.stores import open_store
from neuronforge.target import TargetSpec

VERSION = "2.21.33363.0"


def target(**kw) -> TargetSpec:
    base = {"instance_type": "inf2.xlarge", "tp_degree": 2, "batch_size": 1, "sequence_length": 64, "dtype": "fp32"}
    return TargetSpec.parse({**base, "backend": "optimum", **kw})


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
    from neuronforge.checkpoint import verify_checkpoint

    verified = verify_checkpoint(tiny_llama)
    result = plan(verified.arch, target(context_encoding_buckets=[32, 64]), tensors=verified.tensors)
    assert not result.ok and any("use backend nxdi for buckets" in p for p in result.problems)


def test_cross_compiling_sets_the_platform_override(tmp_path: Path) -> None:
    env = child_env(target(instance_type="trn2.48xlarge", tp_degree=4), tmp_path, ("-O1",))
    assert env == {
        "NEURON_COMPILE_CACHE_URL": str(tmp_path),
        "NEURON_CC_FLAGS": "-O1",
        "NEURON_PLATFORM_TARGET_OVERRIDE": "trn2",
    }
    assert child_env(target(), tmp_path, ())["NEURON_PLATFORM_TARGET_OVERRIDE"] == "trn1"  # optimum: inf2 -> trn1


def test_export_smoke_and_publish_read_back_by_the_real_optimum_neuron(
    fake_optimum: Path, tiny_llama: Path, tmp_path: Path
) -> None:
    import optimum.neuron
    from optimum.neuron.models.inference.backend.config import NxDNeuronConfig

    assert "fakes" not in optimum.neuron.__file__  # this process reads with the real package
    store = open_store(f"file://{tmp_path / 'store'}")
    out = run_target(str(tiny_llama), target(batch_size=2), store, tmp_path / "work", formats=("optimum", "lmi", "tnx"))
    assert out.status == "published" and out.compiler_invocations == 2
    assert len(fake_optimum.read_text().splitlines()) == 2
    manifest = out.published.manifest
    assert manifest["toolchain"]["packages"]["optimum-neuron"] == "0.4.5"
    assert manifest["toolchain"]["worker"]["architectures"] == sorted(
        ["granite", "llama", "llama4_text", "mixtral", "phi3", "qwen2", "qwen3", "qwen3_moe", "smollm3"]
    )
    assert manifest["smoke"]["passed"], manifest["smoke"]
    sync = manifest["compile"]["cache_sync"]  # the failed entry the fake compiler leaves is reported
    assert sync["failed"] == ["MODULE_00000000000000000bad+00000000"] and sync["graph_set_recorded"]

    dl = tmp_path / "dl"
    store.get_tree(out.published.prefix, dl)
    nc = NxDNeuronConfig.from_pretrained(dl / "optimum")  # real reader: checks the optimum/neuronx-cc versions
    assert (nc.tp_degree, nc.batch_size, nc.sequence_length, nc.target) == (2, 2, 64, "trn1")
    assert str(nc.torch_dtype) == "torch.float32" and nc.continuous_batching and nc.on_device_sampling
    assert (dl / "optimum/model.pt").exists() and (dl / "optimum/config.json").exists()
    assert sorted(p.name for p in (dl / "optimum/checkpoint/weights").iterdir()) == [
        "tp0_sharded_checkpoint.safetensors",
        "tp1_sharded_checkpoint.safetensors",
    ]
    props = (dl / "lmi/serving.properties").read_text()
    assert "option.model_loader=optimum\n" in props and "option.max_rolling_batch_size=2\n" in props

    # The older layout LMI's transformers-neuronx loader detects: "neuron" block, no root weights, compiled/.
    tnx_config = json.loads((dl / "tnx/config.json").read_text())
    assert tnx_config["neuron"] == {
        "task": "text-generation",
        "batch_size": 2,
        "num_cores": 2,
        "auto_cast_type": "fp32",
        "sequence_length": 64,
        "compiler_type": "neuronx-cc",
        "compiler_version": VERSION,
        "checkpoint_id": str(tiny_llama),
        "checkpoint_revision": manifest["source"]["revision"],
    }
    assert not list((dl / "tnx").glob("*.safetensors")) and list((dl / "tnx/checkpoint").glob("*.safetensors"))
    neffs = sorted(p.name for p in (dl / "tnx/compiled").iterdir())
    entries = [g["entry"] for g in manifest["compile"]["graphs"]]
    assert neffs == sorted(e.removeprefix("MODULE_").split("+")[0] + ".neff" for e in entries) and len(neffs) == 2


def test_a_second_target_reuses_the_cache_and_the_tnx_layout_still_has_every_neff(
    fake_optimum: Path, tiny_llama: Path, tmp_path: Path
) -> None:
    """A fresh worker (new work dir) pre-seeded from the store compiles nothing, and the tnx layout
    still gets every NEFF: the entries the compiler reused are read from its log."""
    store = open_store(f"file://{tmp_path / 'store'}")
    run_target(str(tiny_llama), target(), store, tmp_path / "w1", formats=("optimum",))
    store.delete_prefix("index")  # forget the artifact, keep the compile cache
    store.delete_prefix("artifacts")
    again = run_target(str(tiny_llama), target(), store, tmp_path / "w2", formats=("optimum", "tnx"))
    assert again.status == "published" and again.compiler_invocations == 0
    assert len(fake_optimum.read_text().splitlines()) == 2
    assert all(g["cached"] for g in again.published.manifest["compile"]["graphs"])
    tnx = [f["path"] for f in again.published.manifest["files"] if f["path"].startswith("tnx/compiled/")]
    assert len(tnx) == 2


def test_a_target_the_worker_toolchain_cannot_build_fails_in_the_plan(
    fake_optimum: Path, tiny_llama: Path, tmp_path: Path
) -> None:
    from neuronforge.pipeline import check_plan

    old = Toolchain("optimum", "0.4.5", "neuronxcc", "2.15.128.0", {}, (), {"architectures": ["qwen2"]})
    with pytest.raises(PlanRejected) as exc:
        check_plan(tiny_llama, target(instance_type="trn2.48xlarge", tp_degree=1), old)
    message = str(exc.value)
    assert "neuronx-cc 2.15.128.0 on this worker cannot compile for trn2 (needs >= 2.16" in message
    assert "has no modeling code for llama (it has: qwen2)" in message
    current = Toolchain("optimum", "0.4.5", "neuronxcc", VERSION, {}, (), {"architectures": ["llama"]})
    assert any(c.name == "toolchain" and c.ok for c in check_plan(tiny_llama, target(), current).checks)
