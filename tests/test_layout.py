"""Store paths come from one module and have the documented shapes."""

from __future__ import annotations

import pytest

from neuronforge.artifacts import layout
from neuronforge.common.errors import InvalidInput
from neuronforge.spec.source import ModelSource
from neuronforge.spec.target import Quantization, TargetSpec

SRC = ModelSource.parse("meta-llama/Llama-3.1-8B").pinned("c" * 40)
KEY = "0123456789ab" + "f" * 52


def test_paths() -> None:
    target = TargetSpec.parse({"instance_type": "inf2.xlarge", "tp_degree": 2, "sequence_length": 4096})
    assert layout.checkpoint_prefix(SRC) == f"checkpoints/meta-llama/Llama-3.1-8B/{'c' * 40}"
    assert layout.checkpoint_manifest(SRC).endswith("/MANIFEST.json")
    assert (
        layout.quantized_prefix(SRC, Quantization.parse("int8:per_channel"))
        == f"quantized/meta-llama/Llama-3.1-8B/{'c' * 40}/int8_per_channel"
    )
    # the compiler's folder, full version with its local label (SDK 2.26.1's neuronx-cc)
    assert (
        layout.neuron_cache_prefix("neuronxcc", "2.21.33363.0+82129205")
        == "neuron-cache/neuronxcc-2.21.33363.0+82129205"
    )
    assert (
        layout.neuron_graph_set("neuronxcc", "2.21.33363.0+82129205", "g")
        == "neuron-cache-sets/neuronxcc-2.21.33363.0+82129205/g.json"
    )
    assert (
        layout.artifact_prefix(SRC, target, KEY)
        == f"artifacts/meta-llama/Llama-3.1-8B/{'c' * 40}/cpu-inf2.xlarge-tp2-b1-s4096-bf16/0123456789ab"
    )
    assert layout.index_entry(KEY) == f"index/{KEY}.json"
    assert layout.lock_entry(KEY) == f"locks/{KEY}"


def test_compiler_versions_that_would_leave_their_folder_are_refused() -> None:
    for version in ("../2.21", "2.21/0", "..", ""):
        with pytest.raises(InvalidInput, match="compile-cache folder"):
            layout.neuron_cache_prefix("neuronxcc", version)
    with pytest.raises(InvalidInput, match="compiler 'neuron/xcc' holds a path separator"):
        layout.neuron_cache_prefix("neuron/xcc", "2.21.33363.0+82129205")


def test_unresolved_sources_have_no_paths() -> None:
    with pytest.raises(ValueError, match="no resolved revision"):
        layout.checkpoint_prefix(ModelSource.parse("org/name"))
