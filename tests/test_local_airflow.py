"""`neuronforge airflow` (what `make airflow` runs), started as a user starts it: no activated venv (PATH
without the venv's bin), a fresh home. One start for the module: it answers on the URL it prints,
the printed login works in a browser, the catalog plugin, the compile DAG's trigger form and the
plugin's one-sentence answer to a bad trigger are there, every socket its processes listen on is on
127.0.0.1, and Ctrl+C stops all of it, exit 0, within seconds. Screenshots go to
`test-artifacts/screenshots/` (NEURONFORGE_TEST_ARTIFACTS)."""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

import psutil
import pytest

from neuronforge.interfaces import airflow_db, local_airflow
from neuronforge.interfaces.cli import main

REPO = Path(__file__).resolve().parents[1]
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
STOP_LIMIT_S = 15.0
# As root in a closed network: no sandbox, and none of Chromium's background connections.
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _tree(pid: int) -> list[psutil.Process]:
    try:
        root = psutil.Process(pid)
        return [root, *root.children(recursive=True)]
    except psutil.Error:
        return []


def _listening(procs: list[psutil.Process]) -> set[tuple[str, int, str]]:
    """(address, port, process name) of every listening TCP socket of `procs`."""
    found = set()
    for p in procs:
        try:
            for c in p.net_connections(kind="tcp"):
                if c.status == psutil.CONN_LISTEN:
                    found.add((c.laddr.ip, c.laddr.port, p.name()))
        except psutil.Error:
            pass
    return found


@dataclass
class Running:
    proc: subprocess.Popen
    url: str
    password: str
    home: Path
    output: list[str]
    sockets: set[tuple[str, int, str]] = field(default_factory=set)
    sampling: threading.Event = field(default_factory=threading.Event)


@pytest.fixture(scope="module")
def running(tmp_path_factory: pytest.TempPathFactory):
    home = tmp_path_factory.mktemp("nf-home")
    port = _free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AIRFLOW", "VIRTUAL_ENV", "NEURONFORGE_"))}
    env |= {"PATH": "/usr/bin:/bin", "NEURONFORGE_HOME": str(home), "PYTHONPATH": str(REPO)}  # no venv on PATH
    proc = subprocess.Popen(
        [sys.executable, "-m", "neuronforge.interfaces.cli", "airflow", "--port", str(port)],
        env=env,
        cwd=home,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    output: list[str] = []
    threading.Thread(target=lambda: output.extend(iter(proc.stdout.readline, "")), daemon=True).start()
    deadline = time.monotonic() + 300
    while not any(line.startswith("password:") for line in output):
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            pytest.fail("neuronforge airflow did not come up:\n" + "".join(output))
        time.sleep(0.5)
    text = "".join(output)
    url = re.search(r"^Airflow UI: (\S+)$", text, re.M).group(1)
    password = re.search(r"^password:\s+(\S+)$", text, re.M).group(1)
    assert re.search(r"^login:\s+admin$", text, re.M)
    run = Running(proc, url, password, home / "airflow", output)

    def sample() -> None:  # what listens while it runs, until the stop test stops sampling
        while not run.sampling.is_set() and proc.poll() is None:
            run.sockets |= _listening(_tree(proc.pid))
            time.sleep(1)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    try:
        yield run
    finally:
        run.sampling.set()
        if proc.poll() is None:  # the stop test did not run or failed: do not leave it behind
            for p in reversed(_tree(proc.pid)):
                p.kill()
            proc.wait(30)


def _token(run: Running) -> str:
    body = json.dumps({"username": "admin", "password": run.password}).encode()
    request = urllib.request.Request(f"{run.url}/auth/token", data=body, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=30) as response:
        return json.loads(response.read())["access_token"]


def _wait_for_dag(run: Running, dag_id: str = "neuronforge_compile_publish") -> None:
    """The dag-processor of the deployment has parsed the DAGs folder: the DAG is in the UI."""
    token = _token(run)
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline:
        headers = {"Authorization": f"Bearer {token}"}
        request = urllib.request.Request(f"{run.url}/api/v2/dags/{dag_id}", headers=headers)
        try:
            with urllib.request.urlopen(request, timeout=10) as response:
                if response.status == 200:
                    return
        except OSError:
            pass
        time.sleep(2)
    log = (run.home / "logs" / "dag-processor.out").read_text()
    pytest.fail(f"{dag_id} never appeared; dag-processor log:\n{log[-3000:]}")


def test_a_taken_port_is_one_line(capsys) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        assert main(["airflow", "--port", str(port)]) == 2
    err = capsys.readouterr().err
    assert err.strip() == (
        f"error: port {port} on 127.0.0.1 is taken (Address already in use); "
        "stop what listens there or pick another with --port"
    )


def test_the_printed_url_answers_with_the_plugins_loaded(running: Running) -> None:
    assert running.url.startswith("http://127.0.0.1:")
    with urllib.request.urlopen(f"{running.url}/api/v2/monitor/health", timeout=10) as response:
        assert response.status == 200
    # the neuronforge plugin is loaded: its catalog answers the printed login
    request = urllib.request.Request(f"{running.url}/neuronforge/", headers={"Cookie": f"_token={_token(running)}"})
    with urllib.request.urlopen(request, timeout=30) as response:
        assert response.status == 200 and b"matrix" in response.read()
    # ... and its one-sentence answer to a bad trigger (a conf the DAG's params refuse; no run made)
    _wait_for_dag(running)
    body = json.dumps({"logical_date": None, "conf": {"tp_degree": 0}}).encode()
    request = urllib.request.Request(
        f"{running.url}/api/v2/dags/neuronforge_compile_publish/dagRuns",
        data=body,
        headers={"Content-Type": "application/json", "Authorization": f"Bearer {_token(running)}"},
    )
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(request, timeout=30)
    assert refused.value.code == 400
    detail = json.loads(refused.value.read())["detail"]
    assert detail == "neuronforge_compile_publish: tp_degree = 0 is not allowed; use a whole number from 1 to 128."
    # the cluster policy and the pool `make demo` sets up
    assert (running.home / "config" / "airflow_local_settings.py").exists()
    request = urllib.request.Request(
        f"{running.url}/api/v2/pools/neuron_cores", headers={"Authorization": f"Bearer {_token(running)}"}
    )
    with urllib.request.urlopen(request, timeout=30) as response:
        assert json.loads(response.read())["slots"] == local_airflow.POOL_SLOTS
    assert json.loads(local_airflow.password_file(running.home).read_text()) == {"admin": running.password}


@pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="needs Debian's chromium (apt-get install chromium)")
def test_log_in_open_the_catalog_and_the_trigger_form(running: Running) -> None:
    from playwright.sync_api import sync_playwright

    shots = Path(os.environ.get("NEURONFORGE_TEST_ARTIFACTS", REPO / "test-artifacts")) / "screenshots"
    shots.mkdir(parents=True, exist_ok=True)
    _wait_for_dag(running)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            page = browser.new_context(base_url=running.url).new_page()
            page.goto("/")
            page.fill("input[name=username]", "admin")
            page.fill("input[name=password]", running.password)
            page.click("button:has-text('Sign in')")
            page.wait_for_function("() => !location.pathname.startsWith('/auth')", timeout=30000)
            # the catalog: the plugin's navigation entry, its page inside the UI's iframe
            page.goto("/plugin/neuronforge-catalog")
            frame = page.wait_for_selector("iframe", timeout=30000).content_frame()
            frame.wait_for_selector("#matrix", timeout=30000)
            assert frame.url.startswith(f"{running.url}/neuronforge/")
            page.screenshot(path=str(shots / "local-airflow-catalog.png"), full_page=True)
            # the compile DAG's trigger form: the plugin's fields, not a JSON editor
            page.goto("/dags/neuronforge_compile_publish")
            page.get_by_role("button", name="Trigger").first.click()
            dialog = page.locator("[role=dialog][data-state=open]")
            dialog.get_by_text("Run Parameters").wait_for(timeout=30000)
            for title in ("Serving profile", "Instance type", "Tensor parallel degree"):
                dialog.get_by_text(title).first.wait_for(timeout=30000)
            page.screenshot(path=str(shots / "local-airflow-trigger-form.png"), full_page=True)
        finally:
            browser.close()
    assert (shots / "local-airflow-trigger-form.png").stat().st_size > 0


def test_ctrl_c_stops_everything_and_nothing_listened_beyond_loopback(running: Running) -> None:
    """Last in the module: it stops the deployment."""
    procs = _tree(running.proc.pid)
    running.sockets |= _listening(procs)
    running.sampling.set()
    assert len(procs) > 4  # this process, its four components and their workers
    started = time.monotonic()
    running.proc.send_signal(signal.SIGINT)  # what Ctrl+C in its terminal sends it
    assert running.proc.wait(timeout=STOP_LIMIT_S + 5) == 0
    assert time.monotonic() - started < STOP_LIMIT_S
    assert "stopped" in "".join(running.output)
    _, alive = psutil.wait_procs(procs[1:], timeout=2)
    assert not alive, f"left running: {[(p.pid, p.name()) for p in alive]}"
    port = int(running.url.rsplit(":", 1)[1])
    # the sampling saw the api-server: the next assertion has something to check
    assert ("127.0.0.1", port) in {s[:2] for s in running.sockets}
    beyond = {s for s in running.sockets if s[0] != "127.0.0.1"}
    assert not beyond, f"listening beyond loopback: {beyond}"


# -- a current metadata DB is not migrated again --------------------------------------------------------
def test_installed_head_is_airflows_own() -> None:
    """The head read from the migration scripts' text is the one Airflow's alembic computes."""
    ask = "from airflow.utils.db import _get_script_object; print(_get_script_object().get_current_head())"
    done = subprocess.run([sys.executable, "-c", ask], capture_output=True, text=True, check=True, timeout=120)
    assert airflow_db.installed_head() == done.stdout.strip().splitlines()[-1]


@pytest.fixture(scope="module")
def migrated(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str], float]:
    """A home `init_home` migrated, then started again: (home, env, seconds the second start took)."""
    nf_home = tmp_path_factory.mktemp("nf-db")
    home = nf_home / "airflow"
    with pytest.MonkeyPatch.context() as mp:  # this test's Airflow: none of the caller's settings
        for name in [k for k in os.environ if k.startswith(("AIRFLOW", "NEURONFORGE_"))]:
            mp.delenv(name)
        mp.setenv("NEURONFORGE_HOME", str(nf_home))
        env = local_airflow.airflow_env(home)
    assert local_airflow.init_home(home, env) is None  # a new DB: migrated
    log = home / "db-migrate.log"
    written = log.stat().st_mtime_ns
    started = time.monotonic()
    revision = local_airflow.init_home(home, env)
    took = time.monotonic() - started
    assert revision == airflow_db.installed_head()  # current: left as it is
    assert log.stat().st_mtime_ns == written  # airflow db migrate did not run
    return home, env, took


def test_a_current_database_is_not_migrated_again(migrated: tuple[Path, dict[str, str], float]) -> None:
    _, _, took = migrated
    assert took < 2.0, took  # no Airflow process: a file read and one SQLite query
    assert local_airflow.said(airflow_db.installed_head()).endswith("not migrated again")


def test_a_database_current_for_the_demo_stays_current_for_the_ui_and_back(
    migrated: tuple[Path, dict[str, str], float],
) -> None:
    """`make demo` and `make airflow` run Airflow with different variables: each fingerprint a migration
    of the same revision finished under is kept, so alternating them migrates once per environment."""
    home, env, _ = migrated
    log = home / "db-migrate.log"
    other = {**env, "AIRFLOW__WEBSERVER__EXPOSE_CONFIG": "False"}  # the UI's own settings differ
    assert local_airflow.init_home(home, other) is None  # first time under these variables: migrated
    written = log.stat().st_mtime_ns
    for again in (env, other, env):  # and back, and back again: nothing to migrate
        assert local_airflow.init_home(home, again) == airflow_db.installed_head()
    assert log.stat().st_mtime_ns == written


def _sql(home: Path, statement: str) -> None:
    import sqlite3

    with contextlib.closing(sqlite3.connect(home / "airflow.db")) as conn:
        conn.execute(statement)
        conn.commit()


def test_anything_a_migration_would_change_is_migrated(
    migrated: tuple[Path, dict[str, str], float], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each condition alone makes the DB not current (a wrong skip is worse than a slow migration)."""
    home, env, _ = migrated
    head = airflow_db.installed_head()

    def current(env: dict[str, str] = env) -> bool:
        return airflow_db.current_revision(home, env, local_airflow.POOL, local_airflow.POOL_SLOTS) is not None

    assert current()
    # another Airflow environment: a variable, a database from the environment
    assert not current({**env, "AIRFLOW__LOGGING__LOG_FILENAME_TEMPLATE": "{{ ti.task_id }}.log"})
    assert not current({**env, "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{home / 'other.db'}"})
    # another Airflow installed: another head, another version
    with monkeypatch.context() as mp:
        mp.setattr(airflow_db, "installed_head", lambda: "0123456789ab")
        assert not current()
    with monkeypatch.context() as mp:
        mp.setattr(airflow_db, "airflow_version", lambda: "99.0.0")
        assert not current()
    # airflow.cfg changed
    cfg = home / "airflow.cfg"
    text = cfg.read_text()
    cfg.write_text(text + "\n# edited\n")
    try:
        assert not current()
    finally:
        cfg.write_text(text)
    assert current()
    # the DB itself: another revision, a pool gone or resized
    _sql(home, "UPDATE alembic_version SET version_num = 'a1b2c3d4e5f6'")
    assert not current()
    _sql(home, f"UPDATE alembic_version SET version_num = '{head}'")
    _sql(home, f"UPDATE slot_pool SET slots = 7 WHERE pool = '{local_airflow.POOL}'")
    assert not current()
    _sql(home, f"UPDATE slot_pool SET slots = {local_airflow.POOL_SLOTS} WHERE pool = '{local_airflow.POOL}'")
    assert current()
    # no record of a migration that finished (one killed half-way, a DB copied in)
    stamp = (home / airflow_db.STAMP).read_text()
    airflow_db.forget(home)
    assert not current()
    (home / airflow_db.STAMP).write_text(stamp)
    assert current()
