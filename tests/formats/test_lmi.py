"""LMI serving configuration comes from the target, for Neuron backends only."""

from __future__ import annotations

import pytest

from neuronforge.errors import InvalidInput
from neuronforge.formats.lmi import render_env, render_properties, serving_options
from neuronforge.target import TargetSpec

SPLIT = "s3://bucket/artifacts/org/m/rev/slug/key/split/model"
CACHE = "s3://bucket/neuron-cache/neuronxcc-2.21.33363.0"


def target(**kw) -> TargetSpec:
    return TargetSpec.parse(
        {
            "instance_type": "inf2.xlarge",
            "tp_degree": 2,
            "batch_size": 4,
            "sequence_length": 4096,
            "backend": "nxdi",
            **kw,
        }
    )


def test_properties_follow_the_target() -> None:
    text = render_properties(serving_options(target(quantization="int8:per_channel"), SPLIT, CACHE))
    lines = dict(line.split("=", 1) for line in text.splitlines())
    assert lines["option.model_id"] == SPLIT and lines["option.load_split_model"] == "true"
    assert lines["option.compiled_graph_path"] == CACHE
    assert lines["option.tensor_parallel_degree"] == "2" and lines["option.n_positions"] == "4096"
    assert lines["option.max_rolling_batch_size"] == "4" and lines["option.rolling_batch"] == "auto"
    assert lines["option.entryPoint"] == "djl_python.transformers_neuronx"
    assert lines["option.model_loader"] == "nxdi" and lines["option.quantize"] == "static_int8"


def test_optimum_loader_and_no_quantize_option_without_int8() -> None:
    opts = serving_options(target(backend="optimum", batch_size=1), SPLIT, CACHE)
    assert opts["option.model_loader"] == "optimum" and "option.quantize" not in opts
    assert opts["option.rolling_batch"] == "disable"


def test_env_twin() -> None:
    env = render_env(serving_options(target(), SPLIT, CACHE))
    assert f"OPTION_MODEL_ID={SPLIT}\n" in env and "OPTION_TENSOR_PARALLEL_DEGREE=2\n" in env
    assert "OPTION_ENTRYPOINT=djl_python.transformers_neuronx\n" in env and "engine" not in env.lower()


def test_cpu_backend_has_no_lmi_config() -> None:
    with pytest.raises(InvalidInput, match="LMI serves Neuron backends"):
        serving_options(target(backend="cpu"), SPLIT, CACHE)
