"""`neuronforge airflow` / `make airflow`: the Airflow UI of this checkout with one command.

A local Airflow 3 (LocalExecutor, SQLite) in its own home, `.neuronforge/airflow` (the one `make
demo` uses), with this checkout's DAGs and UI plugins, every socket on 127.0.0.1, in the foreground:
Ctrl+C or SIGTERM stops all of it.

It starts the four components `airflow standalone` starts (api-server, scheduler, dag-processor,
triggerer) itself, each in its own process group, because standalone cannot be stopped cleanly
(its components die with the terminal's Ctrl+C in whatever order, and it hangs waiting for them),
cannot be told to skip the log servers, and spawns `airflow` by name (so it fails without an
activated venv). The scheduler's and triggerer's log servers (`airflow.utils.serve_logs`) bind
all interfaces whatever `[api] host` says — Airflow 3.3 has no setting for their host — so they
are not started (`--skip-serve-logs`): with every component on this host the api-server reads the
task and trigger logs from `$AIRFLOW_HOME/logs` directly.

The Airflow configuration both this and the demo use lives here (`airflow_env`, `init_home`).
Airflow is only ever run as a child process: nothing here imports it.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

from neuronforge.common import interrupts, settings
from neuronforge.common.deployment_names import NEURON_POOL
from neuronforge.common.errors import InvalidInput
from neuronforge.common.secrets import print_line
from neuronforge.interfaces import airflow_db

HOST = "127.0.0.1"
DEFAULT_PORT = 8080
USER = "admin"
POOL = NEURON_POOL  # neuronforge_airflow/policies/routing.py's pool (the Neuron tasks take tp slots of it)
POOL_SLOTS = 2  # the NeuronCores of one inf2.xlarge
PARALLELISM = 4  # task slots of the local deployment (AIRFLOW__CORE__PARALLELISM overrides)
STOP_GRACE_S = 8.0  # SIGTERM, then this long before SIGKILL (they log their exit at once, then linger)
READY_TIMEOUT_S = 300.0
# The components and their arguments: log servers off (they would listen on every interface).
COMPONENTS: dict[str, tuple[str, ...]] = {
    "api-server": (),  # host and port from [api]
    "scheduler": ("--skip-serve-logs",),
    "dag-processor": (),
    "triggerer": ("--skip-serve-logs",),
}


def default_home() -> Path:
    """This checkout's Airflow home: `<NEURONFORGE_HOME>/airflow` (`make demo` uses the same)."""
    return settings.home() / "airflow"


def bin_dir() -> Path:
    """Where this interpreter's `airflow` script is (the venv's bin), activated or not."""
    return Path(sys.executable).parent


def airflow_env(home: Path | None = None, port: int | None = None) -> dict[str, str]:
    """The environment of every Airflow process of this checkout: its home, DAGs, plugins, store, this
    checkout's code first on the import path and this venv's bin first on PATH (Airflow spawns
    `airflow ...` by name). With `port`: the components of a local deployment on 127.0.0.1:`port`."""
    home = home or default_home()
    nf_home = settings.home()
    env = {
        **os.environ,
        "AIRFLOW_HOME": str(home),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__CORE__DAGS_FOLDER": str(settings.REPO_ROOT / "dags"),
        "AIRFLOW__CORE__PLUGINS_FOLDER": str(settings.REPO_ROOT / "plugins"),
        "NEURONFORGE_HOME": str(nf_home),
        "NEURONFORGE_STORE": settings.store_uri(),
        "PATH": os.pathsep.join([str(bin_dir()), *filter(None, os.environ.get("PATH", "").split(os.pathsep))]),
        "PYTHONPATH": os.pathsep.join(
            [str(settings.REPO_ROOT), *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))]
        ),
    }
    if port is not None:
        base = f"http://{HOST}:{port}"
        env |= {
            "AIRFLOW__CORE__EXECUTOR": "LocalExecutor",
            "AIRFLOW__CORE__AUTH_MANAGER": (
                "airflow.api_fastapi.auth.managers.simple.simple_auth_manager.SimpleAuthManager"
            ),
            "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS": f"{USER}:admin",
            "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_ALL_ADMINS": "False",
            "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE": str(password_file(home)),
            "AIRFLOW__API__HOST": HOST,
            "AIRFLOW__API__PORT": str(port),
            "AIRFLOW__API__BASE_URL": base,
            "AIRFLOW__API__WORKERS": "1",
            "AIRFLOW__CORE__EXECUTION_API_SERVER_URL": f"{base}/execution/",
            # the scheduler's health server stays off; were it turned on, on loopback
            "AIRFLOW__SCHEDULER__ENABLE_HEALTH_CHECK": "False",
            "AIRFLOW__SCHEDULER__SCHEDULER_HEALTH_CHECK_SERVER_HOST": HOST,
            # LocalExecutor forks this many workers up front (Airflow's default, 32, is a server's)
            "AIRFLOW__CORE__PARALLELISM": os.environ.get("AIRFLOW__CORE__PARALLELISM", str(PARALLELISM)),
        }
    return env


def run_airflow(*args: str, env: dict[str, str], log: Path | None = None) -> int:
    """`airflow <args>` of this venv, its output to `log` (or nowhere); its exit code."""
    out = open(log, "w", encoding="utf-8") if log else subprocess.DEVNULL  # noqa: SIM115 - closed below
    try:
        cmd = [str(bin_dir() / "airflow"), *args]
        return subprocess.run(cmd, env=env, stdout=out, stderr=subprocess.STDOUT).returncode
    finally:
        if log:
            out.close()


def init_home(home: Path, env: dict[str, str]) -> str | None:
    """Make `home` a working Airflow home for neuronforge: the cluster policy installed (pool_slots =
    tp for the Neuron compile / smoke tasks, neuronforge_airflow/policies/routing.py), the database migrated, the
    `neuron_cores` pool. A database already current (`airflow_db.current_revision`) is left as it is:
    its revision is returned; None when it was migrated. Raises InvalidInput naming the log when the
    migration fails."""
    (home / "config").mkdir(parents=True, exist_ok=True)
    shutil.copyfile(
        settings.REPO_ROOT / "docker" / "airflow_local_settings.py", home / "config" / "airflow_local_settings.py"
    )
    if (revision := airflow_db.current_revision(home, env, POOL, POOL_SLOTS)) is not None:
        return revision
    before = airflow_db.forget(home)
    log = home / "db-migrate.log"
    if run_airflow("db", "migrate", env=env, log=log) != 0:
        raise InvalidInput(f"airflow db migrate failed in {home}; see {log}")
    described = "NeuronCores of this host (compile and smoke tasks)"
    if run_airflow("pools", "set", POOL, str(POOL_SLOTS), described, env=env) != 0:
        raise InvalidInput(f"airflow pools set {POOL} failed in {home}")
    airflow_db.record_migrated(home, env, before)
    return None


def said(revision: str | None) -> str:
    """What `init_home` did, in one line."""
    if revision is None:
        return "Airflow's metadata DB: migrated (airflow db migrate), pool neuron_cores set"
    return f"Airflow's metadata DB: current (revision {revision}), not migrated again"


def password_file(home: Path) -> Path:
    return home / "simple_auth_manager_passwords.json.generated"


def admin_password(home: Path) -> str:
    """The admin's password of the simple auth manager: the one already in `home`, else a new one
    written there (owner-only) before the api-server starts, which keeps it."""
    path = password_file(home)
    try:
        known = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        known = {}
    if isinstance(known, dict) and isinstance(known.get(USER), str) and known[USER]:
        return known[USER]
    password = secrets.token_urlsafe(12)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        json.dump({**(known if isinstance(known, dict) else {}), USER: password}, f)
    return password


def check_port(port: int) -> None:
    """Refuse a port something already listens on, in one line, before anything starts."""
    if not 1 <= port <= 65535:
        raise InvalidInput(f"--port {port} is not a TCP port; use 1-65535")
    with socket.socket() as s:
        # as the api-server binds: a port whose last connections are still in TIME_WAIT is free
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((HOST, port))
        except OSError as exc:
            raise InvalidInput(
                f"port {port} on {HOST} is taken ({exc.strerror}); stop what listens there or pick another with --port"
            ) from None


@dataclass
class Deployment:
    """The running components: name -> process (each the leader of its own process group)."""

    home: Path
    procs: dict[str, subprocess.Popen] = field(default_factory=dict)

    def start(self, env: dict[str, str]) -> None:
        logs = self.home / "logs"
        logs.mkdir(parents=True, exist_ok=True)
        for name, args in COMPONENTS.items():
            with open(logs / f"{name}.out", "w", encoding="utf-8") as out:
                # own session: the terminal's Ctrl+C reaches only us, and we stop them in order
                self.procs[name] = subprocess.Popen(
                    [str(bin_dir() / "airflow"), name, *args],
                    env=env,
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    stdin=subprocess.DEVNULL,
                    start_new_session=True,
                )

    def died(self) -> str | None:
        """The first component that exited, if any."""
        return next((n for n, p in self.procs.items() if p.poll() is not None), None)

    def stop(self, grace_s: float = STOP_GRACE_S) -> None:
        """SIGTERM to every component's process group and to all their descendants (the task and
        trigger runners make process groups of their own), SIGKILL to whatever is left after `grace_s`."""
        import psutil

        tree: list[psutil.Process] = []
        for p in self.procs.values():
            with contextlib.suppress(psutil.Error):
                tree += psutil.Process(p.pid).children(recursive=True)
        for p in self.procs.values():
            interrupts.kill_group(p.pid, signal.SIGTERM)
        for child in tree:  # those in groups of their own (task and trigger runners) too: else each
            with contextlib.suppress(psutil.Error):  # waits for its parent's own timeout to reach it
                child.terminate()
        deadline = time.monotonic() + grace_s
        for p in self.procs.values():
            with contextlib.suppress(subprocess.TimeoutExpired):
                p.wait(timeout=max(0.1, deadline - time.monotonic()))
        _, alive = psutil.wait_procs(tree, timeout=max(0.1, deadline - time.monotonic()))
        for p in self.procs.values():
            interrupts.kill_group(p.pid, signal.SIGKILL)
        for child in alive:
            with contextlib.suppress(psutil.Error):
                child.kill()
        for p in self.procs.values():
            p.wait()
        psutil.wait_procs(alive, timeout=5)


class _Stop(Exception):
    pass


def _on_signal(signum: int, frame: object) -> None:
    raise _Stop(signal.Signals(signum).name)


def _healthy(url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{url}/api/v2/monitor/health", timeout=2) as response:
            return response.status == 200
    except (urllib.error.URLError, OSError):
        return False


def _tail(path: Path, lines: int = 15) -> str:
    try:
        return "\n".join(path.read_text(errors="replace", encoding="utf-8").splitlines()[-lines:])
    except OSError:
        return ""


def serve(port: int = DEFAULT_PORT, home: Path | None = None) -> int:
    """Run the local Airflow in the foreground until Ctrl+C / SIGTERM (exit 0) or a component dies
    (exit 1, naming it and its log)."""
    check_port(port)
    home = (home or default_home()).expanduser().resolve()
    env = airflow_env(home, port)
    url = f"http://{HOST}:{port}"
    previous = {s: signal.signal(s, _on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
    deployment = Deployment(home)
    try:
        print(f"Airflow home {home} (SQLite, LocalExecutor); store {env['NEURONFORGE_STORE']}", flush=True)
        print("preparing the database ...", flush=True)
        print(said(init_home(home, env)), flush=True)
        if not settings.current().from_env("store"):  # the default store: an empty one until the first run
            from neuronforge.stores import local_folder

            # a store's folder is made by its first write; the catalog reads it before any run, and
            # reading a store that does not exist is an error (a mistyped path), so it is made here
            local_folder(env["NEURONFORGE_STORE"]).mkdir(parents=True, exist_ok=True)  # type: ignore[union-attr]
        password = admin_password(home)
        deployment.start(env)
        print(f"starting {', '.join(COMPONENTS)} (logs: {home / 'logs'}/<component>.out) ...", flush=True)
        deadline = time.monotonic() + READY_TIMEOUT_S
        while not _healthy(url):
            if (name := deployment.died()) is not None or time.monotonic() > deadline:
                return _failed(deployment, name or "api-server", home)
            time.sleep(0.5)
        print(f"\nAirflow UI: {url}\nlogin:      {USER}\npassword:   {password}\n", flush=True)
        print("Press Ctrl+C to stop.", flush=True)
        while (name := deployment.died()) is None:
            time.sleep(0.5)
        return _failed(deployment, name, home)
    except _Stop as stop:
        print(f"\n{stop}: stopping {', '.join(deployment.procs) or 'nothing'} ...", flush=True)
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # a second Ctrl+C does not interrupt the stop
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        deployment.stop()
        print("stopped", flush=True)
        return 0
    finally:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        deployment.stop()
        for s, handler in previous.items():
            signal.signal(s, handler)


def _failed(deployment: Deployment, name: str, home: Path) -> int:
    log = home / "logs" / f"{name}.out"
    code = deployment.procs[name].poll() if name in deployment.procs else None
    why = f"exited with {code}" if code is not None else f"did not answer within {READY_TIMEOUT_S:.0f}s"
    print_line(f"error: airflow {name} {why}; its log, {log}, ends:\n{_tail(log)}")
    return 1
