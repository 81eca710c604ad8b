"""The quantized checkpoint's manifest as a typed record: version 2 written and read, version 1
(before df5aa72) lifted, and the nxdi backend's check of a checkpoint against its target."""

from __future__ import annotations

from pathlib import Path

import pytest

from neuronforge.artifacts import layout
from neuronforge.common.errors import InvalidInput
from neuronforge.compilation.backends.nxdi_quantization import neuron_config_quantization
from neuronforge.records.local import read_local, write_local
from neuronforge.records.quantized import QuantizedManifest
from neuronforge.spec.target import TargetSpec
from tests.records.stored_fixtures import (
    DATA,
    check_newer_refused,
    check_reads_back_as_written,
    check_wrong_type_refused,
    data,
)

V1_F8, V1_INT8 = "quantized-v1-f8e4m3.json", "quantized-v1-int8.json"  # written by ca2f673 (df5aa72^)
V2 = "quantized-v2-f8e4m3.json"  # written by ce27dfa


def _target(quantization: str, keep: tuple[str, ...] = ()) -> TargetSpec:
    spec = {"instance_type": "trn1.32xlarge", "tp_degree": 8, "sequence_length": 2048, "profile": "vllm-neuron@2.26.1"}
    return TargetSpec.parse({**spec, "quantization": quantization, "modules_to_not_convert": list(keep)})


def test_a_version_2_manifest_reads_and_writes_back_the_same() -> None:
    m = check_reads_back_as_written(QuantizedManifest, V2)
    assert m.fp8_max == 240.0 and "lm_head" in m.modules_to_not_convert and m.kept_modules is not None
    assert m.max_rel_error == max(t.rel_error for t in m.tensors.values())


@pytest.mark.parametrize("name", [V1_F8, V1_INT8])
def test_a_version_1_manifest_is_lifted_with_what_it_never_recorded_unknown(name: str) -> None:
    old = data(name)
    m = QuantizedManifest.from_bytes((DATA / name).read_bytes(), name)
    assert m.kept_modules is None and m.fp8_max is None
    assert m.modules_to_not_convert == old["modules_to_not_convert"] == ["model.layers.1.mlp"]
    assert [f.model_dump() for f in m.files] == old["files"]
    assert {k: t.model_dump() for k, t in m.tensors.items()} == old["tensors"]
    lifted = m.to_json()
    assert lifted["schema_version"] == 2 and {k: v for k, v in lifted.items() if k in old} == {
        **old,
        "schema_version": 2,
    }


def test_a_newer_manifest_is_refused_with_the_upgrade(tmp_path: Path) -> None:
    check_newer_refused(QuantizedManifest, V2, tmp_path)


def test_a_manifest_with_a_wrong_type_names_the_field_and_the_uri(tmp_path: Path) -> None:
    check_wrong_type_refused(QuantizedManifest, V2, tmp_path, ("fp8_max",), "wide")
    check_wrong_type_refused(QuantizedManifest, V1_F8, tmp_path, ("quantization", "dtype"), 8)


def test_the_nxdi_backend_loads_a_version_2_checkpoint_made_for_the_target(tmp_path: Path) -> None:
    m = QuantizedManifest.from_json(data(V2))
    write_local(m, tmp_path / layout.MANIFEST)
    assert read_local(QuantizedManifest, tmp_path / layout.MANIFEST) == m
    kw = neuron_config_quantization(_target("f8e4m3"), tmp_path)
    assert kw["quantization_dtype"] == "f8e4m3" and kw["modules_to_not_convert"] == m.modules_to_not_convert
    with pytest.raises(InvalidInput, match="modules_to_not_convert"):
        neuron_config_quantization(_target("f8e4m3", ("mlp",)), tmp_path)
    with pytest.raises(InvalidInput, match="method"):
        neuron_config_quantization(_target("f8e4m3:per_channel"), tmp_path)


@pytest.mark.parametrize(("name", "quantization"), [(V1_F8, "f8e4m3"), (V1_INT8, "int8:per_channel")])
def test_the_nxdi_backend_refuses_a_version_1_checkpoint_with_the_fix(
    name: str, quantization: str, tmp_path: Path
) -> None:
    """Version 1 scaled fp8 to the OCP ±448 and matched its list as HF substrings: whatever the target
    asks for now, NeuronConfig would be given another list (or bound) than the checkpoint was made for."""
    (tmp_path / layout.MANIFEST).write_bytes((DATA / name).read_bytes())
    with pytest.raises(InvalidInput, match="quantize again") as exc:
        neuron_config_quantization(_target(quantization, ("model.layers.1.mlp",)), tmp_path)
    assert "modules_to_not_convert" in str(exc.value)
    if quantization == "f8e4m3":
        assert "fp8_max" in str(exc.value)


def test_the_nxdi_backend_refuses_a_manifest_it_cannot_read_in_one_line(tmp_path: Path) -> None:
    (tmp_path / layout.MANIFEST).write_text('{"schema_version": 2, "quantization": "int8"}')
    with pytest.raises(InvalidInput) as exc:
        neuron_config_quantization(_target("int8"), tmp_path)
    text = str(exc.value)
    assert "\n" not in text and str(tmp_path / layout.MANIFEST) in text and "quantize the checkpoint again" in text
