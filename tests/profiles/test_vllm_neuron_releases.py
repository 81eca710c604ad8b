"""The NxD Inference vLLM line at its last releases: `vllm-neuron@2.28.0` (the last for inf2/trn1) and
`vllm-neuron@2.31.1` (the last NxD Inference release; trn2), beside 2.26.1.

Sources (the profile's comments cite each at its revision):
- the pins with their local labels: aws-neuron/deep-learning-containers tags 2.28.0 (66765488) and 2.31.1
  (8d2d8380), vllm/inference/{0.13.0,0.16.0}/Dockerfile.neuronx ARGs;
- the families: NxD Inference 2.29.0 release notes ("NxD Inference models are now only supported on Trn2
  and newer hardware ... should pin to release 2.28");
- MODEL_TYPES: aws-neuron/neuronx-distributed-inference cd3abf30 (0.8) and ef2731ef (0.9, the last
  published source) utils/constants.py;
- the loader after 0.2.0 (fork-observed): vllm_neuron/platform.py reads additional_config
  max_prompt_length, `_validate_override_neuron_config` makes it max_context_length and refuses a
  conflicting override_neuron_config.max_context_length.
Builds run through the whole pipeline with each release's FAKE SDK (tests/fakes: `SDK_2_28_0`, `SDK_2_31_1`).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from neuronforge.artifacts.published import verify_files
from neuronforge.profiles import registry
from neuronforge.profiles.base import Artifact, LaunchContext, read_env_file
from neuronforge.profiles.registry import get_profile, target_problems
from neuronforge.profiles.vllm_neuron import (
    SDK_2_26_1,
    SDK_2_28_0,
    SDK_2_31_1,
    launch_flags,
    launch_mismatches,
    vllm_neuron_config,
)
from neuronforge.spec.target import TargetSpec
from neuronforge.spec.toolchain import Toolchain
from neuronforge.stores import open_store
from tests.fakes import SDK_2_28_0 as FAKE_2_28_0
from tests.fakes import SDK_2_31_1 as FAKE_2_31_1
from tests.fakes import fake_python

V2281 = get_profile("vllm-neuron@2.28.0")
V2311 = get_profile("vllm-neuron@2.31.1")
V2261 = get_profile("vllm-neuron@2.26.1")
INSTANCE = {"2.26.1": "inf2.xlarge", "2.28.0": "inf2.xlarge", "2.31.1": "trn2.48xlarge"}


def target(release: str, **kw) -> TargetSpec:
    base = {"instance_type": INSTANCE[release], "tp_degree": 2, "batch_size": 4, "sequence_length": 64}
    return TargetSpec.parse({**base, "profile": f"vllm-neuron@{release}", **kw})


# -- pins and describe() ------------------------------------------------------------------------------------
def test_each_release_pins_its_dlc_toolchain_with_labels() -> None:
    """The compiler and NxD Inference as the release's vLLM DLC installs them (labels included): the
    two versions `toolchain_problems` compares; the plugin and vLLM are the serving host's."""
    rows = {p.version: p.describe() for p in (V2261, V2281, V2311)}
    assert {v: (r["compiler_version"], r["packages"]) for v, r in rows.items()} == {
        "2.26.1": ("2.21.33363.0+82129205", {"neuronx-distributed-inference": "0.6.10598"}),
        "2.28.0": ("2.23.6484.0+3b612583", {"neuronx-distributed-inference": "0.8.16251+f3ca5575"}),
        "2.31.1": ("2.26.6360.0+6f180f47", {"neuronx-distributed-inference": "0.10.18399+ed62453e"}),
    }
    assert {v: r["instance_families"] for v, r in rows.items()} == {
        "2.26.1": ["inf2", "trn1", "trn1n", "trn2"],
        "2.28.0": ["inf2", "trn1", "trn1n", "trn2"],
        "2.31.1": ["trn2"],
    }
    assert rows["2.28.0"]["title"].startswith("vLLM on NxD Inference (vllm-neuron 0.4.1, vLLM 0.13.0)")
    assert rows["2.31.1"]["title"].startswith("vLLM on NxD Inference (vllm-neuron 0.5.3, vLLM 0.16.0)")
    assert {r["toolchain_python"] for r in rows.values()} == {"/opt/conda/bin/python"}
    assert {r["queue"] for r in rows.values()} == {f"neuron-compile-{v}" for v in rows}
    # What vLLM can load from what the nxdi backend builds (MODEL_TYPES of each NxD Inference).
    assert rows["2.26.1"]["architectures"] == ["llama", "mixtral", "qwen2", "qwen3", "qwen3_moe"]
    assert rows["2.28.0"]["architectures"] == ["llama", "mixtral", "qwen2", "qwen3", "qwen3_moe"]
    # 0.9's MODEL_TYPES has mistral, but as NeuronMistralForCausalLM; the backend builds it with the Llama class.
    assert "mistral" in SDK_2_31_1.model_types and rows["2.31.1"]["architectures"] == rows["2.28.0"]["architectures"]
    assert SDK_2_28_0.image == (
        "public.ecr.aws/neuron/pytorch-inference-vllm-neuronx:0.13.0-neuronx-py312-sdk2.28.0-ubuntu24.04"
    )
    assert SDK_2_31_1.image == (
        "public.ecr.aws/neuron/pytorch-inference-vllm-neuronx:0.16.0-neuronx-py312-sdk2.31.1-ubuntu24.04"
    )


@pytest.mark.parametrize(("release", "folders"), [(SDK_2_28_0, FAKE_2_28_0), (SDK_2_31_1, FAKE_2_31_1)])
def test_the_fake_release_reports_exactly_the_pins_and_model_types(release, folders, tmp_path: Path) -> None:
    """Each fake SDK answers toolchain detection with the release's labelled versions, and its fake NxD
    Inference's MODEL_TYPES has the keys the profile says its loader maps."""
    import subprocess

    python = fake_python(tmp_path / "python", *folders)
    code = (
        "import json, neuronxcc\nfrom importlib import metadata\n"
        "from neuronx_distributed_inference.utils.constants import MODEL_TYPES\n"
        "names = ('neuronx-cc', 'neuronx-distributed-inference', 'neuronx-distributed', 'torch-neuronx')\n"
        "print(json.dumps([neuronxcc.__version__, *(metadata.version(p) for p in names), sorted(MODEL_TYPES)]))"
    )
    out = json.loads(subprocess.run([str(python), "-c", code], check=True, capture_output=True, text=True).stdout)
    assert out[:5] == [release.compiler, release.compiler, release.nxdi, release.nxd, release.torch_neuronx]
    assert set(out[5]) == release.model_types


def test_the_fake_nxdi_keeps_the_fields_its_release_added(tmp_path: Path) -> None:
    """NeuronConfig fields 0.8 added (is_eagle3, ...) are kept from SDK 2.28.0 on; 0.9's
    enable_ve_data_parallel only from 2.31.1; 2.26.1's 0.6 drops both with its warning."""
    import subprocess

    from tests.fakes import SDK_2_26_1 as FAKE_2_26_1

    code = (
        "from neuronx_distributed_inference.models.config import NeuronConfig\n"
        "nc = NeuronConfig(tp_degree=2, is_eagle3=True, enable_ve_data_parallel=True)\n"
        "print(getattr(nc, 'is_eagle3', None), getattr(nc, 'enable_ve_data_parallel', None))"
    )
    seen = {}
    for name, folders in (("2.26.1", FAKE_2_26_1), ("2.28.0", FAKE_2_28_0), ("2.31.1", FAKE_2_31_1)):
        python = fake_python(tmp_path / name / "python", *folders)
        done = subprocess.run([str(python), "-c", code], check=True, capture_output=True, text=True)
        seen[name] = (done.stdout.split(), "Unexpected keyword arguments" in done.stderr)
    assert seen == {
        "2.26.1": (["None", "None"], True),
        "2.28.0": (["True", "None"], True),
        "2.31.1": (["True", "True"], False),
    }


# -- families: 2.31.1 serves trn2 only -----------------------------------------------------------------------
@pytest.mark.parametrize("instance", ["inf2.xlarge", "trn1.32xlarge"])
def test_an_inf2_or_trn1_target_on_2_31_1_is_the_users_choice_with_the_kernel_note(instance: str) -> None:
    """AWS's pages disagree on 2.29-2.31 for Inf2/Trn1 (the 2.29.0 NxD Inference notes vs the DLC README
    and the manifest): the release table records both, so the planner warns instead of refusing, naming
    the kernel note and recommending 2.28.0 — which a bare profile name still resolves to."""
    t = TargetSpec.parse(
        {"instance_type": instance, "tp_degree": 2, "sequence_length": 64, "profile": "vllm-neuron@2.31.1"}
    )
    assert V2311.problems(t, "llama") == []
    family = t.instance.family
    warning = registry.lifecycle_warning(V2311, family)
    assert warning is not None and warning.startswith("AWS's statements disagree on whether vllm-neuron@2.31.1")
    assert "NxD Inference models are now only supported on Trn2 and newer hardware" in warning
    assert "deep-learning-containers/blob/2.31.1/README.md" in warning and "n2-manifest.json" in warning
    assert "recommended: vllm-neuron@2.28.0" in warning
    assert registry.get_profile("vllm-neuron", family).ref == "vllm-neuron@2.28.0"
    assert V2281.problems(t.model_copy(update={"profile": "vllm-neuron@2.28.0"}), "llama") == []


# -- max_prompt_length: servable from plugin 0.4 --------------------------------------------------------------
@pytest.mark.parametrize("profile", [V2281, V2311], ids=lambda p: p.ref)
def test_a_shorter_prompt_is_rendered_as_max_prompt_length_and_built_from_it(profile, tmp_path: Path) -> None:
    """compile_settings == what vllm_neuron_config builds from the serve.sh the profile renders:
    max_context_length = additional_config.max_prompt_length, seq_len = --max-model-len."""
    t = target(profile.version, max_context_length=32).normalized()
    assert target_problems(profile, t, "llama") == []
    settings = profile.compile_settings(t, "llama")["neuron_config"]
    assert (settings["max_context_length"], settings["seq_len"]) == (32, 64)
    ctx = LaunchContext(
        t, Toolchain("nxdi", "x", "neuronxcc", profile.pins.compiler_version), "s3://b/a/k", "s3://b/c", "llama"
    )
    files = profile.launch_spec(ctx)
    (tmp_path / "vllm.env").write_text(files["vllm.env"])
    flags = launch_flags(files["serve.sh"], read_env_file(tmp_path / "vllm.env"))
    assert flags["additional_config"]["max_prompt_length"] == 32
    assert "max_context_length" not in flags["additional_config"]["override_neuron_config"]
    assert vllm_neuron_config(flags, profile.release)[0] == settings
    assert launch_mismatches(settings, flags, profile.release) == []
    # ... which vllm-neuron 0.2.0 does not read: the same launch on 2.26.1 builds max_context_length 64.
    assert vllm_neuron_config(flags, SDK_2_26_1)[0]["max_context_length"] == 64


def test_2_26_1_still_refuses_a_shorter_prompt() -> None:
    (problem,) = V2261.problems(target("2.26.1", max_context_length=32), "llama")
    assert problem.startswith("max_context_length=32 with sequence_length=64: vLLM sets max_context_length = seq_len")


def test_a_conflicting_override_max_context_length_is_vllms_value_error() -> None:
    t = target("2.28.0", max_context_length=32)
    flags = V2281.launch_command_flags(t)
    flags["additional_config"]["override_neuron_config"]["max_context_length"] = 48
    kw, problems = vllm_neuron_config(flags, SDK_2_28_0)
    assert kw["max_context_length"] == 32  # the loader pops it and sets max_prompt_length's
    assert len(problems) == 1 and "Conflicting max_prompt_length settings" in problems[0]
    flags["additional_config"]["override_neuron_config"]["max_context_length"] = 32  # equal: accepted
    assert vllm_neuron_config(flags, SDK_2_28_0)[1] == []


def test_prefix_caching_with_batch_1_is_refused_only_where_the_readme_says_so() -> None:
    options = {"backend_options": {"prefix_caching": True}, "batch_size": 1}
    assert any("incorrect outputs" in p for p in V2261.problems(target("2.26.1", **options), "llama"))
    assert V2281.problems(target("2.28.0", **options), "llama") == []
    assert V2311.problems(target("2.31.1", **options), "llama") == []


def test_the_launch_files_name_the_release_and_its_image() -> None:
    t = target("2.31.1").normalized()
    ctx = LaunchContext(t, Toolchain("nxdi", "x", "neuronxcc", "y"), "s3://b/artifacts/k", "s3://b/c", "llama")
    files = V2311.launch_spec(ctx)
    env = dict(line.split("=", 1) for line in files["vllm.env"].splitlines() if line and not line.startswith("#"))
    assert {
        k: env[k]
        for k in ("VLLM_NEURON_VERSION", "VLLM_VERSION", "NEURON_SDK_RELEASE", "NEURONXCC_VERSION", "NXDI_VERSION")
    } == {
        "VLLM_NEURON_VERSION": "0.5.3",
        "VLLM_VERSION": "0.16.0",
        "NEURON_SDK_RELEASE": "2.31.1",
        "NEURONXCC_VERSION": "2.26.6360.0+6f180f47",
        "NXDI_VERSION": "0.10.18399+ed62453e",
    }
    # The DLC holds the plugin: no git-tag install as for 2.26.1's vllm-neuron 0.2.0.
    assert SDK_2_31_1.image in files["vllm.env"] and "git+https" not in files["vllm.env"]
    assert "/opt/vllm" in files["vllm.env"]
    assert "vLLM 0.16.0 + vllm-neuron 0.5.3" in files["serve.sh"]


# -- end to end: a tiny model built, smoke-tested and published with each release's fake ----------------------
@pytest.mark.parametrize(
    ("fixture", "release", "extra"),
    [
        ("fake_neuron_2_28_0", "2.28.0", {"max_context_length": 32}),
        ("fake_neuron_2_31_1", "2.31.1", {}),
    ],
)
def test_a_tiny_model_builds_and_publishes_on_the_release(
    fixture: str, release: str, extra: dict, request: pytest.FixtureRequest, served_llama: Path, tmp_path: Path
) -> None:
    from neuronforge.pipeline.runner import run_target

    request.getfixturevalue(fixture)
    store = open_store(f"file://{tmp_path / 'store'}")
    t = TargetSpec.parse(
        {"instance_type": INSTANCE[release], "tp_degree": 2, "sequence_length": 64, "dtype": "fp32",
         "profile": f"vllm-neuron@{release}", **extra}
    )  # fmt: skip
    outcome = run_target(str(served_llama), t, store, tmp_path / "work", max_new_tokens=4)
    manifest = outcome.published.manifest
    profile = get_profile(f"vllm-neuron@{release}")
    assert manifest.profile.ref == f"vllm-neuron@{release}"
    assert manifest.toolchain.compiler_version == profile.pins.compiler_version
    assert manifest.toolchain.packages["neuronx-distributed-inference"] == profile.release.nxdi
    assert manifest.smoke.passed
    # The published folder passes the release's preflight; its launch files name the release.
    root = tmp_path / "published"
    root.mkdir()
    assert verify_files(store, outcome.published.prefix, manifest.files, download_to=root) == []
    artifact = Artifact(root, t.normalized(), Toolchain.from_json(manifest.toolchain.model_dump()))
    assert profile.preflight(artifact) == []
    env = read_env_file(root / "launch" / "vllm.env")
    assert (env["NEURON_SDK_RELEASE"], env["NXDI_VERSION"]) == (release, profile.release.nxdi)
    nc = json.loads((root / "nxdi" / "neuron_config.json").read_text())["neuron_config"]
    assert nc["max_context_length"] == extra.get("max_context_length", 64) and nc["seq_len"] == 64
    assert "is_eagle3" in nc  # a field NxD Inference 0.8 added, kept by the release's fake

    # A published launch edited to another prompt length no longer matches the build.
    serve = root / "launch" / "serve.sh"
    if extra:
        serve.write_text(serve.read_text().replace('"max_prompt_length": 32', '"max_prompt_length": 48'))
        assert any("max_context_length=32" in p for p in profile.preflight(artifact))
    shutil.rmtree(root / "nxdi" / "weights")
    assert any("pre-sharded rank files" in p for p in profile.preflight(artifact))
