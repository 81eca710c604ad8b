"""Each family LMI serves with transformers-neuronx besides Llama, through the whole pipeline
(`neuronforge.pipeline.runner.run_target`, what `neuronforge run` runs) with profile `lmi-neuronx` and the
FAKE SDK 2.21.1 (transformers-neuronx 0.13.380, neuronx-cc 2.16.372.0) into a `file://` store:
plan -> quantize (int8 where the class takes it: BLOOM, OPT, GPT-2) -> compile -> smoke -> publish,
then `neuronforge verify` (the profile's preflight) on the published artifact.

The checkpoints are tiny random models written by `transformers` from the real configs in
tests/data/model-configs/, scaled down (tests/backends/tiny_families.make_scaled): each family's own
activation, rotary fraction, parallel residual, ALiBi, tied or untied head, at 2 layers and width 32.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from neuronforge.compilation.backends.tnx import CLASSES, NEFF_DIR
from neuronforge.pipeline.runner import TargetOutcome, run_target
from neuronforge.profiles.base import Artifact
from neuronforge.profiles.lmi_neuronx import COMPILER_VERSION, PROFILE, parse_properties
from neuronforge.spec.target import TargetSpec
from neuronforge.stores import open_store
from tests.backends.tiny_families import make_scaled
from tests.fakes import SDK_2_21_1

CONFIGS = Path(__file__).parents[1] / "data" / "model-configs"
REAL = {
    "gpt2": "openai-community--gpt2-xl.json",
    "opt": "facebook--opt-13b.json",
    "bloom": "bigscience--bloom-560m.json",
    "gptj": "EleutherAI--gpt-j-6b.json",
    "gpt_neox": "EleutherAI--gpt-neox-20b.json",
}
FAMILIES = tuple(REAL)
INT8 = tuple(mt for mt in FAMILIES if CLASSES[mt].int8)


def test_int8_is_what_the_classes_say() -> None:
    """The families this test quantizes are the classes that take NeuronConfig.quant."""
    assert set(INT8) == {"gpt2", "opt", "bloom"}


@pytest.fixture(scope="module")
def sdk(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, pytest.MonkeyPatch]]:
    """The FAKE SDK 2.21.1 as the toolchain interpreter, on a host with Neuron devices, for the whole
    module (every family's build shares it); yields the folder and the patch."""
    from tests.conftest import use_fake_sdk

    base = tmp_path_factory.mktemp("lmi-families")
    with pytest.MonkeyPatch.context() as mp:
        use_fake_sdk(mp, "2.21.1", SDK_2_21_1, base)
        yield base, mp


@pytest.fixture(scope="module", params=FAMILIES)
def built(request: pytest.FixtureRequest, sdk: tuple) -> tuple[str, TargetOutcome, Path, Path]:
    """One family's tiny checkpoint built for lmi-neuronx (inf2.xlarge, tp 2, 2 sequences, 64 tokens;
    int8 where its class takes it) by the pipeline into a file:// store. Yields (model_type, the
    outcome, the store's folder, the compile log)."""
    model_type = request.param
    base, mp = sdk
    where = base / model_type
    checkpoint = make_scaled(CONFIGS / REAL[model_type], where / "ckpt")
    log = where / "compiles.log"
    log.touch()
    mp.setenv("FAKE_NEURON_COMPILE_LOG", str(log))
    spec = {"instance_type": "inf2.xlarge", "tp_degree": 2, "batch_size": 2, "sequence_length": 64}
    if model_type in INT8:
        spec["quantization"] = "int8:per_channel"
    t = TargetSpec.parse({**spec, "profile": "lmi-neuronx"})
    out = run_target(str(checkpoint), t, open_store(f"file://{where / 'store'}"), where / "work")
    return model_type, out, where / "store", log


def test_each_family_is_planned_built_smoked_and_published(built: tuple) -> None:
    model_type, out, store_dir, log = built
    c = CLASSES[model_type]
    assert out.status == "published"
    manifest = out.published.manifest.to_json()  # as stored
    assert manifest["profile"]["ref"] == "lmi-neuronx@2.21.1"
    assert manifest["toolchain"]["packages"]["transformers-neuronx"] == "0.13.380"
    # plan: every check passed, the toolchain's among them
    assert out.state is not None and out.state.plan
    assert any("transformers-neuronx" in m or "tnx" in m for m in out.state.plan), out.state.plan
    # quantize: a quantized checkpoint for int8 classes; transformers-neuronx quantizes at load
    quantized = manifest["compile"].get("quantized")
    assert (quantized is not None) == c.int8
    if quantized:
        assert quantized["tensors_quantized"] > 0 and quantized["uri"].startswith("file://")
    # compile: one token graph for n_positions 64 (+ one context graph where the class has them)
    graphs = manifest["compile"]["graphs"]
    assert len(graphs) == manifest["compile"]["compiler_invocations"] == (2 if c.context_graphs else 1)
    # smoke: passed, and loading compiled nothing (the fake's log holds the compile's graphs only)
    assert manifest["smoke"]["passed"], manifest["smoke"]
    assert len(log.read_text().split()) == len(graphs)
    root = store_dir / out.published.prefix
    props = parse_properties((root / "launch/serving.properties").read_text())
    assert props["option.model_loader"] == "tnx" and props["option.n_positions"] == "64"
    assert ("option.context_length_estimate" in props) == c.context_length_estimate
    assert (props.get("option.quantize") == "static_int8") == c.int8
    assert ("option.compiled_graph_path" in props) == c.serializable  # GPT-J / NeoX: no load(dir)
    neffs = sorted((root / "split" / NEFF_DIR).glob("*.neff"))
    assert len(neffs) == (len(graphs) if c.serializable else 0)  # model.load(dir) finds every graph
    assert PROFILE.preflight(Artifact.from_manifest(root, out.published.manifest)) == []


def test_verify_passes_on_each_published_family(built: tuple, tmp_path: Path, capsys) -> None:
    from neuronforge.interfaces.cli import main

    _model_type, out, store_dir, _log = built
    store = open_store(f"file://{store_dir}")
    assert main(["verify", store.uri(out.published.prefix), "--work-dir", str(tmp_path)]) == 0
    assert "lmi-neuronx@2.21.1" in capsys.readouterr().out


def test_the_published_cache_holds_every_graph(built: tuple) -> None:
    """What LMI's load looks up (the entries neff-cache.json names) is complete in the store's cache."""
    import json

    _model_type, out, store_dir, _log = built
    cache = json.loads((store_dir / out.published.prefix / "launch/neff-cache.json").read_text())
    assert cache["entries"] and cache["compiler_dir"] == f"neuronxcc-{COMPILER_VERSION}"
    for entry in cache["entries"]:
        assert (store_dir / "neuron-cache" / cache["compiler_dir"] / entry / "model.done").exists()


def test_the_store_mounted_at_another_path_serves_through_run_lmi_with_zero_compiles(
    built: tuple, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 38 case 8: the file:// store copied to another host's mount point (another path, another
    depth) while the publisher's folder is gone. Nothing LMI reads names the publishing host's paths;
    `run-lmi.sh --print` resolves the mounts where the store now is; LMI's start-up through that docker
    command (tests/profiles/lmi_host.py) loads every graph — through model.load(split/neff) for the
    classes that have it, through the NEFF cache entries copied into the run folder and
    NEURON_COMPILE_CACHE_URL for GPT-J / GPT-NeoX — and the fake compiles nothing."""
    import os
    import shutil

    from tests.profiles.lmi_host import lmi_start, run_lmi_print

    model_type, out, store_dir, log = built
    moved = tmp_path / "other-host" / "mnt" / "nf"
    shutil.copytree(store_dir, moved)
    away = store_dir.with_name(f"{store_dir.name}.away")
    store_dir.rename(away)
    try:
        launch = moved / out.published.prefix / "launch"
        for name in ("serving.properties", "lmi.env", "run-lmi.sh"):
            assert str(store_dir) not in (launch / name).read_text(), name  # no path of the publishing host
        env = {"PATH": os.environ["PATH"], "LMI_RUN_DIR": str(tmp_path / "run"), "HOME": str(tmp_path)}
        done, run = run_lmi_print(launch, env)
        assert run is not None, done.stderr
        assert run.image == "deepjavalibrary/djl-serving:0.33.0-pytorch-inf2" and run.devices == ("/dev/neuron0",)
        assert run.host_path("/opt/ml/model/split/model") == moved / out.published.prefix / "split" / "model"
        copied = sorted((tmp_path / "run" / "neuron-cache").rglob("model.done"))
        assert len(copied) == (0 if CLASSES[model_type].serializable else len(out.published.manifest.compile["graphs"]))
        before = log.read_text()
        monkeypatch.setenv("FAKE_NEURON_COMPILE_LOG", str(log))
        result = lmi_start(run, tmp_path / "container", [3, 1, 4])
        assert result.get("compiled", []) == [] and len(result["rows"][0]["tokens"]) == 4
        assert log.read_text() == before  # zero compiles
        # `verify` where the store now is finds the NEFF cache entries there (profiles.base.relocated),
        # pointed at the artifact's folder or at the store's root with its cache key.
        from neuronforge.interfaces.cli import main

        artifact_uri = f"file://{moved / out.published.prefix}"
        assert main(["verify", artifact_uri, "--work-dir", str(tmp_path / "v1")]) == 0
        key = out.published.key
        assert main(["verify", key, "--store", f"file://{moved}", "--work-dir", str(tmp_path / "v2")]) == 0
    finally:
        away.rename(store_dir)
