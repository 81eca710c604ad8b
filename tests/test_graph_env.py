"""The stray-environment rule (neuronforge/compilation/graph_env.py, issue 38 cases 1 and 10): one table of
the variables that shape graphs or redirect a compile's cache, applied by every Neuron backend's compile
(refused before compiling unless declared) and by every toolchain child (the worker's value never reaches
it: a smoke load runs with the launch files' environment only).

Through the real code paths: the compile stage's `compile_target` for each Neuron backend (its toolchain
child replaced by a stub that must not run when the rule refuses), whole builds of vllm-neuron-native
(the FAKE plugin, which hashes NEURON_CC_FLAGS into its key like the issue's measurement) and of
lmi-neuronx (the FAKE transformers-neuronx), and the smoke load of a published vllm-neuron-native
artifact on a worker that carries stray variables."""

from __future__ import annotations

import json
import os
import shutil
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from neuronforge.common.errors import InvalidInput
from neuronforge.compilation import graph_env as ge
from neuronforge.compilation.backends.base import Backend
from neuronforge.compilation.backends.interpreter import child_env
from neuronforge.spec.target import TargetSpec
from neuronforge.spec.tinymodel import make_tiny_llama
from neuronforge.stores import open_store

STRAY = "is set in the worker's environment but not by the profile or target"


# -- the table ------------------------------------------------------------------------------------------
def test_every_rule_has_an_action_an_effect_and_evidence() -> None:
    for rule in ge.RULES:
        assert rule.action in ("refuse", "override") and rule.effect and rule.read_by, rule
        assert rule.evidence and all(e.proof in ("code", "docs", "unverified") and e.where for e in rule.evidence)
        # an unverified fact never stands alone: some code or docs says why the variable is in the table
        assert any(e.proof != "unverified" for e in rule.evidence), rule.names


def test_each_variable_is_governed_by_exactly_one_rule() -> None:
    probes = [n[:-1] + "X" if n.endswith("*") else n for r in ge.RULES for n in r.names]
    for name in probes:
        assert sum(r.matches(name) for r in ge.RULES) == 1, name
    assert ge.shapes_graphs("XLA_USE_BF16") and ge.shapes_graphs("NEURON_INTERNAL_THOMAS_PREFETCH")
    assert ge.governed("NEURON_LIBTORCH_CACHE_ROOT") and not ge.shapes_graphs("NEURON_LIBTORCH_CACHE_ROOT")
    # what the launch files set to fail closed, and the runtime's own knobs, are not the rule's
    for name in ("VLLM_NEURON_DISABLE_WARMUP_COMPILE", "NEURON_LIBTORCH_ASSERT_CACHE_HIT", "NEURON_RT_LOG_LEVEL"):
        assert not ge.governed(name), name


def test_the_docs_table_is_rendered_from_the_rules() -> None:
    from neuronforge.interfaces import graph_env_table

    table = graph_env_table.SECTION
    page = table.page.read_text()
    assert table.on_page(page), f"docs/profiles.md lost its table markers ({table.begin})"
    assert table.on_page(page) == table.render(), (
        f"docs/profiles.md's compile-environment table differs from graph_env.RULES: run `{table.regenerate}`"
    )
    assert all(f"`{n}`" in page for r in ge.RULES for n in r.names)


def test_a_stray_variable_is_refused_in_one_line_naming_it_its_value_and_the_fix() -> None:
    declared = {"NEURON_CC_FLAGS": "-O1", "NEURON_COMPILE_CACHE_URL": "/c"}
    with pytest.raises(InvalidInput) as caught:
        ge.graph_env(declared, {"NEURON_RANK_ID": "1", "NEURON_LOCAL_TP": "2", "PATH": "/bin"})
    message = str(caught.value)
    assert "\n" not in message
    assert message.startswith(f"compile: NEURON_LOCAL_TP='2' {STRAY} (also ['NEURON_RANK_ID'])")
    assert "pipeline rank, local TP degree" in message and message.endswith(f"unset it on the worker ({ge.DOCS})")
    # declared: the worker's value is replaced, the declared one recorded (cache locations are not graphs)
    assert ge.graph_env(declared, {"NEURON_CC_FLAGS": "-O3"}) == {"NEURON_CC_FLAGS": "-O1"}
    # an override variable on the worker is not refused: the backend sets or clears it
    assert ge.graph_env(declared, {"NEURON_LIBTORCH_CACHE_ROOT": "/elsewhere"}) == {"NEURON_CC_FLAGS": "-O1"}


def test_a_child_takes_governed_variables_only_from_the_backend(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NEURON_CC_FLAGS", "-O2")
    monkeypatch.setenv("XLA_FLAGS", "--xla_dump_to=/tmp/x")
    monkeypatch.setenv("NEURON_LIBTORCH_CACHE_ROOT", "/elsewhere")
    monkeypatch.setenv("NEURONFORGE_UNRELATED", "kept")
    env = child_env({"NEURON_PLATFORM_TARGET_OVERRIDE": "trn2", "VLLM_CACHE_ROOT": "/mine"})
    assert env["NEURON_PLATFORM_TARGET_OVERRIDE"] == "trn2" and env["VLLM_CACHE_ROOT"] == "/mine"
    assert not {"NEURON_CC_FLAGS", "XLA_FLAGS", "NEURON_LIBTORCH_CACHE_ROOT"} & set(env)
    assert env["NEURONFORGE_UNRELATED"] == "kept"
    assert child_env({"NEURON_CC_FLAGS": "-O1"})["NEURON_CC_FLAGS"] == "-O1"


# -- every Neuron backend's compile -------------------------------------------------------------------------
NEURON_TARGETS = {
    "optimum": {"instance_type": "inf2.xlarge", "tp_degree": 2, "batch_size": 1, "sequence_length": 64,
                "profile": "optimum-neuron"},
    "nxdi": {"instance_type": "inf2.xlarge", "tp_degree": 2, "sequence_length": 64, "profile": "vllm-neuron@2.26.1"},
    "tnx": {"instance_type": "inf2.xlarge", "tp_degree": 2, "batch_size": 2, "sequence_length": 64,
            "profile": "lmi-neuronx"},
    "vllm-native": {"instance_type": "trn2.3xlarge", "tp_degree": 4, "batch_size": 2, "sequence_length": 256,
                    "dtype": "fp32", "profile": "vllm-neuron-native@2.32"},
}  # fmt: skip


def test_the_cases_cover_every_neuron_backend() -> None:
    """A backend added later (or one that overrides `compile`) is checked by the test below only if listed."""
    from neuronforge.compilation.backends import all_backends

    assert {n for n, b in all_backends().items() if b.uses_neuron} == set(NEURON_TARGETS)


class Ran(Exception):
    """The stub toolchain child ran (with this environment)."""

    def __init__(self, env: dict[str, str]) -> None:
        super().__init__("ran")
        self.env = env


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_tiny_llama(tmp_path_factory.mktemp("graph-env") / "llama", tokenizer=True)


def _compile(backend: str, checkpoint: Path, work: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """The compile stage's `compile_target` for a target of `backend`'s profile, the toolchain child a
    stub that raises `Ran` with the environment the backend gave it."""
    from neuronforge.pipeline.stages.compile import CompileInput, compile_target
    from neuronforge.profiles.registry import compile_request
    from neuronforge.spec.source import ModelSource
    from neuronforge.spec.toolchain import Toolchain

    def run(self, python, action, spec, *, env, timeout_s, what):
        raise Ran(env)

    monkeypatch.setattr(Backend, "run", run)
    request = compile_request(ModelSource("local", str(checkpoint)), TargetSpec.parse(NEURON_TARGETS[backend]))
    assert request.profile.backend.name == backend
    toolchain = Toolchain(backend, "1.0", "neuronxcc", "2.0.0", {}, ("--auto-cast=none",))
    try:
        compile_target(CompileInput(request, toolchain, "k" * 64, checkpoint, work))
    except Ran as ran:
        return ran.env
    raise AssertionError("the compile never started its toolchain")


@pytest.mark.parametrize("backend", sorted(NEURON_TARGETS))
@pytest.mark.parametrize(
    ("name", "value"),
    [("NEURON_CC_FLAGS", "-O2"), ("XLA_FLAGS", "--xla_dump_to=/tmp/x"), ("NEURON_RANK_ID", "1"),
     ("NEURON_LOGICAL_NC_CONFIG", "1"), ("VLLM_NEURON_BACKEND", "neuron_native")],
)  # fmt: skip
def test_every_neuron_backend_refuses_a_graph_shaping_variable_it_does_not_set(
    backend: str, name: str, value: str, checkpoint: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Refused before the toolchain starts unless the backend sets the variable itself, in which case
    the child gets the backend's value, never the worker's."""
    declared = _compile(backend, checkpoint, tmp_path / "clean", monkeypatch)
    monkeypatch.setenv(name, value)
    if name in declared:  # e.g. NEURON_CC_FLAGS for the libneuronxla backends (the LMI image sets it: ENV)
        env = _compile(backend, checkpoint, tmp_path / "declared", monkeypatch)
        assert child_env(env)[name] == declared[name] != value
        return
    with pytest.raises(InvalidInput, match=rf"^compile: {name}='{value}' {STRAY}: .*; unset it on the worker"):
        _compile(backend, checkpoint, tmp_path / "stray", monkeypatch)


def test_the_vllm_native_compile_is_checked_as_the_others_are(
    checkpoint: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """It overrides `Backend.compile`: the rule must reach it all the same (issue 38 case 1), and the
    recorded graph environment is what its cache manifest's env (hence vllm.env) carries."""
    monkeypatch.setenv("NEURON_CC_FLAGS", "-O2")
    with pytest.raises(InvalidInput, match=f"NEURON_CC_FLAGS='-O2' {STRAY}"):
        _compile("vllm-native", checkpoint, tmp_path, monkeypatch)
    monkeypatch.delenv("NEURON_CC_FLAGS")
    env = _compile("vllm-native", checkpoint, tmp_path, monkeypatch)
    assert ge.graph_env(env, {}) == {"NEURON_LOGICAL_NC_CONFIG": "2", "NEURON_PLATFORM_TARGET_OVERRIDE": "trn2"}


# -- whole builds through the fakes ---------------------------------------------------------------------------
@pytest.fixture
def vllm_fake(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, s3_endpoint: str) -> Path:
    """SDK 2.32.0's image interpreter is the FAKE vLLM Neuron plugin's; a fresh S3 bucket is the store."""
    import boto3

    from tests.fakes import VLLM_SDK_2_32_0, fake_python

    monkeypatch.setenv("AWS_ENDPOINT_URL", s3_endpoint)
    monkeypatch.setenv("NEURONFORGE_TOOLCHAIN_PYTHON_2_32_0", str(fake_python(tmp_path / "py232", *VLLM_SDK_2_32_0)))
    monkeypatch.setenv("FAKE_NEURON_DEVICES", "2")
    bucket = f"nf-{uuid.uuid4().hex[:12]}"
    boto3.client("s3", endpoint_url=s3_endpoint).create_bucket(Bucket=bucket)
    return Path(bucket)


@pytest.mark.parametrize(("name", "value"), [("NEURON_CC_FLAGS", "-O2"), ("XLA_FLAGS", "--xla_cpu_use_thunk_runtime")])
def test_a_vllm_native_build_with_a_stray_variable_is_refused_and_publishes_nothing(
    vllm_fake: Path, checkpoint: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str, value: str
) -> None:
    """Issue 38 case 1: with NEURON_CC_FLAGS=-O2 on the compile worker every key changed, the manifest,
    vllm.env and preflight said nothing, and the smoke passed; a pod from serve.sh missed every graph."""
    from neuronforge.pipeline.runner import run_target

    store = open_store(f"s3://{vllm_fake}/farm")
    monkeypatch.setenv(name, value)
    t = TargetSpec.parse(NEURON_TARGETS["vllm-native"])
    with pytest.raises(InvalidInput, match=rf"^compile: {name}='{value}' {STRAY}"):
        run_target(str(checkpoint), t, store, tmp_path / "work")
    assert store.list("artifacts") == [] and store.list("index") == [] and store.list("vllm-neuron-cache") == []
    assert not any((tmp_path / "work").rglob("compile_cache/*/graph.hlo"))  # nothing was compiled


def test_an_lmi_build_with_a_transformers_neuronx_variable_is_refused(
    fake_tnx: Path, checkpoint: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 38 case 10: NEURON_RANK_ID (transformers-neuronx NeuronConfig.__init__) picks the layers and
    shards a graph holds; the compile's child read it from the worker, unrecorded."""
    from neuronforge.pipeline.runner import run_target

    store = open_store(f"file://{tmp_path / 'store'}")
    monkeypatch.setenv("NEURON_RANK_ID", "1")
    with pytest.raises(InvalidInput, match=rf"^compile: NEURON_RANK_ID='1' {STRAY}"):
        run_target(str(checkpoint), TargetSpec.parse(NEURON_TARGETS["tnx"]), store, tmp_path / "work")
    assert store.list("artifacts") == [] and store.list("index") == []
    assert not fake_tnx.exists() or not fake_tnx.read_text().strip()  # the fake compiler never ran


# -- the smoke load runs with the launch files' environment -------------------------------------------------
@pytest.fixture(scope="module")
def published_native(tmp_path_factory: pytest.TempPathFactory, s3_endpoint: str) -> Iterator[dict]:
    """A vllm-neuron-native@2.32 artifact built by the pipeline on a clean worker, downloaded."""
    import boto3

    from neuronforge.pipeline.runner import run_target
    from tests.fakes import VLLM_SDK_2_32_0, fake_python

    base = tmp_path_factory.mktemp("native")
    bucket = f"nf-{uuid.uuid4().hex[:12]}"
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("AWS_ENDPOINT_URL", s3_endpoint)
        boto3.client("s3", endpoint_url=s3_endpoint).create_bucket(Bucket=bucket)
        python = fake_python(base / "py232", *VLLM_SDK_2_32_0)
        mp.setenv("NEURONFORGE_TOOLCHAIN_PYTHON_2_32_0", str(python))
        mp.setenv("FAKE_NEURON_DEVICES", "2")
        store = open_store(f"s3://{bucket}/farm")
        model = make_tiny_llama(base / "llama", tokenizer=True)
        t = TargetSpec.parse(NEURON_TARGETS["vllm-native"])
        outcome = run_target(str(model), t, store, base / "work")
        assert outcome.status == "published"
        prefix = outcome.published.manifest_uri.removeprefix(store.uri("")).rsplit("/", 1)[0].lstrip("/")
        store.get_tree(prefix, base / "artifact")
        yield {"root": base / "artifact", "store": store, "python": python, "target": t, "base": base}


def _spy_python(real: Path, where: Path) -> Path:
    """An interpreter that records each child's environment (one JSON file per process), then runs `real`."""
    where.mkdir(parents=True, exist_ok=True)
    spy = where / "python"
    dump = (
        f'import json, os; json.dump(dict(os.environ), open(os.path.join("{where}", f"env-{{os.getpid()}}.json"), "w"))'
    )
    spy.write_text(f'#!/bin/sh\n{sys.executable} -c \'{dump}\'\nexec "{real}" "$@"\n')
    spy.chmod(0o755)
    return spy


def test_the_smoke_load_gets_the_launch_files_graph_environment_not_the_workers(
    published_native: dict, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, s3_endpoint: str
) -> None:
    """Issue 38 case 1's smoke passed because its child inherited the worker's NEURON_CC_FLAGS, which a pod
    started from serve.sh does not have. Graph-shaping and cache-redirecting variables the launch files do not
    set are now removed from the child: the worker's -O2 (which the fake plugin hashes into every key) cannot
    make the load compute other keys, nor a stray cache root or CPU mode let it look elsewhere."""
    from neuronforge.compilation.compile_cache import CompileCache
    from neuronforge.pipeline.stages.smoke import SmokeInput, smoke_test
    from neuronforge.profiles import get_profile

    item = published_native
    spies = tmp_path / "spy"
    monkeypatch.setenv("AWS_ENDPOINT_URL", s3_endpoint)
    monkeypatch.setenv("FAKE_NEURON_DEVICES", "2")
    monkeypatch.setenv("NEURONFORGE_TOOLCHAIN_PYTHON_2_32_0", str(_spy_python(item["python"], spies)))
    stray = {
        "NEURON_CC_FLAGS": "-O2",
        "XLA_USE_BF16": "1",
        "NEURON_LIBTORCH_CACHE_ROOT": str(tmp_path / "elsewhere"),
        "VLLM_NEURON_CPU_COMPILE": "1",
    }
    for k, v in stray.items():
        monkeypatch.setenv(k, v)
    profile = get_profile(item["target"].profile)
    payload = tmp_path / "payload"
    shutil.copytree(item["root"], payload)
    load = profile.smoke_load(payload)
    cache = CompileCache(tmp_path / "smoke-cache", "neuronxcc", profile.release.compiler, item["store"])
    result = smoke_test(SmokeInput(payload, load, profile.backend.name, cache, profile.python(), timeout_s=300))
    envs = [json.loads(p.read_text()) for p in spies.glob("env-*.json")]
    assert envs, "the smoke load never started the toolchain"
    for env in envs:
        assert not [k for k, v in stray.items() if env.get(k) == v], env
        assert not {"NEURON_CC_FLAGS", "XLA_USE_BF16", "VLLM_NEURON_CPU_COMPILE"} & set(env)
        assert env["NEURON_LIBTORCH_CACHE_ROOT"] == env["VLLM_CACHE_ROOT"]  # the backend's, both roots the same
        assert env["NEURON_PLATFORM_TARGET_OVERRIDE"] == "trn2" and env["NEURON_LOGICAL_NC_CONFIG"] == "2"
    assert result.passed, result.reason  # every graph hit, as on a pod started from serve.sh
    assert os.environ["NEURON_CC_FLAGS"] == "-O2"  # the worker's own environment is left as it was


def test_preflight_names_a_graph_shaping_variable_in_vllm_env_the_manifest_does_not_record(
    published_native: dict, tmp_path: Path
) -> None:
    """vllm.env must carry each graph-shaping variable the manifest recorded and no other."""
    from neuronforge.profiles import get_profile
    from neuronforge.profiles.base import Artifact
    from neuronforge.spec.toolchain import Toolchain

    root = tmp_path / "artifact"
    shutil.copytree(published_native["root"], root)
    manifest = json.loads((root / "manifest.json").read_text())
    assert manifest["compile"]["graph_env"] == {
        "NEURON_LOGICAL_NC_CONFIG": "2",
        "NEURON_PLATFORM_TARGET_OVERRIDE": "trn2",
    }  # the compile record, as for every Neuron backend
    profile = get_profile(published_native["target"].profile)
    artifact = Artifact(root, published_native["target"].normalized(), Toolchain.from_json(manifest["toolchain"]))
    assert not profile.preflight(artifact)
    with (root / "launch" / "vllm.env").open("a") as f:
        f.write("NEURON_CC_FLAGS=-O2\n")
    problems = profile.preflight(artifact)
    assert any(p.startswith("launch/vllm.env: NEURON_CC_FLAGS='-O2' changes the compiled graphs") for p in problems)
