"""The `tnx` backend (profile `lmi-neuronx`) against the FAKE transformers-neuronx 0.13.380
(tests/fakes/neuron_sdk_2_21_1), family by family.

What the classes are, read in aws-neuron/transformers-neuronx 1ade6d74 (the 0.13 line of SDK 2.21.1;
tag v0.13.0 = f4e38186 has the same bases and constructors), src/transformers_neuronx/<family>/model.py:
- llama, mistral, mixtral, bloom, opt, gpt2: `class <X>ForSampling(base.NeuronModelBase)` — `save(dir)`,
  `load(dir)`, `serialization_enabled()` (base.py);
- gptj, gptneox: `class GPTJForSampling(module.PretrainedModel)`, `class GPTNeoXForSampling(module.PretrainedModel)`
  — none of those three methods, so calling `serialization_enabled()` after `to_neuron()` (what the
  backend did) was an AttributeError;
- GPT2ForSampling, GPTJForSampling, GPTNeoXForSampling take no `n_positions` or
  `context_length_estimate` parameter: `**kwargs` go to their config class (gpt2/config.py,
  gptj/config.py, gptneox/config.py), whose `utils.maybe_override_attributes` takes `n_positions` (a
  field) and raises KeyError('Found invalid key "context_length_estimate".').
Which class LMI loads per model_type: djl-serving afece25d (= 1132e3ab~1)
engines/python/setup/djl_python/neuron_utils/model_loader.py TNXModelLoader.MODEL_TYPE_TO_CLS_LOADER.

These tests drive the backend and the profile directly; the whole pipeline runs llama in
tests/profiles/test_lmi_neuronx.py and gpt2 / opt / bloom / gptj / gpt_neox in
tests/profiles/test_lmi_families_pipeline.py.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from neuronforge.common.errors import InvalidInput
from neuronforge.compilation.backends.base import CompileJob, GenerateJob
from neuronforge.compilation.backends.tnx import BACKEND, CLASSES, LOAD_FILE, NEFF_DIR, TnxLoad, load_problems
from neuronforge.compilation.compile_cache import CompileCache
from neuronforge.profiles.lmi_neuronx import COMPILER_VERSION, LMI_CC_FLAGS, PROFILE
from neuronforge.spec.target import TargetSpec
from tests.backends.tiny_families import make_tiny
from tests.fakes import SDK_2_21_1, run_in_toolchain

FAMILIES = ("gpt2", "opt", "bloom", "gptj", "gpt_neox", "mistral", "mixtral")
TOKEN_BY_TOKEN = ("gpt2", "gptj", "gpt_neox")  # no context_length_estimate: decode graphs only


def target(**kw) -> TargetSpec:
    base = {"instance_type": "inf2.xlarge", "tp_degree": 2, "batch_size": 1, "sequence_length": 64, "dtype": "fp32"}
    return TargetSpec.parse({**base, "profile": "lmi-neuronx", **kw})


@pytest.fixture(scope="module")
def sdk(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The FAKE SDK 2.21.1 as the toolchain interpreter, on a host with Neuron devices; yields the
    folder holding its compile log."""
    from tests.conftest import use_fake_sdk

    base = tmp_path_factory.mktemp("tnx")
    with pytest.MonkeyPatch.context() as mp:
        use_fake_sdk(mp, "2.21.1", SDK_2_21_1, base)
        mp.setenv("FAKE_NEURON_COMPILE_LOG", str(base / "compiles.log"))
        yield base


FACTS = """
import importlib, inspect, json
from transformers_neuronx import base, module
from neuronforge.compilation.backends.tnx import CLASSES
out = {}
for mt, c in CLASSES.items():
    cls = getattr(importlib.import_module("transformers_neuronx." + c.module), c.name)
    out[mt] = {
        "bases": [b.__module__ + "." + b.__name__ for b in cls.__bases__],
        "neuron_model_base": issubclass(cls, base.NeuronModelBase),
        "pretrained_model": issubclass(cls, module.PretrainedModel),
        "methods": sorted(m for m in ("save", "load", "serialization_enabled", "to_neuron", "sample")
                          if hasattr(cls, m)),
        "params": list(inspect.signature(cls.__init__).parameters)[1:],
    }
print(json.dumps(out))
"""


def test_the_fake_classes_have_the_real_bases_and_constructors(sdk: Path) -> None:
    facts = json.loads(run_in_toolchain("2.21.1", FACTS, {"PYTHONPATH": str(Path(__file__).parents[2])}))
    for mt, c in CLASSES.items():
        f = facts[mt]
        base = "base.NeuronModelBase" if c.serializable else "module.PretrainedModel"
        assert f["bases"] == [f"transformers_neuronx.{base}"], mt
        assert f["pretrained_model"] and f["neuron_model_base"] == c.serializable, mt
        serial = ["load", "save", "serialization_enabled"] if c.serializable else []
        assert f["methods"] == sorted([*serial, "sample", "to_neuron"]), mt
        assert ("context_length_estimate" in f["params"]) == c.context_length_estimate, mt
        assert ("n_positions" in f["params"]) == (mt not in TOKEN_BY_TOKEN), mt
    # the constructors LMI calls with (batch_size, amp, tp_degree, n_positions[, context_length_estimate]):
    legacy = ["config", "batch_size", "amp", "tp_degree", "unroll", "init_n_active_tokens", "neuron_config", "kwargs"]
    assert facts["gptj"]["params"] == facts["gpt_neox"]["params"] == legacy
    assert facts["gpt2"]["params"] == [*legacy[:-1], "tag", "kwargs"]
    assert facts["opt"]["params"] == [
        "config", "batch_size", "amp", "tp_degree", "n_positions", "unroll", "context_length_estimate",
        "context_unroll", "neuron_config", "kwargs",
    ]  # fmt: skip
    assert facts["bloom"]["params"][:5] == ["config", "n_positions", "batch_size", "amp", "tp_degree"]


@pytest.mark.parametrize("model_type", FAMILIES)
def test_each_family_compiles_and_loads_as_lmi_does(sdk: Path, model_type: str, tmp_path: Path) -> None:
    """The load LMI builds from our properties (profile.compile_settings), compiled by the backend in
    the fake SDK's interpreter, then loaded again through the cache alone: nothing compiles, and the
    tokens are the checkpoint's greedy ones. GPT-J / GPT-NeoX compile without the save the backend
    used to attempt (their classes have none); the others also leave their NEFFs in model.save layout."""
    import torch
    from transformers import AutoModelForCausalLM

    c = CLASSES[model_type]
    checkpoint = make_tiny(model_type, tmp_path / "ckpt")
    config = json.loads((checkpoint / "config.json").read_text())
    settings = PROFILE.compile_settings(target(), model_type, model_config=config)
    load: TnxLoad = settings["tnx"]
    assert ("context_length_estimate" in load.kwargs) == c.context_length_estimate
    assert load_problems(load, config) == []

    cache = CompileCache(tmp_path / "cache", "neuronxcc", COMPILER_VERSION)
    build = tmp_path / "build"
    python = PROFILE.python()
    result = BACKEND.compile(
        CompileJob(checkpoint, model_type, target(), build, cache, (), 300, tmp_path, settings, python=python)
    )
    graphs = 1 if model_type in TOKEN_BY_TOKEN else 2  # n_positions 64: one token bucket (+ one context bucket)
    assert result.compiler_invocations == len(result.graphs) == graphs
    record = json.loads((build / LOAD_FILE).read_text())
    assert record["neuron_cc_flags"] == LMI_CC_FLAGS and len(record["cache_entries"]) == graphs
    assert len(list((build / NEFF_DIR).glob("*.neff"))) == (graphs if c.serializable else 0)

    log = sdk / "compiles.log"
    before = log.read_text()
    gen_settings = {"tnx": load, "neuron_cc_flags": LMI_CC_FLAGS, "neff_dir": str(build / NEFF_DIR)}
    prompt = [7, 5, 6]
    generated = BACKEND.generate(GenerateJob(checkpoint, [prompt], 4, 300, cache, gen_settings, python))
    assert log.read_text() == before  # every graph came from the cache
    assert generated.get("compiled", []) == []
    hf = AutoModelForCausalLM.from_pretrained(checkpoint, dtype=torch.float32).eval()
    ids = torch.tensor([prompt])  # no pad id in it: generate() would mask it (OPT's pad_token_id is 1)
    want = hf.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=4, min_new_tokens=4, do_sample=False)
    want = want[0, len(prompt) :]
    assert generated["rows"][0]["tokens"] == want.tolist()


@pytest.mark.parametrize("model_type", ["gptj", "gpt_neox"])
def test_a_model_save_folder_is_refused_for_classes_without_load(model_type: str, tmp_path: Path) -> None:
    load = TnxLoad(model_type, {"batch_size": 1, "amp": "f32", "tp_degree": 2, "n_positions": 64})
    cache = CompileCache(tmp_path / "cache", "neuronxcc", COMPILER_VERSION)
    settings = {"tnx": load, "neff_dir": str(tmp_path / "neff"), "load_neffs": True}
    with pytest.raises(InvalidInput, match=r"derives from module\.PretrainedModel and has no load"):
        BACKEND.generate_request(GenerateJob(tmp_path, [[1]], 1, 10, cache, settings))


KW = {"batch_size": 1, "amp": "f32", "tp_degree": 2, "n_positions": 64}
REFUSED = {
    "gpt2 context_length_estimate": ("gpt2", {**KW, "context_length_estimate": [64]}, {}, None, "Found invalid key"),
    "gptj context_length_estimate": ("gptj", {**KW, "context_length_estimate": [64]}, {}, None, "Found invalid key"),
    "neox context_length_estimate": ("gpt_neox", {**KW, "context_length_estimate": [64]}, {}, None, "invalid key"),
    "gptj int8": ("gptj", KW, {"quant": {"quant_dtype": "s8"}}, None, "quantization is not yet implemented"),
    "gptj bucket list": ("gptj", {**KW, "n_positions": [64]}, {}, None, "takes one int"),
    "neox continuous batching": (
        "gpt_neox", KW, {"continuous_batching": {"batch_size_for_shared_caches": 1}}, None, "continuous batching",
    ),
    "gpt2 beyond positions": ("gpt2", {**KW, "n_positions": 512}, {}, {"n_positions": 256}, "exceeds the checkpoint"),
    "gptj beyond positions": ("gptj", {**KW, "n_positions": 512}, {}, {"n_positions": 256}, "exceeds the checkpoint"),
    "opt beyond positions": (
        "opt", {**KW, "n_positions": 512}, {}, {"max_position_embeddings": 256}, "max_position_embeddings=256",
    ),
    "neox serial residual": ("gpt_neox", KW, {}, {"use_parallel_residual": False}, "use_parallel_residual=False"),
}  # fmt: skip


@pytest.mark.parametrize("case", sorted(REFUSED))
def test_what_a_class_would_raise_is_refused_before_compiling(case: str, tmp_path: Path) -> None:
    model_type, kwargs, neuron_config, config, message = REFUSED[case]
    load = TnxLoad(model_type, kwargs, neuron_config)
    problems = load_problems(load, config)
    assert any(message in p for p in problems), problems
    assert any("1ade6d74" in p for p in problems) or "quantization" in message
    checkpoint = tmp_path / "ckpt"
    checkpoint.mkdir()
    (checkpoint / "config.json").write_text(json.dumps({"model_type": model_type, **(config or {})}))
    cache = CompileCache(tmp_path / "cache", "neuronxcc", COMPILER_VERSION)
    job = CompileJob(checkpoint, model_type, target(), tmp_path / "b", cache, (), 10, tmp_path, {"tnx": load})
    with pytest.raises(InvalidInput, match="would fail"):
        BACKEND.compile_request(job)  # no interpreter is named: it fails before running anything


def test_every_lmi_model_type_has_a_class() -> None:
    from neuronforge.profiles.lmi_neuronx import LMI_MODEL_TYPES

    assert set(CLASSES) == set(LMI_MODEL_TYPES)
    assert {mt for mt, c in CLASSES.items() if not c.serializable} == {"gptj", "gpt_neox"}
