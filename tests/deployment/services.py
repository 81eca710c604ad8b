"""The pieces of a real deployment on 127.0.0.1, each started as a child process of the test (or a
thread, for the S3 endpoint) and stopped by PID: PostgreSQL (initdb + postgres in a temp dir),
redis-server, moto's S3 server with a byte counter, and the Airflow components.

Nothing here is a system service: every process runs as the current user (PostgreSQL, which refuses
to run as root, runs as the `postgres` account when the test runs as root), on free ports, with its
data in the deployment's temp dir.
"""

from __future__ import annotations

import contextlib
import glob
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

VENV_BIN = Path(sys.executable).parent
# What the run showed (isolation mode, per-scenario timings): printed at the end of the pytest run.
SUMMARY: list[str] = []


def note(line: str) -> None:
    print(f"\n{line}")
    SUMMARY.append(line)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for(what: str, check: Callable[[], object], timeout: float, interval: float = 0.5) -> object:
    """Poll `check` until it returns something truthy; fail with `what` after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    last_exc: BaseException | None = None
    while time.monotonic() < deadline:
        try:
            value = check()
            if value:
                return value
        except Exception as exc:  # not up yet
            last_exc = exc
        time.sleep(interval)
    raise TimeoutError(f"{what}: not ready after {timeout:.0f}s (last error: {last_exc!r})")


def port_open(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(0.5)
        return s.connect_ex(("127.0.0.1", port)) == 0


# -- binaries ------------------------------------------------------------------------------------------
def postgres_bindir() -> Path | None:
    """The directory holding initdb and postgres: on PATH, or Debian's /usr/lib/postgresql/<ver>/bin."""
    found = shutil.which("initdb")
    if found and (Path(os.path.realpath(found)).parent / "postgres").exists():
        return Path(os.path.realpath(found)).parent
    for candidate in sorted(glob.glob("/usr/lib/postgresql/*/bin"), reverse=True):
        if (Path(candidate) / "initdb").exists() and (Path(candidate) / "postgres").exists():
            return Path(candidate)
    return None


def postgres_account() -> tuple[int, int] | None:
    """(uid, gid) to run PostgreSQL as: the current user, or `postgres`/`nobody` when root."""
    if os.geteuid() != 0:
        return os.getuid(), os.getgid()
    import pwd

    for name in ("postgres", "nobody"):
        try:
            entry = pwd.getpwnam(name)
        except KeyError:
            continue
        return entry.pw_uid, entry.pw_gid
    return None


def missing_requirements() -> list[str]:
    """What this machine lacks for the deployment test (empty: it can run)."""
    missing = []
    if postgres_bindir() is None:
        missing.append("PostgreSQL server binaries (initdb, postgres: apt-get install postgresql)")
    elif postgres_account() is None:
        missing.append("a non-root account to run PostgreSQL as (running as root, no `postgres` user)")
    if shutil.which("redis-server") is None:
        missing.append("redis-server (apt-get install redis-server)")
    import importlib.util

    for module, package in (
        ("airflow.providers.celery", "apache-airflow-providers-celery"),
        ("psycopg2", "psycopg2-binary"),
        ("asyncpg", "asyncpg"),
        ("redis", "redis"),
    ):
        try:
            spec = importlib.util.find_spec(module)
        except ModuleNotFoundError:
            spec = None
        if spec is None:
            missing.append(f"{package} (pip install -r requirements-deploy.txt -c constraints.txt)")
    if not (VENV_BIN / "airflow").exists():
        missing.append(f"the airflow command next to {sys.executable}")
    return missing


def namespaces_allowed() -> bool:
    """Unprivileged user + mount namespaces (`unshare -rm true`)."""
    if shutil.which("unshare") is None:
        return False
    try:
        return subprocess.run(["unshare", "-rm", "true"], capture_output=True, timeout=20).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


# -- processes -----------------------------------------------------------------------------------------
def _children(pid: int) -> list[int]:
    """Every descendant of `pid` (read from /proc), deepest last."""
    by_parent: dict[int, list[int]] = {}
    for stat in glob.glob("/proc/[0-9]*/stat"):
        try:
            text = Path(stat).read_text()
        except OSError:
            continue
        fields = text[text.rfind(")") + 2 :].split()
        by_parent.setdefault(int(fields[1]), []).append(int(stat.split("/")[2]))
    out, todo = [], [pid]
    while todo:
        for child in by_parent.get(todo.pop(), []):
            out.append(child)
            todo.append(child)
    return out


def _signal(pids: Iterable[int], sig: int) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, sig)


@dataclass
class Service:
    """One child process in its own process group, its output in `log`."""

    name: str
    proc: subprocess.Popen
    log: Path
    stop_signal: int = signal.SIGTERM

    @property
    def pid(self) -> int:
        return self.proc.pid

    def alive(self) -> bool:
        return self.proc.poll() is None

    def tail(self, lines: int = 60) -> str:
        try:
            text = self.log.read_text(errors="replace").splitlines()
        except OSError:
            return ""
        return "\n".join(text[-lines:])

    def stop(self, timeout: float = 20.0) -> None:
        """Stop this process, its process group and every descendant, by PID: `stop_signal` first,
        SIGKILL after `timeout`."""
        if self.proc.poll() is not None and not _children(self.pid):
            return
        family = [self.pid, *_children(self.pid)]
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.pid, self.stop_signal)  # the group is this process's own (start_new_session)
        _signal(family, self.stop_signal)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=timeout)
        leftovers = [p for p in [self.pid, *_children(self.pid), *family] if Path(f"/proc/{p}").exists()]
        if leftovers:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.pid, signal.SIGKILL)
            _signal(leftovers, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=10)


def start(
    name: str,
    argv: list[str],
    logs: Path,
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
    stop_signal: int = signal.SIGTERM,
    **popen: object,
) -> Service:
    logs.mkdir(parents=True, exist_ok=True)
    log = logs / f"{name}.log"
    handle = log.open("ab")
    proc = subprocess.Popen(
        argv,
        stdout=handle,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        env=dict(env) if env is not None else None,
        cwd=cwd,
        start_new_session=True,
        **popen,  # type: ignore[arg-type]
    )
    handle.close()
    return Service(name, proc, log, stop_signal)


@dataclass
class Processes:
    """Every service started, stopped in reverse order."""

    services: list[Service] = field(default_factory=list)

    def add(self, service: Service) -> Service:
        self.services.append(service)
        return service

    def stop_all(self) -> None:
        for service in reversed(self.services):
            service.stop()

    def dead(self) -> list[Service]:
        return [s for s in self.services if not s.alive()]


# -- PostgreSQL ----------------------------------------------------------------------------------------
def start_postgres(root: Path, processes: Processes) -> str:
    """initdb + postgres on a free port (trust auth on 127.0.0.1); returns the SQLAlchemy URL of a
    fresh `airflow` database."""
    bindir = postgres_bindir()
    account = postgres_account()
    assert bindir is not None and account is not None
    uid, gid = account
    pgdir = root / "postgres"
    pgdir.mkdir()
    os.chown(pgdir, uid, gid)
    as_account = {} if uid == os.getuid() else {"user": uid, "group": gid, "extra_groups": []}
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LC_ALL": "C.UTF-8", "LANG": "C.UTF-8"}
    subprocess.run(
        [str(bindir / "initdb"), "-D", str(pgdir / "data"), "-U", "airflow", "--auth=trust", "-E", "UTF8"],
        check=True,
        capture_output=True,
        env=env,
        cwd=pgdir,
        **as_account,  # type: ignore[arg-type]
    )
    port = free_port()
    processes.add(
        start(
            "postgres",
            [
                str(bindir / "postgres"),
                "-D",
                str(pgdir / "data"),
                "-p",
                str(port),
                "-h",
                "127.0.0.1",
                "-k",
                str(pgdir),
                "-c",
                "max_connections=300",
                "-c",
                "fsync=off",
                "-c",
                "synchronous_commit=off",
                "-c",
                "full_page_writes=off",
            ],
            root / "logs",
            env=env,
            cwd=pgdir,
            stop_signal=signal.SIGINT,  # fast shutdown
            **as_account,
        )
    )
    import psycopg2

    def connect():
        return psycopg2.connect(host="127.0.0.1", port=port, user="airflow", dbname="postgres", connect_timeout=2)

    conn = wait_for("postgres", connect, 60)
    conn.autocommit = True  # type: ignore[attr-defined]
    with conn.cursor() as cur:  # type: ignore[attr-defined]
        cur.execute("CREATE DATABASE airflow")
    conn.close()  # type: ignore[attr-defined]
    return f"postgresql+psycopg2://airflow@127.0.0.1:{port}/airflow"


# -- redis ---------------------------------------------------------------------------------------------
def start_redis(root: Path, processes: Processes) -> str:
    port = free_port()
    data = root / "redis"
    data.mkdir()
    processes.add(
        start(
            "redis",
            [
                shutil.which("redis-server") or "redis-server",
                "--port",
                str(port),
                "--bind",
                "127.0.0.1",
                "--dir",
                str(data),
                "--save",
                "",
                "--appendonly",
                "no",
                "--daemonize",
                "no",
            ],
            root / "logs",
        )
    )
    wait_for("redis", lambda: port_open(port), 30)
    return f"redis://127.0.0.1:{port}/0"


# -- S3 ------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class S3Request:
    at: float
    method: str
    bucket: str
    key: str
    status: int
    bytes: int
    access_key: str = ""  # who asked (each worker of the deployment signs with its own key id)


class CountingS3:
    """moto's S3 server on 127.0.0.1 (a thread of this process) that records every request and the
    response bytes it sent, so a test can tell what a run downloaded."""

    def __init__(self) -> None:
        self.port = free_port()
        self.requests: list[S3Request] = []
        self._lock = threading.Lock()
        self._server = None
        self._thread: threading.Thread | None = None

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def _wrap(self, app):
        from urllib.parse import unquote

        def counting(environ, start_response):
            method = environ.get("REQUEST_METHOD", "")
            path = unquote(environ.get("PATH_INFO", "")).lstrip("/")
            # SigV4: "AWS4-HMAC-SHA256 Credential=<access key id>/<date>/<region>/s3/aws4_request, ..."
            auth = environ.get("HTTP_AUTHORIZATION", "")
            access_key = auth.split("Credential=", 1)[1].split("/", 1)[0] if "Credential=" in auth else ""
            bucket, _, key = path.partition("/")
            status = [0]

            def start(status_line, headers, exc_info=None):
                status[0] = int(status_line.split()[0])
                return (
                    start_response(status_line, headers, exc_info) if exc_info else start_response(status_line, headers)
                )

            sent = 0
            result = app(environ, start)
            try:
                for chunk in result:
                    sent += len(chunk)
                    yield chunk
            finally:
                if hasattr(result, "close"):
                    result.close()
                with self._lock:
                    self.requests.append(S3Request(time.time(), method, bucket, key, status[0], sent, access_key))

        return counting

    def start(self) -> None:
        import logging

        from moto.moto_server.werkzeug_app import DomainDispatcherApplication, MotoRequestHandler, create_backend_app
        from werkzeug.serving import make_server

        logging.getLogger("werkzeug").setLevel(logging.ERROR)  # no line per request
        app = self._wrap(DomainDispatcherApplication(create_backend_app))
        self._server = make_server("127.0.0.1", self.port, app, threaded=True, request_handler=MotoRequestHandler)
        self._thread = threading.Thread(target=self._server.serve_forever, name="moto-s3", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
        if self._thread is not None:
            self._thread.join(timeout=10)

    def between(self, start: float, end: float) -> list[S3Request]:
        with self._lock:
            return [r for r in self.requests if start <= r.at <= end]
