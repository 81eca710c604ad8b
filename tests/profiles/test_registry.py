"""The serving-profile registry: what users can name, and what they are told when they cannot."""

from __future__ import annotations

import json

import pytest

from neuronforge.common.errors import InvalidInput
from neuronforge.profiles import all_profiles, get_profile, neuron_queues, profile_names, registry
from neuronforge.profiles.base import Pins, Placement
from neuronforge.profiles.vllm_neuron import VllmNeuronProfile


def test_the_registry_ships_the_profiles_of_the_issue() -> None:
    assert profile_names() == ["cpu", "optimum-neuron", "vllm-neuron", "vllm-neuron-native", "lmi-neuronx"]
    refs = {p.ref for p in all_profiles()}
    assert refs == {
        "cpu@local",
        "optimum-neuron@2.26.1",
        "vllm-neuron@2.26.1",
        "vllm-neuron@2.28.0",
        "vllm-neuron@2.31.1",
        "vllm-neuron-native@2.32.0",
        "vllm-neuron-native@2.33.0",
        "lmi-neuronx@2.21.1",
    }
    # Toolchain queues: CPU workers of each SDK image; LMI's transformers-neuronx compiles only
    # where it can load (a Neuron host of SDK 2.21.1).
    assert neuron_queues() == [
        "neuron-2.21.1",
        "neuron-compile-2.26.1",
        "neuron-compile-2.28.0",
        "neuron-compile-2.31.1",
        "neuron-compile-2.32.0",
        "neuron-compile-2.33.0",
    ]
    # The full compiler version with its local label, as the real wheel of each SDK release reports it
    # (SDK 2.33.0's label is not published: its pin is the public version, which any label satisfies).
    compilers = {
        "2.26.1": "2.21.33363.0+82129205",
        "2.21.1": "2.16.372.0+4a9b2326",
        "2.28.0": "2.23.6484.0+3b612583",
        "2.31.1": "2.26.6360.0+6f180f47",
        "2.32.0": "2.27.5334.0+f702b353",
        "2.33.0": "2.28.7631.0",
    }
    for p in all_profiles():
        # A folder is named for what it holds: never `optimum/` for something optimum cannot load.
        assert p.folder in {"cpu-aoti", "optimum-neuron", "nxdi", "split", "model"}
        if p.neuron:
            assert p.pins.compiler_version == compilers[p.pins.sdk_release]
            assert p.device_queue == f"neuron-{p.pins.sdk_release}"
            compiles_on = p.device_queue if p.ref == "lmi-neuronx@2.21.1" else f"neuron-compile-{p.pins.sdk_release}"
            assert p.queue == compiles_on == p.placement("compile").queue == p.placement("toolchain").queue
            assert p.placement("smoke") == Placement(p.device_queue, neuron_cores=True)
            assert p.placement("compile").neuron_cores == (p.ref == "lmi-neuronx@2.21.1")
            assert not p.placement("toolchain").neuron_cores and p.placement(None) == Placement(None)
        else:
            assert p.queue is None and p.device_queue is None
            assert {p.placement(k) for k in (None, "toolchain", "compile", "smoke")} == {Placement(None)}


def test_a_bare_name_is_the_newest_version_and_name_at_version_pins_one(monkeypatch) -> None:
    class Newer(VllmNeuronProfile):
        pins = Pins("2.40.0", "2.40.0.0+abcdef12", {"neuronx-distributed-inference": "0.40.0"})

    registered = registry.all_profiles()
    monkeypatch.setattr(registry, "all_profiles", lambda: (*registered, Newer()))
    assert get_profile("vllm-neuron").ref == "vllm-neuron@2.40.0"
    assert get_profile("vllm-neuron@2.26.1").ref == "vllm-neuron@2.26.1"
    assert neuron_queues() == [
        "neuron-2.21.1",
        "neuron-compile-2.26.1",
        "neuron-compile-2.28.0",
        "neuron-compile-2.31.1",
        "neuron-compile-2.32.0",
        "neuron-compile-2.33.0",
        "neuron-compile-2.40.0",
    ]
    with pytest.raises(
        InvalidInput,
        match=r"has no version '2\.30\.0'; registered: vllm-neuron@2\.26\.1, vllm-neuron@2\.28\.0, "
        r"vllm-neuron@2\.31\.1, vllm-neuron@2\.40\.0",
    ):
        get_profile("vllm-neuron@2.30.0")


@pytest.mark.parametrize(
    ("name", "text"),
    [
        (
            "tensorrt",
            "unknown profile 'tensorrt'; known profiles: cpu, optimum-neuron, vllm-neuron, vllm-neuron-native, "
            "lmi-neuronx",
        ),
        ("tgi-neuron", "pinned optimum-neuron (0.3.0)"),
    ],
)
def test_unknown_and_refused_stacks_say_why_and_what_to_use(name: str, text: str) -> None:
    with pytest.raises(InvalidInput) as err:
        get_profile(name)
    assert text in str(err.value)


def test_neuronforge_profiles_lists_the_registry(capsys) -> None:
    from neuronforge.interfaces.cli import main

    assert main(["profiles", "--json"]) == 0
    listing = json.loads(capsys.readouterr().out)
    rows = {r["name"]: r for r in listing["profiles"]}
    assert set(rows) == {"cpu", "optimum-neuron", "vllm-neuron", "vllm-neuron-native", "lmi-neuronx"}
    lmi = rows["lmi-neuronx"]
    assert (lmi["sdk_release"], lmi["compiler_version"], lmi["backend"], lmi["queue"]) == (
        "2.21.1",
        "2.16.372.0+4a9b2326",
        "tnx",
        "neuron-2.21.1",
    )
    assert (lmi["device_queue"], lmi["device_stages"]) == ("neuron-2.21.1", ["compile", "smoke"])
    optimum = rows["optimum-neuron"]
    assert (optimum["sdk_release"], optimum["compiler_version"], optimum["backend"]) == (
        "2.26.1",
        "2.21.33363.0+82129205",
        "optimum",
    )
    assert optimum["instance_families"] == ["inf2", "trn1", "trn1n", "trn2"]
    assert optimum["publishes"].startswith("optimum-neuron/") and rows["vllm-neuron"]["publishes"].startswith("nxdi/")
    assert {s["name"] for s in listing["not_supported"]} == {"tgi-neuron"}
    native = rows["vllm-neuron-native"]  # the newest release; both are listed in the text output
    assert (native["sdk_release"], native["backend"], native["queue"]) == (
        "2.33.0",
        "vllm-native",
        "neuron-compile-2.33.0",
    )
    assert native["instance_families"] == ["trn2", "trn3"]
    assert main(["profiles"]) == 0
    text = capsys.readouterr().out
    assert "vllm-neuron@2.26.1" in text and "not supported: tgi-neuron" in text


def test_a_target_for_an_instance_the_profile_does_not_serve_is_refused_by_the_planner() -> None:
    from neuronforge.pipeline.planner import static_problems
    from neuronforge.spec.target import TargetSpec

    class Trn2Only(VllmNeuronProfile):
        instance_families = frozenset({"trn2"})

    target = TargetSpec.parse(
        {"instance_type": "inf2.xlarge", "tp_degree": 2, "sequence_length": 64, "profile": "vllm-neuron@2.26.1"}
    )
    assert Trn2Only().problems(target) == ["profile vllm-neuron@2.26.1 serves trn2 instances, not inf2.xlarge"]
    assert static_problems(None, target) == []


def test_a_worker_image_consumes_the_queues_of_its_role() -> None:
    """What docker/neuron-worker.Dockerfile starts: the SDK 2.26.1 image compiles on a CPU host and loads
    on a Neuron host; the SDK 2.21.1 image (transformers-neuronx) only runs on Neuron hosts, and says why."""
    from neuronforge.profiles.registry import worker_queues

    assert worker_queues("2.26.1", "compile") == ["neuron-compile-2.26.1"]
    assert worker_queues("2.26.1", "neuron") == ["neuron-2.26.1"]
    assert worker_queues("2.21.1", "neuron") == ["neuron-2.21.1"]
    with pytest.raises(InvalidInput, match=r"compile where they load \(transformers-neuronx's to_neuron\(\) loads"):
        worker_queues("2.21.1", "compile")
    with pytest.raises(
        InvalidInput, match=r"no registered profile pins Neuron SDK '2\.99\.0'; registered: 2\.21\.1, 2\.26\.1"
    ):
        worker_queues("2.99.0", "neuron")
    with pytest.raises(InvalidInput, match="worker role 'gpu'"):
        worker_queues("2.26.1", "gpu")
