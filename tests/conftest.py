"""Shared fixtures: tiny checkpoints generated on the spot, a real S3 HTTP endpoint on 127.0.0.1,
and an environment that can never reach the network (the Hub is offline, AWS points at loopback)."""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import subprocess
import sys
import tempfile
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

# Before anything imports huggingface_hub / boto3.
os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["HF_HUB_DISABLE_TELEMETRY"] = "1"
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
for var in ("AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3"):
    os.environ.pop(var, None)
os.environ["AWS_ACCESS_KEY_ID"] = "testing"
os.environ["AWS_SECRET_ACCESS_KEY"] = "testing"
os.environ["AWS_DEFAULT_REGION"] = "us-east-1"

# Airflow: a private home with a SQLite DB, migrated once per session (airflow_db fixture).
_AIRFLOW_HOME = tempfile.mkdtemp(prefix="nf-airflow-")
os.environ["AIRFLOW_HOME"] = _AIRFLOW_HOME
os.environ["AIRFLOW__CORE__LOAD_EXAMPLES"] = "False"
os.environ["AIRFLOW__CORE__DAGS_FOLDER"] = str(Path(__file__).resolve().parents[1] / "dags")

from neuronforge.pipeline.runner import TargetOutcome, run_target  # noqa: E402
from neuronforge.spec.target import TargetSpec  # noqa: E402
from neuronforge.stores import ArtifactStore, open_store  # noqa: E402
from tests.checkpoints import make_tiny_llama  # noqa: E402
from tests.fakes import FAKES, neuron_host_path  # noqa: E402, F401  (tests import FAKES from here)
from tests.fakes.hub import FakeHub  # noqa: E402


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="session")
def s3_endpoint() -> Iterator[str]:
    """A real S3 HTTP endpoint (moto's server) on 127.0.0.1: boto3 talks HTTP to it, nothing patched."""
    from moto.server import ThreadedMotoServer

    port = _free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.stop()


@pytest.fixture
def s3_env(s3_endpoint: str, monkeypatch: pytest.MonkeyPatch) -> str:
    """Point the standard AWS environment at the local endpoint (as a user would with
    AWS_ENDPOINT_URL) and return it."""
    monkeypatch.setenv("AWS_ENDPOINT_URL", s3_endpoint)
    return s3_endpoint


@pytest.fixture
def s3_bucket(s3_env: str) -> str:
    import boto3

    name = f"nf-{uuid.uuid4().hex[:12]}"
    boto3.client("s3", endpoint_url=s3_env).create_bucket(Bucket=name)
    return name


@pytest.fixture
def fake_hub(tmp_path: Path) -> Iterator[FakeHub]:
    """A FAKE Hugging Face Hub (tests/fakes/hub) on 127.0.0.1 with no repos; token `hf_writer` is user `me`,
    who may write `me/*` and `my-org/*`. `tests.fakes.hub.online(hub, monkeypatch, request)` points this
    process's huggingface_hub at it; a subprocess needs `HF_ENDPOINT=hub.endpoint`."""
    with FakeHub(tmp_path / "fake-hub", tokens={"hf_writer": ("me", ["my-org"])}) as hub:
        yield hub


@pytest.fixture(scope="session")
def tiny_llama_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_tiny_llama(tmp_path_factory.mktemp("tiny-llama") / "tiny-llama")


@pytest.fixture(scope="session")
def served_llama(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny Llama with a tokenizer: what a serving stack needs beside the weights (vLLM loads the
    tokenizer from the served folder), so Neuron profiles' preflight accepts what it publishes."""
    return make_tiny_llama(tmp_path_factory.mktemp("served-llama") / "tiny-llama", tokenizer=True)


@pytest.fixture
def tiny_llama(tiny_llama_template: Path, tmp_path: Path) -> Path:
    """A fresh copy of a 2-layer Llama checkpoint the test may modify."""
    import shutil

    dest = tmp_path / "tiny-llama"
    shutil.copytree(tiny_llama_template, dest)
    return dest


@pytest.fixture(scope="session")
def airflow_db() -> str:
    """Migrate the session's SQLite metadata DB (about 5 s)."""
    airflow = Path(sys.executable).parent / "airflow"
    subprocess.run([str(airflow), "db", "migrate"], check=True, capture_output=True)
    return _AIRFLOW_HOME


TARGET = {
    "instance_type": "inf2.xlarge",
    "tp_degree": 1,
    "sequence_length": 64,
    "max_context_length": 32,
    "dtype": "fp32",
}
# A Neuron target of the embedded model: tp 2, and no max_context_length below the sequence length
# (vLLM on Neuron compiles seq_len = max_context_length = --max-model-len; optimum-neuron's export has
# no separate context length either).
NEURON_TARGET = {**{k: v for k, v in TARGET.items() if k != "max_context_length"}, "tp_degree": 2}


def smoke_payload(payload: Path, target: TargetSpec, cache_root: Path, timeout_s: float = 300.0):
    """The smoke test of a payload folder (e.g. a copy a test has altered), as the `smoke` stage runs
    it: the profile reads how its consumer loads it, the backend loads it through a fresh cache."""
    from neuronforge.compilation.compile_cache import CompileCache
    from neuronforge.pipeline.stages.smoke import SmokeInput, smoke_test
    from neuronforge.profiles import get_profile

    profile = get_profile(target.profile)
    load = profile.smoke_load(payload)
    cache = CompileCache(cache_root, "neuronxcc" if profile.neuron else "torch-inductor", "0.0.0", None)
    return smoke_test(SmokeInput(payload, load, profile.backend.name, cache, profile.python(), timeout_s=timeout_s))


@dataclass
class Compiled:
    checkpoint: Path
    work_dir: Path
    store: ArtifactStore
    first: TargetOutcome
    target: TargetSpec

    @property
    def build_dir(self) -> Path:
        """The first run's payload (what was smoke-tested and published), as this host's verified
        local cache holds it."""
        from neuronforge.artifacts.localcache import lookup_local

        assert self.first.state is not None and self.first.state.compiled is not None
        found = lookup_local(self.first.state.compiled.build, self.work_dir)
        assert found is not None
        return found


@pytest.fixture(scope="session")
def compiled(tmp_path_factory: pytest.TempPathFactory) -> Compiled:
    """One real compile of the tiny Llama per test session, shared by every pipeline/DAG test."""
    base = tmp_path_factory.mktemp("pipeline")
    checkpoint = make_tiny_llama(base / "tiny-llama", tokenizer=True)
    store = open_store(f"file://{base / 'store'}")
    target = TargetSpec.parse(TARGET)
    first = run_target(str(checkpoint), target, store, base / "work")
    return Compiled(checkpoint, base / "work", store, first, target)


def _toolchain_python(monkeypatch: pytest.MonkeyPatch, release: str, path: Path) -> Path:
    from neuronforge.compilation.backends.interpreter import release_var

    monkeypatch.setenv(release_var(release), str(path))
    return path


def use_fake_sdk(monkeypatch: pytest.MonkeyPatch, release: str, folders: tuple[Path, ...], where: Path) -> None:
    """For module-scoped fixtures: SDK `release`'s toolchain interpreter is a fake's (its `folders`
    first on the path), on a host with Neuron devices."""
    from tests.fakes import fake_python

    _toolchain_python(monkeypatch, release, fake_python(where / f"sdk-{release}" / "python", *folders))
    monkeypatch.setenv("FAKE_NEURON_DEVICES", "2")
    monkeypatch.setenv("PATH", neuron_host_path())  # and its `neuron-ls`


@pytest.fixture
def fake_neuron(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """The FAKE Neuron SDK 2.26.1 (tests/fakes: neuron_toolchain + neuronx_cc) as the toolchain
    interpreter of SDK 2.26.1 (NEURONFORGE_TOOLCHAIN_PYTHON_2_26_1 names a stand-in for the image's
    Python), on a host that has Neuron devices (FAKE_NEURON_DEVICES); returns the compile log it
    appends to."""
    from tests.fakes import SDK_2_26_1, fake_python

    _toolchain_python(monkeypatch, "2.26.1", fake_python(tmp_path / "sdk-2.26.1" / "python", *SDK_2_26_1))
    monkeypatch.setenv("FAKE_NEURON_DEVICES", "2")
    monkeypatch.setenv("PATH", neuron_host_path())  # and its `neuron-ls`
    log = tmp_path / "compiles.log"
    monkeypatch.setenv("FAKE_NEURON_COMPILE_LOG", str(log))
    return log


def _fake_nxdi_release(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, release: str, folders: tuple[Path, ...]
) -> Path:
    """A fake SDK release of the NxD Inference line as that release's toolchain interpreter, on a host
    with Neuron devices; returns the compile log."""
    from tests.fakes import fake_python

    _toolchain_python(monkeypatch, release, fake_python(tmp_path / f"sdk-{release}" / "python", *folders))
    monkeypatch.setenv("FAKE_NEURON_DEVICES", "2")
    log = tmp_path / "compiles.log"
    monkeypatch.setenv("FAKE_NEURON_COMPILE_LOG", str(log))
    return log


@pytest.fixture
def fake_neuron_2_28_0(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """The FAKE Neuron SDK 2.28.0 (tests/fakes: nxdi_sdk_2_28_0's dist-infos, then neuron_toolchain and
    neuronx_cc: neuronx-cc 2.23.6484.0+3b612583, NxD Inference 0.8.16251+f3ca5575) as the toolchain
    interpreter of SDK 2.28.0 (NEURONFORGE_TOOLCHAIN_PYTHON_2_28_0), on a host with Neuron devices;
    returns the compile log."""
    from tests.fakes import SDK_2_28_0

    return _fake_nxdi_release(monkeypatch, tmp_path, "2.28.0", SDK_2_28_0)


@pytest.fixture
def fake_neuron_2_31_1(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """The FAKE Neuron SDK 2.31.1 (neuronx-cc 2.26.6360.0+6f180f47, NxD Inference 0.10.18399+ed62453e)
    as the toolchain interpreter of SDK 2.31.1, on a host with Neuron devices; returns the compile log."""
    from tests.fakes import SDK_2_31_1

    return _fake_nxdi_release(monkeypatch, tmp_path, "2.31.1", SDK_2_31_1)


@pytest.fixture
def fake_tnx(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """The FAKE Neuron SDK 2.21.1 (tests/fakes: neuron_sdk_2_21_1 + neuronx_cc): transformers-neuronx
    0.13.380 and neuronx-cc 2.16.372.0+4a9b2326, as the toolchain interpreter of SDK 2.21.1 (the LMI
    image's), on a host that has Neuron devices; returns the compile log."""
    from tests.fakes import SDK_2_21_1, fake_python

    _toolchain_python(monkeypatch, "2.21.1", fake_python(tmp_path / "sdk-2.21.1" / "python", *SDK_2_21_1))
    monkeypatch.setenv("FAKE_NEURON_DEVICES", "2")
    monkeypatch.setenv("PATH", neuron_host_path())  # and its `neuron-ls`
    log = tmp_path / "compiles.log"
    monkeypatch.setenv("FAKE_NEURON_COMPILE_LOG", str(log))
    return log


@pytest.fixture
def upgrade_fake_neuron(fake_neuron: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    """Returns `upgrade(version, release="2.26.1")`: from then on the toolchain interpreter of SDK
    `release` is the FAKE SDK 2.26.1 reporting neuronx-cc `version` (a newer dist-info first on its
    path), as after an SDK upgrade (or as the image of a newer release)."""
    from tests.fakes import SDK_2_26_1, fake_python

    def upgrade(version: str, release: str = "2.26.1") -> None:
        root = tmp_path / f"neuron-sdk-{version}"
        info = root / f"neuronx_cc-{version}.dist-info"
        info.mkdir(parents=True)
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: neuronx-cc\nVersion: {version}\n")
        _toolchain_python(monkeypatch, release, fake_python(tmp_path / f"sdk-{version}" / "python", root, *SDK_2_26_1))

    return upgrade


@pytest.fixture
def fake_optimum(fake_neuron: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """Also the FAKE `optimum.neuron` entry point (tests/fakes/optimum_neuron) in the SDK 2.26.1
    interpreter: this process keeps the real optimum-neuron, which reads what the toolchain wrote."""
    from tests.fakes import OPTIMUM, SDK_2_26_1, fake_python

    _toolchain_python(
        monkeypatch, "2.26.1", fake_python(tmp_path / "sdk-2.26.1-optimum" / "python", OPTIMUM, *SDK_2_26_1)
    )
    return fake_neuron


@pytest.fixture
def policy(monkeypatch: pytest.MonkeyPatch):
    """docker/airflow_local_settings.py installed in this process the way Airflow's settings do it
    at start-up (`import airflow_local_settings`, then `make_plugin_from_local_settings`), removed after."""
    import importlib.util

    from airflow import policies, settings

    spec = importlib.util.spec_from_file_location(
        "airflow_local_settings", Path(__file__).resolve().parents[1] / "docker" / "airflow_local_settings.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    monkeypatch.setitem(sys.modules, "airflow_local_settings", module)
    pm = settings.get_policy_plugin_manager()
    before = set(pm.get_plugins())
    policies.make_plugin_from_local_settings(pm, module, set(module.__all__))
    monkeypatch.setattr(settings.task_instance_mutation_hook, "is_noop", False)
    yield
    for plugin in set(pm.get_plugins()) - before:
        pm.unregister(plugin)


@pytest.fixture
def neuron_deployment(airflow_db: str, policy) -> None:
    """What the deploy steps (docs/deploy.md) set up for Neuron targets: the cluster policy and the
    `neuron_cores` pool (8 slots), as the run-start check requires."""
    from airflow.models.pool import Pool

    Pool.create_or_update_pool("neuron_cores", 8, "NeuronCores of the Neuron workers", include_deferred=False)


# The files that take longest, longest first (measured by `--durations`: the deployment ~40 min of one
# worker, the docs' run blocks ~20, then the benches' end-to-end runs and the kill matrix). `make test`
# gives each file to one worker (`--dist loadfile`) in collection order, as workers free up: a long file
# collected late (the alphabetical order puts tests/test_docs.py after every folder) runs alone at the
# end while the other worker idles. Started first, they overlap with everything else instead.
LONGEST_FIRST = (
    "tests/deployment/test_deployment.py",
    "tests/test_docs.py",
    "tests/bench/test_upgrade_cost.py",
    "tests/reliability/test_kills.py",
    "tests/dags/test_config_sweep_dag.py",
    "tests/bench/test_dag_parse.py",
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    rank = {path: i for i, path in enumerate(LONGEST_FIRST)}
    root = Path(__file__).resolve().parents[1]

    def order(item: pytest.Item) -> int:
        with contextlib.suppress(ValueError):
            return rank.get(str(item.path.relative_to(root)), len(rank))
        return len(rank)

    items.sort(key=order)  # stable: within a file, and among the rest, the collected order holds


@pytest.fixture(autouse=True)
def _no_stream_handler_outlives_its_test() -> Iterator[None]:
    """A plain StreamHandler a test's imports add to a logger (importing Airflow configures the root
    logger; huggingface_hub gives its loggers one) holds the stream of that moment: under capsys, the
    test's capture, closed when the test ends. Every later test's log line then fails on it ("--- Logging
    error ---" and a traceback in that test's output), depending on which files share the worker. Such
    handlers go when the test that added them ends; pytest's own capture handlers are not plain."""
    loggers = [logging.getLogger(), logging.getLogger("huggingface_hub")]
    before = [list(lg.handlers) for lg in loggers]
    yield
    for lg, had in zip(loggers, before, strict=True):
        for handler in [h for h in lg.handlers if h not in had and type(h) is logging.StreamHandler]:
            lg.removeHandler(handler)
