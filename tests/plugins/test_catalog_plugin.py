"""The artifact catalog plugin in a real `airflow api-server` on 127.0.0.1 (its own AIRFLOW_HOME,
SQLite, the simple auth manager), over a store seeded by the pipeline: a published artifact, a smoke
failure and a build in progress, as the pipeline records them. Access follows Airflow's own
authentication; the page and the JSON endpoints show the same rows as `neuronforge.farm`."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from types import SimpleNamespace

import pytest

from neuronforge import leases
from neuronforge.failures import record_failure
from neuronforge.stores import open_store
from neuronforge.target import TargetSpec
from tests.conftest import TARGET, Compiled

REPO = Path(__file__).resolve().parents[2]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def seeded_store(compiled: Compiled, tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("catalog") / "store"
    shutil.copytree(Path(compiled.store.root_uri.removeprefix("file://")), root)
    store = open_store(f"file://{root}")
    state = SimpleNamespace(model="org/smoke-fails", target=TargetSpec.parse({**TARGET, "sequence_length": 32}))
    record_failure(
        store, "a" * 64, "smoke", RuntimeError("greedy tokens differ from the reference"), "manual__7", state
    )
    assert leases.try_acquire(store, "b" * 64, "worker-1:42", ttl_s=3600) is not None
    return root


@pytest.fixture(scope="module")
def server(seeded_store: Path, tmp_path_factory: pytest.TempPathFactory):
    """`airflow api-server` with the repo's plugins folder; yields (base URL, admin password)."""
    home = tmp_path_factory.mktemp("airflow-api")
    port = _free_port()
    env = {
        **os.environ,
        "AIRFLOW_HOME": str(home),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__CORE__PLUGINS_FOLDER": str(REPO / "plugins"),
        "AIRFLOW__CORE__DAGS_FOLDER": str(home / "dags"),
        "AIRFLOW__API__HOST": "127.0.0.1",
        "AIRFLOW__API__PORT": str(port),
        "NEURONFORGE_STORE": f"file://{seeded_store}",
        "PYTHONPATH": str(REPO),
    }
    airflow = str(Path(sys.executable).parent / "airflow")
    subprocess.run([airflow, "db", "migrate"], env=env, check=True, capture_output=True)
    log = open(home / "api-server.log", "w")  # noqa: SIM115 - closed below
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
            pytest.fail("api-server did not become healthy: " + (home / "api-server.log").read_text()[-2000:])
        password = json.loads((home / "simple_auth_manager_passwords.json.generated").read_text())["admin"]
        yield base, password
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        log.close()


def _get(url: str, token: str | None = None, cookie: str | None = None) -> tuple[int, bytes]:
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


@pytest.mark.parametrize("path", ["/neuronforge/", "/neuronforge/api/artifacts", "/neuronforge/api/artifacts/x"])
def test_an_unauthenticated_request_is_refused(server, path: str) -> None:
    base, _ = server
    assert _get(base + path)[0] == 401
    assert _get(base + path, token="not-a-jwt")[0] == 403


def test_the_json_rows(server, token: str, compiled: Compiled) -> None:
    base, _ = server
    status, body = _get(f"{base}/neuronforge/api/artifacts", token)
    rows = {r["key"][:1] if r["key"][0] in "ab" else "published": r for r in json.loads(body)}
    assert status == 200 and set(rows) == {"a", "b", "published"}
    assert rows["published"]["status"] == "published" and rows["published"]["key"] == compiled.first.key
    assert rows["a"]["status"] == "smoke-failed" and rows["a"]["model"] == "org/smoke-fails"
    assert rows["a"]["run_id"] == "manual__7" and "greedy tokens differ" in rows["a"]["message"]
    assert rows["b"]["status"] == "building" and "worker-1:42" in rows["b"]["message"]
    status, body = _get(f"{base}/neuronforge/api/artifacts?status=smoke-failed", token)
    assert [r["key"][0] for r in json.loads(body)] == ["a"]
    status, body = _get(f"{base}/neuronforge/api/artifacts/{compiled.first.key[:12]}", token)
    detail = json.loads(body)
    assert status == 200 and detail["manifest"]["cache_key"] == compiled.first.key
    assert detail["snippets"] and all(text for text in detail["snippets"].values())
    assert _get(f"{base}/neuronforge/api/artifacts/{'f' * 64}", token)[0] == 404


def test_the_page_with_the_ui_cookie(server, token: str, compiled: Compiled) -> None:
    base, _ = server
    status, body = _get(f"{base}/neuronforge/", cookie=token)  # what the browser sends after logging in
    page = body.decode()
    assert status == 200 and '<table id="matrix">' in page
    for state in ("published", "smoke-failed", "building"):
        assert f'data-status="{state}"' in page
    assert 'id="latency-plot"' in page and 'class="copy"' in page
    assert compiled.first.published.manifest_uri.rsplit("/store/", 1)[1] in page
    status, body = _get(f"{base}/neuronforge/?status=building", cookie=token)
    assert 'data-status="building"' in body.decode() and 'data-status="published"' not in body.decode()


def test_the_navigation_entry(server, token: str) -> None:
    base, _ = server
    status, body = _get(f"{base}/api/v2/plugins", token)
    assert status == 200
    (plugin,) = [p for p in json.loads(body)["plugins"] if p["name"] == "neuronforge_catalog"]
    (view,) = plugin["external_views"]
    assert view["href"] == "/neuronforge/" and view["destination"] == "nav" and view["url_route"]
