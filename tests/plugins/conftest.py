"""Fixtures of the plugin tests: a store seeded by the pipeline (a published artifact, a stale one, a smoke
failure and a build in progress, recorded as the pipeline records them) and a real `airflow
api-server` on 127.0.0.1 over it, with its own AIRFLOW_HOME (SQLite, the simple auth manager), the
repo's plugins folder and its DAGs (serialized first, so the trigger form exists).

The seeded store and its api-server are built once per session and shared by every module that
serves that store (they only read it); a module that serves a store of its own (its own
`seeded_store` fixture) gets its own api-server for the module. One headless Chromium per session.
Every port is a free one and every folder a pytest temp dir: pytest-xdist workers share nothing."""

from __future__ import annotations

import importlib.util
import json
import os
import secrets
import shutil
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType, SimpleNamespace
from typing import Any

import pytest

from neuronforge.artifacts import farm_index, leases
from neuronforge.artifacts.farm_index import record_failure
from neuronforge.spec.target import TargetSpec
from neuronforge.stores import open_store
from tests.conftest import TARGET, Compiled

REPO = Path(__file__).resolve().parents[2]
# The store methods that read from the store (each one request, or one per object): what the catalog
# tests' counting and spying stores wrap, so a new read method is counted by every one of them.
STORE_READS = (
    "get_bytes",
    "read_json",
    "read_versioned",
    "read_capped",
    "list",
    "list_page",
    "exists",
    "get_file",
    "get_files",
)
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
NEEDS_CHROMIUM = pytest.mark.skipif(
    not Path(CHROMIUM).exists(), reason="needs Debian's chromium (apt-get install chromium; .ci/run does)"
)
# As root in a closed network: no sandbox, and none of Chromium's background connections.
ARGS = [
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


@pytest.fixture(scope="session")
def shared_seeded_store(compiled: Compiled, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The plugin tests' store, built once per session; tests only read it (a module that adds to it
    copies it: tests/plugins/test_catalog_browser.py)."""
    root = tmp_path_factory.mktemp("catalog") / "store"
    shutil.copytree(Path(compiled.store.root_uri.removeprefix("file://")), root)
    store = open_store(f"file://{root}")
    # A stale artifact, built by the pipeline under a profile version this deployment has since
    # replaced: registered here only (the api-server's registry has just cpu@local).
    from neuronforge.pipeline.runner import run_target
    from neuronforge.profiles import registry
    from neuronforge.profiles.cpu import CpuProfile

    class Superseded(CpuProfile):
        @property
        def version(self) -> str:
            return "0"

    registered = registry.all_profiles()
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(registry, "all_profiles", lambda: (*registered, Superseded()))
        target = TargetSpec.parse({**TARGET, "profile": "cpu@0"})
        run_target(str(compiled.checkpoint), target, store, tmp_path_factory.mktemp("catalog-work"))
    state = SimpleNamespace(model="org/smoke-fails", target=TargetSpec.parse({**TARGET, "sequence_length": 32}))
    record_failure(
        store, "a" * 64, "smoke", RuntimeError("greedy tokens differ from the reference"), "manual__7", state
    )
    # a build in progress, as the pipeline shows it: the lease, announced in the farm index
    # a day: the session shares this store, and a loaded suite runs for more than an hour
    lease = leases.try_acquire(store, "b" * 64, "worker-1:42", ttl_s=86400)
    assert lease is not None
    building = SimpleNamespace(model="org/in-progress", target=TargetSpec.parse({**TARGET, "sequence_length": 48}))
    farm_index.announce(store, lease, building)
    SHARED["store"] = root
    return root


# What the session shares: "store" -> the shared seeded store's root (set once it is built).
SHARED: dict[str, Path] = {}


@pytest.fixture(scope="module")
def seeded_store(shared_seeded_store: Path) -> Path:
    """The store the module's api-server serves: the shared one, unless the module defines its own."""
    return shared_seeded_store


def resigned(token: str, secret: str, **claims: Any) -> str:
    """`token` (one the api-server issued) with `claims` changed, signed as the api-server signs (its
    header, its algorithm) with `secret`: the api-server's own (`jwt_secret`) for a token refused for
    its claims alone (an expiry in the past), another for a forged one."""
    import jwt

    header = jwt.get_unverified_header(token)
    payload = {**jwt.decode(token, options={"verify_signature": False}), **claims}
    return jwt.encode(payload, secret, algorithm=header["alg"], headers={"kid": header["kid"]})


@pytest.fixture(scope="session")
def jwt_secret() -> str:
    """The api-server's JWT signing secret ([api_auth] jwt_secret): tests sign tokens with it (an
    expired one must be refused for its expiry, not for its signature)."""
    return secrets.token_urlsafe(64)  # >= 64 bytes: what HS512 wants


# base URL -> (AIRFLOW_HOME, environment) of each api-server the fixtures started
STARTED: dict[str, tuple[Path, dict[str, str]]] = {}


@contextmanager
def api_server(home: Path, env: dict[str, str], log_name: str = "api-server.log") -> Iterator[str]:
    """`airflow api-server` on a free port of 127.0.0.1 over `home` (already migrated); yields its URL."""
    port = _free_port()
    env = {**env, "AIRFLOW__API__PORT": str(port)}
    airflow = str(Path(sys.executable).parent / "airflow")
    log = open(home / log_name, "w")  # noqa: SIM115 - closed below
    proc = subprocess.Popen([airflow, "api-server", "--port", str(port)], env=env, stdout=log, stderr=log)
    base = f"http://127.0.0.1:{port}"
    try:
        for _ in range(120):
            try:
                if urllib.request.urlopen(f"{base}/api/v2/monitor/health", timeout=2).status == 200:
                    break
            except (urllib.error.URLError, OSError):
                time.sleep(1)
        else:
            pytest.fail("api-server did not become healthy: " + (home / log_name).read_text()[-2000:])
        STARTED[base] = (home, env)
        yield base
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        log.close()


@contextmanager
def catalog_server(store: Path, jwt_secret: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str]]:
    """`airflow api-server` with the repo's plugins folder over `store`; yields (base URL, admin password)."""
    home = tmp_path_factory.mktemp("airflow-api")
    env = {
        **os.environ,
        "AIRFLOW_HOME": str(home),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__CORE__PLUGINS_FOLDER": str(REPO / "plugins"),
        "AIRFLOW__CORE__DAGS_FOLDER": str(REPO / "dags"),
        "AIRFLOW__API__HOST": "127.0.0.1",
        "AIRFLOW__API_AUTH__JWT_SECRET": jwt_secret,
        "NEURONFORGE_STORE": f"file://{store}",
        "PYTHONPATH": str(REPO),
    }
    airflow = str(Path(sys.executable).parent / "airflow")
    subprocess.run([airflow, "db", "migrate"], env=env, check=True, capture_output=True)
    # the DAGs in the DB (what a dag-processor would do), so the UI has their trigger forms
    subprocess.run([airflow, "dags", "reserialize"], env=env, check=True, capture_output=True)
    with api_server(home, env) as base:
        password = json.loads((home / "simple_auth_manager_passwords.json.generated").read_text())["admin"]
        yield base, password


@pytest.fixture(scope="session")
def shared_server(shared_seeded_store: Path, jwt_secret: str, tmp_path_factory: pytest.TempPathFactory):
    """The api-server over the shared seeded store, one per session (about 20 s to start: db migrate,
    DAGs serialized, the server up)."""
    with catalog_server(shared_seeded_store, jwt_secret, tmp_path_factory) as started:
        yield started


@pytest.fixture(scope="module")
def server(seeded_store: Path, jwt_secret: str, tmp_path_factory: pytest.TempPathFactory, request):
    """`airflow api-server` with the repo's plugins folder over `seeded_store`: the session's shared
    one, or, for a module that serves another store (its own `seeded_store` fixture), one of the
    module's own. Yields (base URL, admin password)."""
    if SHARED.get("store") == seeded_store:
        yield request.getfixturevalue("shared_server")
        return
    with catalog_server(seeded_store, jwt_secret, tmp_path_factory) as started:
        yield started


@pytest.fixture(scope="module")
def plain_server(server, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A second api-server over the same home (DB, users, JWT secret), without any plugin: what
    Airflow answers where the first one's plugins must change nothing. Yields its URL."""
    home, env = STARTED[server[0]]
    empty = tmp_path_factory.mktemp("no-plugins")
    with api_server(home, {**env, "AIRFLOW__CORE__PLUGINS_FOLDER": str(empty)}, "plain-api-server.log") as base:
        yield base


def load_plugin(name: str) -> ModuleType:
    """`plugins/<name>.py` loaded as Airflow loads it (the folder is no package). The catalog's pages
    (`plugins/neuronforge_catalog_pages/`, imported by name) are imported once per process: each load
    has a fresh entry module over the same app."""
    spec = importlib.util.spec_from_file_location(name, REPO / "plugins" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def read_from(plugin: ModuleType, opener: Callable[[], Any]) -> None:
    """The catalog's pages read the store `opener` gives (its `base.store_opener` dependency overridden;
    `plugin.app.dependency_overrides.clear()` undoes it)."""
    plugin.app.dependency_overrides[plugin.pages.base.store_opener] = lambda: opener


@pytest.fixture(scope="module")
def plugin() -> ModuleType:
    """The catalog plugin's module."""
    return load_plugin("neuronforge_catalog")


@pytest.fixture(scope="module")
def browser():
    """Headless Chromium (Debian's, driven by playwright), one per module: each test's `page` has a
    browser context of its own (cookies, storage, permissions). Not one per session: while playwright's
    sync API is started it keeps an asyncio loop running in the main thread, and every later test of the
    process that calls `asyncio.run` (the triggers' tests, under pytest-xdist on the same worker) fails."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        yield browser
        browser.close()


@pytest.fixture(scope="module")
def shots() -> Path:
    """Where the browser tests keep their screenshots (test-artifacts/ui, or NEURONFORGE_TEST_ARTIFACTS)."""
    folder = Path(os.environ.get("NEURONFORGE_TEST_ARTIFACTS", REPO / "test-artifacts")) / "ui"
    folder.mkdir(parents=True, exist_ok=True)
    return folder


@pytest.fixture
def page(browser, server):
    """A logged-in page: the simple auth manager's login form, as a person fills it; it may use the
    clipboard (the catalog's confirmation copies a release request)."""
    base, password = server
    context = browser.new_context(permissions=["clipboard-read", "clipboard-write"], base_url=base)
    page = context.new_page()
    # what Chromium reports of every frame's Content-Security-Policy violations (the catalog's
    # pages must need none: no inline script, style or event handler)
    page.csp_violations = []
    page.on("console", lambda m: "Content Security Policy" in m.text and page.csp_violations.append(m.text))
    page.goto("/")
    page.fill("input[name=username]", "admin")
    page.fill("input[name=password]", password)
    page.click("button:has-text('Sign in')")
    page.wait_for_function("() => !location.pathname.startsWith('/auth')", timeout=30000)
    assert "_token" in {c["name"] for c in context.cookies()}
    yield page
    context.close()


def http_get(url: str, token: str | None = None, cookie: str | None = None) -> tuple[int, bytes]:
    request = urllib.request.Request(url)
    if token:
        request.add_header("Authorization", f"Bearer {token}")
    if cookie:
        request.add_header("Cookie", f"_token={cookie}")
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


@pytest.fixture(scope="module")
def token(server) -> str:
    base, password = server
    body = json.dumps({"username": "admin", "password": password}).encode()
    request = urllib.request.Request(f"{base}/auth/token", data=body, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=30) as response:
        return json.loads(response.read())["access_token"]
