"""NeuronConfig's quantization fields and the quantizations NxD Inference 0.6 cannot load.

Each rule is checked against the source it comes from (neuronx-distributed-inference v0.6.10598,
neuronx-distributed v2.26.0); `_nxd_converts` re-states the one decision that ties our checkpoint
to NxD Inference: which linears neuronx-distributed's `convert` builds quantized."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from safetensors import safe_open

from neuronforge.artifacts import layout
from neuronforge.checkpoints.quantized_names import QUANTIZABLE, neuron_modules
from neuronforge.common.errors import InvalidInput
from neuronforge.compilation.backends.nxdi_quantization import neuron_config_quantization, quantization_problems
from neuronforge.pipeline.stages.quantize import QuantizeRequest, quantize
from neuronforge.spec.source import ModelSource
from neuronforge.spec.target import TargetSpec
from tests.checkpoints import make_tiny_llama


def target(quantization: str = "int8", **kw) -> TargetSpec:
    base = {
        "instance_type": "trn1.32xlarge",
        "tp_degree": 8,
        "sequence_length": 2048,
        "profile": "vllm-neuron@2.26.1",
        "quantization": quantization,
    }
    return TargetSpec.parse({**base, **kw})


def _nxd_converts(module_path: str, modules_to_not_convert: list[str]) -> bool:
    """neuronx-distributed v2.26.0 quantization/quantize.py `_convert_initialized_float_to_initialized_quantized`:
    a mapped linear is swapped for a quantized one unless its name is in the list or an entry is a
    substring of its dotted path."""
    name = module_path.rsplit(".", 1)[-1]
    return name not in modules_to_not_convert and not any(key in module_path for key in modules_to_not_convert)


def test_every_module_left_unquantized_is_named_to_neuron_config(tmp_path: Path) -> None:
    # NeuronConfig.modules_to_not_convert (models/config.py @ v0.6.10598) reaches `convert` through
    # models/model_wrapper.py; without lm_head there, NxD builds a quantized lm_head ("Cannot find
    # lm_head.scale in state_dict").
    kw = neuron_config_quantization(target("int8:per_channel"), tmp_path)
    assert kw["modules_to_not_convert"] == ["lm_head"]
    assert (kw["quantized"], kw["quantization_dtype"], kw["quantization_type"]) == (
        True,
        "int8",
        "per_channel_symmetric",
    )
    # HF spellings (`model.` prefix) are passed as NxD matches them: its module paths have no `model.`.
    t = target("f8e4m3", modules_to_not_convert=["model.layers.1.mlp", "layers.0.self_attn"])
    assert neuron_config_quantization(t, tmp_path)["modules_to_not_convert"] == [
        "layers.0.self_attn",
        "layers.1.mlp",
        "lm_head",
    ]
    assert neuron_config_quantization(target("none"), None) == {}


@pytest.mark.parametrize(
    "keep",
    [(), ("model.layers.1.mlp",), ("mlp.down_proj", "layers.0.self_attn", "layers.1.self_attn"), ("o_proj",)],
)
def test_the_quantizer_keeps_exactly_what_nxd_inference_builds_unquantized(
    keep: tuple[str, ...], tmp_path: Path
) -> None:
    """The checkpoint has a scale for a weight iff NxD's convert, given NeuronConfig's list, builds a
    quantized layer for its module (both the fused-QKV and the separate q/k/v module trees)."""
    t = target("int8:per_channel", modules_to_not_convert=list(keep))
    src = make_tiny_llama(tmp_path / "m")
    source = ModelSource.parse(str(src)).pinned("e" * 64)
    result = quantize(QuantizeRequest(src, source, t.quantization, "bf16", tmp_path / "work"), None)
    nc = neuron_config_quantization(t, result.local_dir)  # also checks the manifest against the target
    assert result.manifest.modules_to_not_convert == nc["modules_to_not_convert"]
    with safe_open(str(src / "model.safetensors"), framework="pt") as f:
        hf = [k for k in f.keys() if QUANTIZABLE.match(k) or k == "lm_head.weight"]  # noqa: SIM118
    stored = set()
    for p in result.local_dir.glob("*.safetensors"):
        with safe_open(str(p), framework="pt") as f:
            stored |= set(f.keys())
    for name in hf:
        converted = {_nxd_converts(p, nc["modules_to_not_convert"]) for p in neuron_modules(name)}
        assert len(converted) == 1, name  # fused or not, NxD decides the same
        has_scale = name.removeprefix("model.").removesuffix(".weight") + ".scale" in stored
        assert has_scale == converted.pop(), name
    kept = {p for n in hf for p in neuron_modules(n) if not _nxd_converts(p, nc["modules_to_not_convert"])}
    assert set(result.manifest.kept_modules or ()) == kept


def test_a_checkpoint_made_for_another_list_or_the_ocp_fp8_range_is_refused(tmp_path: Path) -> None:
    """The stored manifests of tests/data/records: schema 2 (ce27dfa) made for f8e4m3 with the default
    list; schema 1 (df5aa72^) fp8 checkpoints were scaled to the OCP ±448 and record no fp8_max."""
    records = Path(__file__).resolve().parent.parent / "data" / "records"
    (tmp_path / layout.MANIFEST).write_bytes((records / "quantized-v2-f8e4m3.json").read_bytes())
    assert neuron_config_quantization(target("f8e4m3"), tmp_path)["quantization_dtype"] == "f8e4m3"
    with pytest.raises(InvalidInput, match="modules_to_not_convert"):
        neuron_config_quantization(target("f8e4m3", modules_to_not_convert=["mlp"]), tmp_path)
    with pytest.raises(InvalidInput, match="method"):
        neuron_config_quantization(target("f8e4m3:per_channel"), tmp_path)
    old = json.loads((records / "quantized-v1-f8e4m3.json").read_text())
    old["modules_to_not_convert"] = ["lm_head"]  # the list alone agrees: the bound still does not
    (tmp_path / layout.MANIFEST).write_text(json.dumps(old))
    with pytest.raises(InvalidInput, match="fp8_max"):
        neuron_config_quantization(target("f8e4m3"), tmp_path)


def test_f8e5m2_is_refused_with_the_reason_and_the_alternatives(tmp_path: Path) -> None:
    # models/model_wrapper.py @ v0.6.10598 selects F8E4M3 layers only for "f8e4m3"; anything else
    # keeps neuronx-distributed's default qconfig (INT8, quantization_config.py @ v2.26.0).
    (problem,) = quantization_problems(target("f8e5m2"), "llama")
    assert "int8 layers" in problem and "use f8e4m3 or int8" in problem
    with pytest.raises(InvalidInput, match="int8 layers"):
        neuron_config_quantization(target("f8e5m2:per_channel"), tmp_path)
    for ok in ("int8", "int8:per_channel", "f8e4m3", "f8e4m3:per_channel", "none"):
        assert quantization_problems(target(ok), "llama") == []


@pytest.mark.parametrize("model_type", ["mixtral", "qwen3_moe"])
def test_moe_expert_quantization_is_refused_unless_the_experts_stay_unquantized(model_type: str) -> None:
    # models/mixtral/modeling_mixtral.py and models/qwen3_moe/modeling_qwen3_moe.py @ v0.6.10598 copy
    # experts.{e}.(w1|w3|gate_proj|up_proj|w2|down_proj).weight into expert_mlps.mlp_op.* and never
    # read a scale; neuronx-distributed's convert skips expert_mlps when the list names it.
    (problem,) = quantization_problems(target("int8"), model_type)
    assert "reads the expert weights but not their scales" in problem and "expert_mlps" in problem
    assert quantization_problems(target("int8", modules_to_not_convert=["expert_mlps"]), model_type) == []
    assert quantization_problems(target("f8e4m3:per_channel", modules_to_not_convert=["mlp"]), model_type) == []
    # HF-only names match nothing in NxD's module tree; one layer's experts are not all of them.
    for keep in (["block_sparse_moe"], ["experts"], ["layers.0.mlp.expert_mlps"]):
        assert quantization_problems(target("int8", modules_to_not_convert=keep), model_type)
    assert len(quantization_problems(target("f8e5m2"), model_type)) == 2


def test_moe_experts_kept_by_expert_mlps_map_to_nxd_modules() -> None:
    """The quantizer matches HF expert weights by the NxD module they are fused into."""
    for hf, module in [
        ("model.layers.3.block_sparse_moe.experts.7.w1.weight", "layers.3.mlp.expert_mlps.mlp_op.gate_up_proj"),
        ("model.layers.3.block_sparse_moe.experts.7.w3.weight", "layers.3.mlp.expert_mlps.mlp_op.gate_up_proj"),
        ("model.layers.3.block_sparse_moe.experts.7.w2.weight", "layers.3.mlp.expert_mlps.mlp_op.down_proj"),
        ("model.layers.3.mlp.experts.7.up_proj.weight", "layers.3.mlp.expert_mlps.mlp_op.gate_up_proj"),
        ("model.layers.3.mlp.experts.7.down_proj.weight", "layers.3.mlp.expert_mlps.mlp_op.down_proj"),
        ("model.layers.3.self_attn.o_proj.weight", "layers.3.self_attn.o_proj.o_proj"),
        ("lm_head.weight", "lm_head"),
    ]:
        assert neuron_modules(hf) == (module,)
    assert neuron_modules("model.layers.3.self_attn.v_proj.weight") == (
        "layers.3.self_attn.qkv_proj.Wqkv",
        "layers.3.self_attn.qkv_proj.v_proj",
    )
