"""The smoke test proves the published payload: stages run one by one, each with its own work dir
(a host of its own), a compile host without Neuron devices and a smoke host with them. The FAKE SDKs
load only the payload (model.pt bound to its neuron_config.json, the real weight shards, NEFFs of
the exact graphs) and need a device to load, as the Neuron runtime does; compiling needs none."""

from __future__ import annotations

import json
import os
import shutil
import uuid
from pathlib import Path

import pytest

from neuronforge.artifacts import leases
from neuronforge.artifacts.localcache import file_entries, publish_tree
from neuronforge.compilation.host_probe import HostMismatch, HostProbeFailed
from neuronforge.pipeline.buildstate import BuildState, LeaseRef
from neuronforge.pipeline.runner import STAGE_BY_NAME, execute
from neuronforge.pipeline.stage import Context
from neuronforge.pipeline.stages.smoke import SmokeFailed
from neuronforge.records.payload_manifest import PayloadManifest
from neuronforge.spec.target import TargetSpec
from neuronforge.stores import open_store
from tests.conftest import NEURON_TARGET
from tests.fakes import neuron_host_path

UNTIL_COMPILED = ("prepare", "fetch_checkpoint", "plan_target", "quantize_weights", "compile_graphs")


def _compiled(model: Path, target: dict, store, base: Path) -> BuildState:
    """Every stage up to the compile, each on a host of its own; the compile host has no device."""
    state = BuildState(model=str(model), target=TargetSpec.parse(target), store_uri=store.root_uri, max_new_tokens=4)
    for i, name in enumerate(UNTIL_COMPILED):
        state = execute(STAGE_BY_NAME[name], state, Context(store, base / f"host-{i}"))
        if name == "prepare":
            lease = leases.try_acquire(store, state.need("key"), "test")
            state = state.model_copy(update={"lease": LeaseRef.of(lease)})
    return state


def _smoke(state: BuildState, store, host: Path) -> BuildState:
    return execute(STAGE_BY_NAME["smoke"], state, Context(store, host))


def _restaged(state: BuildState, store, payload: Path) -> BuildState:
    """The build state pointing at `payload` (an altered copy) staged like the compile stages one,
    with a manifest that matches it: the store copy is intact, only its content is wrong."""
    prefix = f"builds/{state.need('key')}/altered-{payload.name}-{uuid.uuid4().hex[:8]}"
    ref = publish_tree(store, payload, prefix, PayloadManifest(files=file_entries(payload)))
    return state.model_copy(update={"compiled": state.need("compiled").model_copy(update={"build": ref})})


@pytest.mark.parametrize(
    ("fixture", "profile", "folder", "shard"),
    [
        ("fake_neuron", "vllm-neuron@2.26.1", "nxdi", "nxdi/weights/tp0_sharded_checkpoint.safetensors"),
        (
            "fake_optimum",
            "optimum-neuron",
            "optimum-neuron",
            "optimum-neuron/checkpoint/weights/tp0_sharded_checkpoint.safetensors",
        ),
    ],
)
def test_compiled_without_a_device_loaded_only_from_the_payload(
    fixture: str,
    profile: str,
    folder: str,
    shard: str,
    request: pytest.FixtureRequest,
    served_llama: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    request.getfixturevalue(fixture)
    store = open_store(f"file://{tmp_path / 'store'}")
    monkeypatch.delenv("FAKE_NEURON_DEVICES")  # the compile host: a CPU worker
    state = _compiled(served_llama, {**NEURON_TARGET, "profile": profile}, store, tmp_path)
    assert state.compiled is not None and state.compiled.record["compiler_invocations"] == 2
    assert [r.host for r in state.hosts if r.stage == "compile_graphs"] == ["cpu"]

    # The payload cannot be loaded where there is no device: the smoke test belongs on a Neuron host.
    # Its `neuron-ls` (the fake of SDK 2.26.1) says so before anything is downloaded or loaded ...
    with pytest.raises(HostProbeFailed, match='error="failed to discover Neuron devices"'):
        _smoke(state, store, tmp_path / "cpu-host")
    assert not (tmp_path / "cpu-host" / "objects").exists()
    # ... and without a `neuron-ls` the load itself fails as the runtime does.
    monkeypatch.setenv(
        "PATH", os.pathsep.join(p for p in os.environ["PATH"].split(os.pathsep) if "neuron_tools" not in p)
    )
    with pytest.raises(SmokeFailed, match="no Neuron device found"):
        _smoke(state, store, tmp_path / "cpu-host-2")
    monkeypatch.setenv("PATH", neuron_host_path())

    monkeypatch.setenv("FAKE_NEURON_DEVICES", "2")  # a Neuron host that did not compile it
    monkeypatch.setenv("FAKE_NEURON_INSTANCE_TYPE", "trn2.3xlarge")  # a host of another family: refused first
    with pytest.raises(
        HostMismatch, match=r"a trn2 host, and the target inf2\.xlarge tp 2 × LNC 1 was compiled for inf2"
    ):
        _smoke(state, store, tmp_path / "trn2-host")
    assert not (tmp_path / "trn2-host" / "objects").exists()
    monkeypatch.setenv("FAKE_NEURON_INSTANCE_TYPE", "inf2.xlarge")
    smoked = _smoke(state, store, tmp_path / "neuron-host")
    assert smoked.smoke.passed and [r.host for r in smoked.hosts if r.stage == "smoke"] == ["neuron"]
    assert smoked.smoke.host == {  # what the smoke result records of the host (SDK 2.26.1's `neuron-ls -j`)
        "probed": True,
        "format": "json-output",
        "devices": 2,
        "cores": 4,
        "instance_type": "inf2.xlarge",
        "lnc": None,
        "memory_per_device": 32 * 1024**3,
        "family": "inf2",
        "physical_cores": 4,
    }
    objects = tmp_path / "neuron-host" / "objects"
    assert {p.name for p in objects.iterdir() if not p.name.startswith(".")} == {state.compiled.build.manifest_sha256}

    good = objects / state.compiled.build.manifest_sha256
    # One published shard replaced by the weights of another model (a valid safetensors file): the
    # load reads it, so the tokens are wrong.
    from safetensors.torch import load_file, save_file

    other = tmp_path / "other"
    shutil.copytree(good, other, ignore=shutil.ignore_patterns("MANIFEST.json", ".nf-verified"))
    weights = load_file(other / shard)
    save_file(
        {k: (-v if k.endswith("lm_head.weight") or "embed" in k else v) for k, v in weights.items()}, other / shard
    )
    with pytest.raises(SmokeFailed, match="tokens match the reference, 4 required"):
        _smoke(_restaged(state, store, other), store, tmp_path / "neuron-host-2")

    # A placeholder where the compile's output was (what the old fakes published): refused at load.
    placeholder = tmp_path / "placeholder"
    shutil.copytree(good, placeholder, ignore=shutil.ignore_patterns("MANIFEST.json", ".nf-verified"))
    (placeholder / shard).write_bytes(b"FAKE")
    with pytest.raises(SmokeFailed, match="failed to load or run"):
        _smoke(_restaged(state, store, placeholder), store, tmp_path / "neuron-host-3")
    (placeholder / shard).write_bytes((good / shard).read_bytes())
    (placeholder / folder / "model.pt").write_bytes(b"FAKE TorchScript with NEFFs")
    with pytest.raises(SmokeFailed, match="PytorchStreamReader failed reading zip archive"):
        _smoke(_restaged(state, store, placeholder), store, tmp_path / "neuron-host-4")

    # model.pt of this compile with the neuron_config.json of another one: its graphs do not fit.
    config = json.loads((good / folder / "neuron_config.json").read_text())
    (placeholder / folder / "model.pt").write_bytes((good / folder / "model.pt").read_bytes())
    (placeholder / folder / "neuron_config.json").write_text(json.dumps(config, indent=1))
    with pytest.raises(SmokeFailed, match=r"compiled for another neuron_config\.json"):
        _smoke(_restaged(state, store, placeholder), store, tmp_path / "neuron-host-5")


def test_transformers_neuronx_cannot_compile_without_a_device(
    fake_tnx: Path, served_llama: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`to_neuron()` loads onto NeuronCores as it compiles: on a CPU worker it fails, which is why
    profile lmi-neuronx places its compile on its Neuron hosts."""
    from neuronforge.profiles import get_profile

    assert get_profile("lmi-neuronx").placement("compile").neuron_cores
    store = open_store(f"file://{tmp_path / 'store'}")
    monkeypatch.delenv("FAKE_NEURON_DEVICES")
    target = {**NEURON_TARGET, "profile": "lmi-neuronx", "dtype": "bf16"}
    with pytest.raises(Exception, match="no Neuron device found"):
        _compiled(served_llama, target, store, tmp_path)
    monkeypatch.setenv("FAKE_NEURON_DEVICES", "2")
    store = open_store(f"file://{tmp_path / 'store-2'}")
    state = _compiled(served_llama, target, store, tmp_path / "again")
    assert [r.host for r in state.hosts if r.stage == "compile_graphs"] == ["neuron"]
    assert _smoke(state, store, tmp_path / "smoke-host").smoke.passed
