"""An Airflow 3.3 deployment as a platform engineer would run it, on 127.0.0.1: one AIRFLOW_HOME and
one airflow.cfg shared by every component (CeleryExecutor, PostgreSQL metadata + result backend,
redis broker, simple auth manager with a known password, one jwt secret), `airflow db migrate`, the
`neuron_cores` pool, the cluster policy in $AIRFLOW_HOME/config, then api-server, scheduler,
dag-processor, triggerer and two Celery workers, each with its own NEURONFORGE_HOME — in its own
mount namespace with a tmpfs over the other workers' directories where the kernel allows it, so
none can read another's disk. Driven through the REST API only.

Besides the two default-queue workers, a Neuron deployment's two kinds of worker, both with the
FAKE Neuron SDKs as their toolchain interpreters (NEURONFORGE_TOOLCHAIN_PYTHON_<release>, as the
SDK images name theirs): `nf-compile` consumes `neuron-compile-<release>` of every release whose
toolchain compiles without a device and has no Neuron device (a CPU compile host), `nf-neuron`
consumes `neuron-<release>` of every release and has devices
(FAKE_NEURON_DEVICES: the fakes' loads need one, as the runtime does). Every worker signs its S3
requests with its own access key id, so the endpoint tells who downloaded what.

`deploy(root, executor="LocalExecutor")` starts the same deployment without redis and Celery workers:
the scheduler runs every task itself, in its own NEURONFORGE_HOME (bench/pipeline.py measures a
run's latency so). `extra_dags` adds DAG files (name -> source) beside the repo's, in a copy of its
dags folder.
"""

from __future__ import annotations

import glob
import json
import os
import secrets
import shutil
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import requests

from tests.deployment.services import (
    VENV_BIN,
    CountingS3,
    Processes,
    Service,
    free_port,
    namespaces_allowed,
    start,
    start_postgres,
    start_redis,
    wait_for,
)
from tests.fakes import neuron_host_path

REPO = Path(__file__).resolve().parents[2]
COMPILE_DAG = "neuronforge_compile_publish"
RECOMPILE_DAG = "neuronforge_recompile_on_upgrade"
RELEASE_DAG = "neuronforge_release"
SERVED_DAGS = (COMPILE_DAG, RECOMPILE_DAG, RELEASE_DAG)  # parsed and unpaused before the scenarios start
ADMIN = "admin"
WORKERS = ("nf-worker-a", "nf-worker-b")  # the default queue's workers
COMPILE_WORKER, NEURON_WORKER = "nf-compile", "nf-neuron"
# The release-day rehearsal's runtime-only patch of 2.33.0 (fed through `releases sync`, no profile
# registered for it): the Neuron host also consumes its queue, and names its image's interpreter as a
# worker of that image would: 2.33.0's fake, since only the runtime and collectives changed (the smoke of a
# 2.33.0 build resolves 2.33.0's variable first, which this host has too: the same interpreter).
PATCH_RELEASE = "2.33.2"
TERMINAL = {"success", "failed"}

# The hostname a task instance records is `[core] hostname_callable`'s answer, evaluated in the
# worker; both workers share this host, so each tells its own name through its environment.
HOSTNAME_MODULE = '''"""hostname_callable of the deployment test: each worker's name from NF_DEPLOY_HOSTNAME."""
import os
import socket


def hostname() -> str:
    return os.environ.get("NF_DEPLOY_HOSTNAME") or socket.getfqdn()
'''

# The baseline of bench/neuron_host_time.py: a run whose id starts with this has every toolchain
# stage of its Neuron groups on the Neuron host's queue (`neuron-compile-<release>` -> `neuron-<release>`),
# as builds were placed before compiling moved to CPU workers (issue 23). Only this deployment routes
# so: its airflow_local_settings.py is the images' (docker/) with this override appended.
BASELINE_RUN = "deploy-baseline-"  # test_deployment._run_id("baseline")
BASELINE_POLICY = f'''

# -- the deployment test's baseline routing (tests/deployment/airflow_deploy.py BASELINE_RUN) --
import functools as _functools

_neuronforge_hook = task_instance_mutation_hook


@_functools.wraps(_neuronforge_hook)  # the run-start check finds neuronforge's hook inside
def task_instance_mutation_hook(task_instance, dag_run=None):
    _neuronforge_hook(task_instance, dag_run)
    queue = getattr(task_instance, "queue", None) or ""
    if str(getattr(task_instance, "run_id", "")).startswith("{BASELINE_RUN}") and queue.startswith("neuron-compile-"):
        task_instance.queue = "neuron-" + queue.removeprefix("neuron-compile-")
'''


@dataclass
class Worker:
    name: str
    root: Path  # what the other workers cannot see (its home is root/home)
    home: Path
    log_port: int
    queues: str
    env: dict[str, str] = field(default_factory=dict)  # what this worker's host has (toolchains, devices)
    service: Service | None = None

    @property
    def access_key(self) -> str:
        """The AWS access key id this worker signs its S3 requests with."""
        return f"testing-{self.name}"


@dataclass
class Deployment:
    root: Path
    airflow_home: Path
    api_url: str
    password: str
    s3: CountingS3
    bucket: str
    store: str
    processes: Processes
    workers: list[Worker]  # every Celery worker: the default queue's, then the Neuron ones
    isolation: str  # "mount-namespaces" or "separate-directories"
    env: dict[str, str]
    timings: dict[str, float] = field(default_factory=dict)
    _token: str | None = None

    # -- REST --------------------------------------------------------------------------------------
    def token(self, refresh: bool = False) -> str:
        if self._token is None or refresh:
            r = requests.post(
                f"{self.api_url}/auth/token", json={"username": ADMIN, "password": self.password}, timeout=30
            )
            r.raise_for_status()
            self._token = r.json()["access_token"]
        return self._token

    def request(self, method: str, path: str, **kwargs: Any) -> requests.Response:
        kwargs.setdefault("timeout", 60)
        for attempt in range(2):
            headers = {"Authorization": f"Bearer {self.token(refresh=attempt > 0)}"}
            r = requests.request(method, f"{self.api_url}{path}", headers=headers, **kwargs)
            if r.status_code != 401:
                return r
        return r

    def get(self, path: str, **params: Any) -> Any:
        r = self.request("GET", path, params=params)
        r.raise_for_status()
        return r.json()

    def unpause(self, dag_id: str) -> None:
        r = self.request("PATCH", f"/api/v2/dags/{dag_id}", json={"is_paused": False})
        r.raise_for_status()

    def trigger(self, dag_id: str, conf: dict[str, Any], run_id: str | None = None) -> requests.Response:
        body: dict[str, Any] = {"logical_date": None, "conf": conf}
        if run_id:
            body["dag_run_id"] = run_id
        return self.request("POST", f"/api/v2/dags/{dag_id}/dagRuns", json=body)

    def run(self, dag_id: str, run_id: str) -> dict[str, Any]:
        return self.get(f"/api/v2/dags/{dag_id}/dagRuns/{run_id}")

    def runs(self, dag_id: str) -> list[dict[str, Any]]:
        return self.get(f"/api/v2/dags/{dag_id}/dagRuns", limit=100)["dag_runs"]

    def task_instances(self, dag_id: str, run_id: str) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        while True:
            page = self.get(f"/api/v2/dags/{dag_id}/dagRuns/{run_id}/taskInstances", limit=100, offset=len(out))
            out.extend(page["task_instances"])
            if not page["task_instances"] or len(out) >= page["total_entries"]:
                return out

    def xcom(self, dag_id: str, run_id: str, task_id: str, map_index: int = -1) -> Any:
        r = self.request(
            "GET",
            f"/api/v2/dags/{dag_id}/dagRuns/{run_id}/taskInstances/{task_id}/xcomEntries/return_value",
            params={"map_index": map_index},
        )
        if r.status_code == 404:
            return None
        r.raise_for_status()
        return r.json().get("value")

    def wait_run(self, dag_id: str, run_id: str, timeout: float) -> dict[str, Any]:
        """Poll until the run ends; on timeout the error shows every task instance's state and the
        logs of those that failed."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            run = self.run(dag_id, run_id)
            if run["state"] in TERMINAL:
                return run
            dead = [s.name for s in self.processes.dead()]
            if dead:
                raise AssertionError(f"deployment processes died while {run_id} ran: {dead}\n{self.diagnose()}")
            time.sleep(2)
        raise AssertionError(
            f"{dag_id} {run_id} still {run['state']} after {timeout:.0f}s\n{self.describe(dag_id, run_id)}"
        )

    # -- logs and diagnosis ------------------------------------------------------------------------
    def task_log(self, dag_id: str, run_id: str, task_id: str, map_index: int = -1, tail: int = 120) -> str:
        base = self.airflow_home / "logs" / f"dag_id={dag_id}" / f"run_id={run_id}" / f"task_id={task_id}"
        if map_index >= 0:
            base = base / f"map_index={map_index}"
        files = sorted(glob.glob(str(base / "attempt=*.log")))
        if not files:
            return f"(no log file under {base})"
        parts = []
        for path in files:
            lines = Path(path).read_text(errors="replace").splitlines()
            parts.append(f"--- {path} (last {min(tail, len(lines))} of {len(lines)} lines)")
            parts.extend(_readable(line) for line in lines[-tail:])
        return "\n".join(parts)

    def describe(self, dag_id: str, run_id: str) -> str:
        """Every task instance's state and host, then the logs of the failed ones."""
        lines = [f"task instances of {dag_id} {run_id}:"]
        try:
            tis = self.task_instances(dag_id, run_id)
        except Exception as exc:
            return f"(task instances unavailable: {exc})"
        for ti in sorted(tis, key=lambda t: (t.get("start_date") or "~", t["task_id"], t["map_index"])):
            lines.append(
                f"  {ti['task_id']}[{ti['map_index']}] {ti['state']} on {ti.get('hostname') or '-'}"
                f" try {ti.get('try_number')}"
            )
        for ti in tis:
            if ti["state"] in ("failed", "up_for_retry"):
                lines.append(f"\nlog of failed task {ti['task_id']}[{ti['map_index']}]:")
                lines.append(self.task_log(dag_id, run_id, ti["task_id"], ti["map_index"]))
        return "\n".join(lines)

    def diagnose(self) -> str:
        return "\n".join(
            f"--- {s.name} (pid {s.pid}, alive {s.alive()}):\n{s.tail(40)}" for s in self.processes.services
        )

    def run_to_end(self, dag_id: str, conf: dict[str, Any], timeout: float, run_id: str | None = None) -> dict:
        r = self.trigger(dag_id, conf, run_id)
        assert r.status_code in (200, 201), f"trigger {dag_id} answered {r.status_code}: {r.text}"
        return self.wait_run(dag_id, r.json()["dag_run_id"], timeout)


# A consumer's DAG as a platform team writes one: scheduled on the Asset of a release channel (the
# embedded model's cpu line, `stable`). Here the scheduler only queues it (`use_job_schedule = False`
# above keeps it from creating scheduled and asset-triggered runs alike); the test checks the queue.
CHANNEL_CONSUMER = "nf_channel_consumer"
CHANNEL_CONSUMER_DAG = f'''"""Redeploy when the stable channel of builtin:tiny-llama's cpu line moves."""
import os

import pendulum
from airflow.sdk import dag, task

from neuronforge_airflow.operators.releases import channel_asset

STABLE = channel_asset(os.environ["NEURONFORGE_STORE"], "builtin:tiny-llama", "cpu", "stable")


@dag(dag_id="{CHANNEL_CONSUMER}", schedule=[STABLE], start_date=pendulum.datetime(2026, 1, 1, tz="UTC"), catchup=False)
def consumer():
    @task
    def redeploy() -> None:
        """Restart the serving hosts: their channel launch files resolve the new build."""

    redeploy()


consumer()
'''


def _readable(line: str) -> str:
    """Airflow 3 task logs are JSON lines: show time, level and event."""
    try:
        rec = json.loads(line)
    except ValueError:
        return line
    if not isinstance(rec, dict):
        return line
    text = f"{rec.get('timestamp', '')} {rec.get('level', '')} {rec.get('event', '')}"
    if rec.get("error_detail"):
        text += "\n" + json.dumps(rec["error_detail"], indent=1)[:6000]
    return text


# -- setup -------------------------------------------------------------------------------------------------
def _config(
    airflow_home: Path,
    db_url: str,
    broker_url: str,
    api_port: int,
    log_port: int,
    executor: str = "CeleryExecutor",
    dags_folder: Path = REPO / "dags",
) -> str:
    return f"""\
[core]
dags_folder = {dags_folder}
plugins_folder = {REPO / "plugins"}
executor = {executor}
load_examples = False
parallelism = 8
max_active_tasks_per_dag = 8
dags_are_paused_at_creation = True
auth_manager = airflow.api_fastapi.auth.managers.simple.simple_auth_manager.SimpleAuthManager
simple_auth_manager_users = {ADMIN}:admin
simple_auth_manager_passwords_file = {airflow_home / "passwords.json"}
execution_api_server_url = http://127.0.0.1:{api_port}/execution/
hostname_callable = nf_deploy_hostname.hostname
fernet_key = {_fernet_key()}

[database]
sql_alchemy_conn = {db_url}

[celery]
broker_url = {broker_url}
result_backend = db+{db_url}
worker_concurrency = 2
worker_prefetch_multiplier = 1

[celery_broker_transport_options]
visibility_timeout = 3600

[api]
host = 127.0.0.1
port = {api_port}
base_url = http://127.0.0.1:{api_port}
workers = 1
secret_key = {secrets.token_hex(16)}

[api_auth]
jwt_secret = {secrets.token_urlsafe(32)}

[logging]
base_log_folder = {airflow_home / "logs"}
worker_log_server_port = {log_port}

[scheduler]
# no cron runs (the recompile DAG is @daily): every run here is triggered through the REST API
use_job_schedule = False
scheduler_heartbeat_sec = 2
task_queued_timeout = 900

[dag_processor]
refresh_interval = 30
min_file_process_interval = 30

[triggerer]
capacity = 50
"""


def _fernet_key() -> str:
    from cryptography.fernet import Fernet

    return Fernet.generate_key().decode()


def _base_env(airflow_home: Path, s3: CountingS3, store: str) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("AIRFLOW__", "AIRFLOW_HOME", "NEURONFORGE_", "AWS_", "PYTEST_"))
    }
    env.update(
        {
            "AIRFLOW_HOME": str(airflow_home),
            "PATH": f"{VENV_BIN}{os.pathsep}{os.environ.get('PATH', '/usr/bin:/bin')}",
            # the checkout being tested first (over an editable install of another one)
            "PYTHONPATH": os.pathsep.join((str(airflow_home / "config"), str(REPO))),
            "AWS_ENDPOINT_URL": s3.endpoint,
            "AWS_ACCESS_KEY_ID": "testing",
            "AWS_SECRET_ACCESS_KEY": "testing",
            "AWS_DEFAULT_REGION": "us-east-1",
            "NEURONFORGE_STORE": store,
            "NEURONFORGE_LEASE_POLL_S": "2",
            "NEURONFORGE_RECOMPILE_POLL_S": "3",
            "HF_HUB_OFFLINE": "1",
            "HF_HUB_DISABLE_TELEMETRY": "1",
            "TOKENIZERS_PARALLELISM": "false",
            "OMP_NUM_THREADS": "2",
        }
    )
    return env


def _airflow(env: dict[str, str], *args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    r = subprocess.run([str(VENV_BIN / "airflow"), *args], env=env, capture_output=True, text=True, timeout=timeout)
    if r.returncode != 0:
        raise RuntimeError(f"airflow {' '.join(args)} failed ({r.returncode}):\n{r.stdout[-3000:]}\n{r.stderr[-5000:]}")
    return r


def _isolated(argv: list[str], hide: list[Path]) -> list[str]:
    """argv run in new user + mount namespaces with an empty tmpfs over each folder of `hide`."""
    script = (
        'n=$1; shift; while [ "$n" -gt 0 ]; do mount -t tmpfs -o size=1m,mode=0755 nf-hidden "$1" || exit 1; '
        'shift; n=$((n - 1)); done; exec "$@"'
    )
    return [
        "unshare",
        "-rm",
        "--propagation",
        "private",
        "sh",
        "-c",
        script,
        "sh",
        str(len(hide)),
        *map(str, hide),
        *argv,
    ]


def _check_isolation(a: Path, b: Path) -> bool:
    """Inside the namespace `b` looks empty while it holds files outside."""
    marker = b / ".visible-to-the-other-worker"
    marker.write_text("x")
    try:
        r = subprocess.run(_isolated(["ls", "-A", str(b)], [b]), capture_output=True, text=True, timeout=30)
        return r.returncode == 0 and r.stdout.strip() == ""
    finally:
        marker.unlink()


def _fake_toolchains(root: Path) -> dict[str, str]:
    """The toolchain interpreters of the SDK images, as the FAKE SDKs (tests/fakes): one per release
    a registered profile pins, in a folder every worker sees."""
    from tests.fakes import (
        OPTIMUM,
        SDK_2_21_1,
        SDK_2_26_1,
        SDK_2_28_0,
        SDK_2_31_1,
        VLLM_SDK_2_32_0,
        VLLM_SDK_2_33_0,
        fake_python,
    )

    return {
        "NEURONFORGE_TOOLCHAIN_PYTHON_2_26_1": str(fake_python(root / "sdk-2.26.1" / "python", OPTIMUM, *SDK_2_26_1)),
        "NEURONFORGE_TOOLCHAIN_PYTHON_2_28_0": str(fake_python(root / "sdk-2.28.0" / "python", *SDK_2_28_0)),
        "NEURONFORGE_TOOLCHAIN_PYTHON_2_31_1": str(fake_python(root / "sdk-2.31.1" / "python", *SDK_2_31_1)),
        "NEURONFORGE_TOOLCHAIN_PYTHON_2_21_1": str(fake_python(root / "sdk-2.21.1" / "python", *SDK_2_21_1)),
        "NEURONFORGE_TOOLCHAIN_PYTHON_2_32_0": str(fake_python(root / "sdk-2.32.0" / "python", *VLLM_SDK_2_32_0)),
        "NEURONFORGE_TOOLCHAIN_PYTHON_2_33_0": str(fake_python(root / "sdk-2.33.0" / "python", *VLLM_SDK_2_33_0)),
    }


def deploy(root: Path, executor: str = "CeleryExecutor", extra_dags: dict[str, str] | None = None) -> Deployment:
    """Start everything; on any failure stop what was started and re-raise with the services' logs."""
    celery = executor == "CeleryExecutor"
    processes = Processes()
    s3 = CountingS3()
    timings: dict[str, float] = {}
    t0 = time.monotonic()
    try:
        s3.start()
        bucket = "nf-deploy"
        import boto3

        boto3.client(
            "s3",
            endpoint_url=s3.endpoint,
            aws_access_key_id="testing",
            aws_secret_access_key="testing",
            region_name="us-east-1",
        ).create_bucket(Bucket=bucket)
        store = f"s3://{bucket}/store"

        db_url = start_postgres(root, processes)
        broker_url = start_redis(root, processes) if celery else "redis://127.0.0.1:9/0"  # unused
        timings["postgres+redis+s3"] = time.monotonic() - t0

        airflow_home = root / "airflow"
        (airflow_home / "config").mkdir(parents=True)
        api_port, log_port = free_port(), free_port()
        dags_folder = REPO / "dags"
        if extra_dags:
            dags_folder = root / "dags"
            shutil.copytree(REPO / "dags", dags_folder, ignore=shutil.ignore_patterns("__pycache__"))
            for name, source in extra_dags.items():
                (dags_folder / name).write_text(source)
        (airflow_home / "airflow.cfg").write_text(
            _config(airflow_home, db_url, broker_url, api_port, log_port, executor, dags_folder)
        )
        password = secrets.token_urlsafe(12)
        (airflow_home / "passwords.json").write_text(json.dumps({ADMIN: password}))
        (airflow_home / "config" / "airflow_local_settings.py").write_text(
            (REPO / "docker" / "airflow_local_settings.py").read_text() + BASELINE_POLICY
        )
        (airflow_home / "config" / "nf_deploy_hostname.py").write_text(HOSTNAME_MODULE)
        env = _base_env(airflow_home, s3, store)

        t = time.monotonic()
        _airflow(env, "db", "migrate")
        _airflow(env, "pools", "set", "neuron_cores", "2", "NeuronCores (cpu targets take 1 slot)")
        timings["db migrate + pool"] = time.monotonic() - t

        logs = root / "logs"
        t = time.monotonic()
        for name, argv in (
            ("api-server", ["api-server", "--host", "127.0.0.1", "--port", str(api_port)]),
            ("scheduler", ["scheduler"]),
            ("dag-processor", ["dag-processor"]),
            ("triggerer", ["triggerer"]),
        ):
            home = root / f"{name}-home"
            home.mkdir()
            processes.add(start(name, [str(VENV_BIN / "airflow"), *argv], logs, {**env, "NEURONFORGE_HOME": str(home)}))

        toolchains = _fake_toolchains(root / "sdk")
        workers = [
            Worker(WORKERS[0], root / WORKERS[0], root / WORKERS[0] / "home", log_port, "default"),
            Worker(WORKERS[1], root / WORKERS[1], root / WORKERS[1] / "home", free_port(), "default"),
            # A CPU compile host of the SDK images (one worker standing in for one per image): their
            # toolchains, no Neuron device.
            Worker(
                COMPILE_WORKER,
                root / COMPILE_WORKER,
                root / COMPILE_WORKER / "home",
                free_port(),
                "neuron-compile-2.26.1,neuron-compile-2.28.0,neuron-compile-2.31.1,neuron-compile-2.32.0,"
                "neuron-compile-2.33.0",
                toolchains,
            ),
            # A Neuron host of both SDK images' queues: the toolchains and Neuron devices.
            Worker(
                NEURON_WORKER,
                root / NEURON_WORKER,
                root / NEURON_WORKER / "home",
                free_port(),
                "neuron-2.26.1,neuron-2.21.1,neuron-2.28.0,neuron-2.31.1,neuron-2.32.0,neuron-2.33.0,"
                f"neuron-{PATCH_RELEASE}",
                # its fake `neuron-ls` (SDK 2.26.1's `-j`) on PATH: the smoke stage probes the host
                {
                    **toolchains,
                    f"NEURONFORGE_TOOLCHAIN_PYTHON_{PATCH_RELEASE.replace('.', '_')}": toolchains[
                        "NEURONFORGE_TOOLCHAIN_PYTHON_2_33_0"
                    ],
                    "FAKE_NEURON_DEVICES": "2",
                    "PATH": neuron_host_path(env["PATH"]),
                },
            ),
        ]
        if not celery:  # the scheduler runs the tasks
            workers = []
        for w in workers:
            w.home.mkdir(parents=True)
        isolation = "separate-directories"
        if workers and namespaces_allowed() and _check_isolation(workers[0].root, workers[1].root):
            isolation = "mount-namespaces"
        for w in workers:
            others = [o.root for o in workers if o is not w]
            argv = [
                str(VENV_BIN / "airflow"),
                "celery",
                "worker",
                "--queues",
                w.queues,
                "--concurrency",
                "2" if w.name in WORKERS else "1",
                "--celery-hostname",
                f"{w.name}@%h",
            ]
            if isolation == "mount-namespaces":
                argv = _isolated(argv, others)
            wenv = {
                **env,
                **w.env,
                "NEURONFORGE_HOME": str(w.home),
                "NF_DEPLOY_HOSTNAME": w.name,
                "AWS_ACCESS_KEY_ID": w.access_key,
                # several workers on one host: each serves its logs on its own port
                "AIRFLOW__LOGGING__WORKER_LOG_SERVER_PORT": str(w.log_port),
            }
            w.service = processes.add(start(w.name, argv, logs, wenv))

        dep = Deployment(
            root,
            airflow_home,
            f"http://127.0.0.1:{api_port}",
            password,
            s3,
            bucket,
            store,
            processes,
            workers,
            isolation,
            env,
            timings,
        )

        def healthy() -> bool:
            dead = processes.dead()
            if dead:
                raise RuntimeError(f"died at start: {[s.name for s in dead]}")
            health = requests.get(f"{dep.api_url}/api/v2/monitor/health", timeout=5).json()
            return (
                all(
                    (health.get(c) or {}).get("status") == "healthy" for c in ("metadatabase", "scheduler", "triggerer")
                )
                and (health.get("dag_processor") or {}).get("status") == "healthy"
            )

        _wait_or_explain(dep, "api-server, scheduler, triggerer, dag-processor healthy", healthy, 240)

        def parsed() -> bool:
            return all(dep.request("GET", f"/api/v2/dags/{d}").status_code == 200 for d in SERVED_DAGS)

        _wait_or_explain(dep, f"{', '.join(SERVED_DAGS)} parsed", parsed, 240)

        def workers_ready() -> bool:
            return all(
                w.service is not None and " ready." in w.service.log.read_text(errors="replace") for w in workers
            )

        _wait_or_explain(dep, "every celery worker ready", workers_ready, 180)
        for dag_id in SERVED_DAGS:
            dep.unpause(dag_id)
        timings["airflow components up"] = time.monotonic() - t
        timings["deployment total"] = time.monotonic() - t0
        return dep
    except BaseException:
        processes.stop_all()
        s3.stop()
        raise


def _wait_or_explain(dep: Deployment, what: str, check, timeout: float) -> None:
    try:
        wait_for(what, check, timeout, interval=1.0)
    except (TimeoutError, RuntimeError) as exc:
        raise RuntimeError(f"{exc}\n{dep.diagnose()}") from exc


def teardown(dep: Deployment) -> None:
    dep.processes.stop_all()
    dep.s3.stop()
