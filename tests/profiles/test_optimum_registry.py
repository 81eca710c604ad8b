"""The optimum-neuron registry entry of a build, computed by optimum-neuron 0.4.5 itself in the
profile's toolchain interpreter (here the SDK 2.26.1 fake's, whose `optimum.neuron.cache` is the REAL
installed package), and the checks around it: the version lock, the digest the lookup reads.

Sources, huggingface/optimum-neuron at tag v0.4.5 (= the installed wheel):
optimum/neuron/cache/entries/single_model.py (SingleModelCacheEntry, arch_digest, from_hub),
optimum/neuron/cache/entries/cache_entry.py (hash, serialize, deserialize),
optimum/neuron/models/inference/backend/pretrained_model.py _export (dtype set on the config first).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from neuronforge.common.errors import InvalidInput
from neuronforge.compilation.backends.optimum import BACKEND
from neuronforge.pipeline.buildstate import BuildState
from neuronforge.profiles import optimum_neuron as on
from neuronforge.profiles.optimum_neuron import _optimum_imported
from neuronforge.spec.tinymodel import make_tiny_llama
from tests.profiles.test_optimum_neuron import export  # noqa: F401  (the module's fake export)

REGISTRY = on.PROFILE.hub_registry
MODEL = "tiny-org/tiny-llama"
REVISION = "c" * 40


@pytest.fixture
def neuron_config(export: Path) -> dict:  # noqa: F811
    return json.loads((export / "neuron_config.json").read_text())


def _entry(fake_optimum: Path, checkpoint: Path, neuron_config: dict):
    return REGISTRY.entry(
        BACKEND,
        on.PROFILE.python(),
        checkpoint_dir=checkpoint,
        neuron_config=neuron_config,
        model_id=MODEL,
        revision=REVISION,
    )


def test_the_entry_is_the_one_optimums_export_writes(fake_optimum: Path, neuron_config: dict, tmp_path: Path) -> None:
    """Recomputed here with the installed optimum-neuron's own classes, the way `_export` builds it
    for a Hub model: the same digest, hash and JSON; the neuron part names the Hub id and revision."""
    import torch
    from transformers import AutoConfig

    checkpoint = make_tiny_llama(tmp_path / "tiny-llama")
    got = _entry(fake_optimum, checkpoint, neuron_config)
    with _optimum_imported():
        from optimum.neuron.cache.entries.cache_entry import ModelCacheEntry
        from optimum.neuron.cache.entries.single_model import SingleModelCacheEntry

    config = AutoConfig.from_pretrained(checkpoint).get_text_config()
    config.torch_dtype = getattr(torch, neuron_config["torch_dtype"])
    neuron = {**neuron_config, "checkpoint_id": MODEL, "checkpoint_revision": REVISION}
    want = SingleModelCacheEntry(MODEL, "text-generation", config, neuron_config=neuron)
    assert (got.arch_digest, got.hash, got.json) == (want.arch_digest(), want.hash, want.serialize())
    assert got.registry_folder == "0_REGISTRY/0.4.5" and got.model_type == "llama"
    assert ModelCacheEntry.deserialize(got.json).neuron_config == got.neuron == neuron
    assert got.versions["optimum-neuron"] == "0.4.5" and got.versions["neuronx-cc (pinned by optimum-neuron)"] == (
        "2.21.33363.0"
    )
    assert got.lookup_digest == got.arch_digest  # the checkpoint's dtype is the build's: the lookup sees it


def test_an_entry_the_lookup_cannot_see_is_refused(fake_optimum: Path, neuron_config: dict, tmp_path: Path) -> None:
    """optimum's lookup digests the Hub config as it is; its export digests it after setting the build's
    dtype. A bf16 build of a float32 checkpoint goes under a folder no lookup reads: refused, naming both."""
    checkpoint = make_tiny_llama(tmp_path / "tiny-llama")
    with pytest.raises(InvalidInput) as err:
        _entry(fake_optimum, checkpoint, {**neuron_config, "torch_dtype": "bfloat16"})
    message = str(err.value)
    assert "optimum-neuron's lookup would not find this build of tiny-org/tiny-llama" in message
    assert "dtype bfloat16" in message and "single_model.py arch_digest" in message and "\n" not in message


def test_the_version_lock_names_each_difference() -> None:
    ok = {"optimum-neuron": "0.4.5", "neuronx-cc": on.COMPILER_VERSION, "transformers": "4.57.6"}
    assert REGISTRY.version_problems(ok) == []
    assert REGISTRY.version_problems({**ok, "transformers": "4.58.0"}) == [
        "transformers 4.58.0 built it, the consumer's optimum-neuron needs ~=4.57.1"
    ]
    assert REGISTRY.version_problems({**ok, "neuronx-cc": "2.21.33363.0", "optimum-neuron": "0.4.4"}) == [
        "optimum-neuron 0.4.4 built it, the consumer runs 0.4.5",
        "neuronx-cc 2.21.33363.0 built it, the consumer runs 2.21.33363.0+82129205",
    ]
    with pytest.raises(InvalidInput, match="refusing to register: transformers missing built it"):
        REGISTRY.check_versions({k: v for k, v in ok.items() if k != "transformers"})


def test_the_profile_labels_its_consumer_versions() -> None:
    assert on.PROFILE.describe()["hub_registry"] == {
        "optimum-neuron": "0.4.5",
        "neuronx-cc": "2.21.33363.0+82129205",
        "transformers": "~=4.57.1",
    }
    from neuronforge.profiles.registry import get_profile

    assert "hub_registry" not in get_profile("vllm-neuron").describe()


TARGET = {"instance_type": "inf2.xlarge", "tp_degree": 2, "batch_size": 1, "sequence_length": 64, "dtype": "fp32"}


@pytest.mark.parametrize(
    ("model", "profile", "repo", "words"),
    [
        (MODEL, "optimum-neuron", "not a repo", "--hub-registry 'not a repo' is not a Hub repository id"),
        (MODEL, "optimum-neuron", "../x", "is not a Hub repository id"),
        (MODEL, "vllm-neuron", "me/cache", "--hub-registry me/cache: profile vllm-neuron@"),
        ("s3://bucket/model", "optimum-neuron", "me/cache", "s3://bucket/model is not a Hugging Face model"),
        ("builtin:tiny-llama", "optimum-neuron", "me/cache", "builtin:tiny-llama is not a Hugging Face model"),
    ],
)
def test_a_registry_no_build_of_the_run_could_be_found_in_is_refused_before_any_work(
    model: str, profile: str, repo: str, words: str
) -> None:
    with pytest.raises(InvalidInput) as err:
        BuildState(model=model, target={**TARGET, "profile": profile}, store_uri="file:///tmp/s", hub_registry=repo)
    assert words in str(err.value) and "\n" not in str(err.value)


def test_no_registry_asked_is_none_and_an_id_is_kept() -> None:
    base = {"model": MODEL, "target": {**TARGET, "profile": "optimum-neuron"}, "store_uri": "file:///tmp/s"}
    assert BuildState(**base).hub_registry is None
    assert BuildState(**base, hub_registry="").hub_registry is None
    assert BuildState(**base, hub_registry=" my-org/neuron-cache ").hub_registry == "my-org/neuron-cache"


def test_the_workers_default_registry_applies_only_where_it_can(monkeypatch: pytest.MonkeyPatch) -> None:
    """NEURONFORGE_HUB_REGISTRY registers the builds it can hold (a Hub model, a profile with a registry) when
    the run names none; it never refuses a build; `-` is explicitly none."""

    monkeypatch.setenv("NEURONFORGE_HUB_REGISTRY", "my-org/neuron-cache")
    base = {"target": {**TARGET, "profile": "optimum-neuron"}, "store_uri": "file:///tmp/s"}
    state = BuildState(model=MODEL, **base)
    assert (state.hub_registry, state.hub_registry_default) == ("my-org/neuron-cache", True)
    assert BuildState(model="s3://bucket/model", **base).hub_registry is None
    other = {**base, "target": {**TARGET, "profile": "vllm-neuron"}}
    assert BuildState(model=MODEL, **other).hub_registry is None
    assert BuildState(model=MODEL, **base, hub_registry="-").hub_registry is None
    explicit = BuildState(model=MODEL, **base, hub_registry="me/other")
    assert (explicit.hub_registry, explicit.hub_registry_default) == ("me/other", False)
    # carried between tasks as it was decided
    again = BuildState.model_validate(state.model_dump(mode="json"))
    assert (again.hub_registry, again.hub_registry_default) == ("my-org/neuron-cache", True)


def test_a_default_registry_that_is_no_repo_id_is_refused_by_the_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    from neuronforge.common import settings

    monkeypatch.setenv("NEURONFORGE_HUB_REGISTRY", "not a repo")
    with pytest.raises(InvalidInput, match="NEURONFORGE_HUB_REGISTRY"):
        settings.current()
