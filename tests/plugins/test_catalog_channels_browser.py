"""Release channels in the Airflow UI, in headless Chromium against a real `airflow api-server` over a
store moved and reviewed by `farm.releases.run` (tests/plugins/release_store.py): a person opens a
model's channels from the catalog, clicks promote, reads the confirmation naming the build the channel
points to now and the one it will point to, follows it to Airflow's own trigger form of the release DAG
with the request, pastes it and triggers: the run Airflow creates carries exactly that request. And the
channels of a model whose records are markup run nothing in the browser.

The api-server serves the repository's `dags/neuronforge_release.py` when there is one, else a stand-in
with the same Params (the fields of `ReleaseRequest`): what is tested is Airflow's form, not the DAG."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import urlencode

import pytest

from neuronforge.farm.releases import ReleaseRequest, run
from neuronforge.stores import open_store
from tests.plugins.conftest import NEEDS_CHROMIUM, REPO, api_server, http_get
from tests.plugins.release_store import MODEL, ODD_MODEL, SCRIPT, Releases, seed
from tests.plugins.test_catalog_hostile import INSPECT, WATCH

pytestmark = NEEDS_CHROMIUM

RELEASE_DAG = "neuronforge_release"
STAND_IN = '''"""A stand-in for the release DAG (tests only): its Params are the fields of ReleaseRequest."""
from dataclasses import MISSING, fields

from airflow.sdk import DAG, Param, task

from neuronforge.farm.releases import ACTIONS, ReleaseRequest

PARAMS = {
    f.name: Param(ACTIONS[0], enum=list(ACTIONS)) if f.name == "action"
    else Param(f.default, type="integer", minimum=1) if f.type in (int, "int")
    # the form sends an empty field as null: an optional text is "null or a string"
    else Param(f.default if f.default is not MISSING else "", type=["null", "string"])
    for f in fields(ReleaseRequest)
}

with DAG("neuronforge_release", schedule=None, params=PARAMS, tags=["neuronforge"]):

    @task
    def release() -> None:
        """Not run here (no scheduler): the test reads the run's conf."""

    release()
'''


@pytest.fixture(scope="module")
def seeded(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Releases]:
    """The channels store, with build b approved (so stable may take it)."""
    root = tmp_path_factory.mktemp("channels-ui") / "store"
    store = open_store(f"file://{root}")
    keys = seed(store, tmp_path_factory.mktemp("channels-ui-work"))
    run(store, ReleaseRequest(action="approve", build=keys.b, reason="evals pass"), by="erin")
    return root, keys


@pytest.fixture(scope="module")
def server(seeded: tuple[Path, Releases], jwt_secret: str, tmp_path_factory: pytest.TempPathFactory):
    """`airflow api-server` with the repo's plugins over the channels store, and the release DAG only."""
    import os

    home = tmp_path_factory.mktemp("airflow-channels")
    dags = home / "dags"
    dags.mkdir()
    real = REPO / "dags" / f"{RELEASE_DAG}.py"
    if real.exists():
        shutil.copy(real, dags / real.name)
    else:
        (dags / f"{RELEASE_DAG}.py").write_text(STAND_IN)
    env = {
        **os.environ,
        "AIRFLOW_HOME": str(home),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__CORE__PLUGINS_FOLDER": str(REPO / "plugins"),
        "AIRFLOW__CORE__DAGS_FOLDER": str(dags),
        "AIRFLOW__API__HOST": "127.0.0.1",
        "AIRFLOW__API_AUTH__JWT_SECRET": jwt_secret,
        "NEURONFORGE_STORE": f"file://{seeded[0]}",
        "PYTHONPATH": str(REPO),
    }
    airflow = str(Path(sys.executable).parent / "airflow")
    subprocess.run([airflow, "db", "migrate"], env=env, check=True, capture_output=True)
    subprocess.run([airflow, "dags", "reserialize"], env=env, check=True, capture_output=True)
    with api_server(home, env) as base:
        password = json.loads((home / "simple_auth_manager_passwords.json.generated").read_text())["admin"]
        yield base, password


@pytest.fixture(scope="module")
def shots() -> Path:
    import os

    folder = Path(os.environ.get("NEURONFORGE_TEST_ARTIFACTS", REPO / "test-artifacts")) / "ui"
    folder.mkdir(parents=True, exist_ok=True)
    return folder


@pytest.fixture
def page(browser, server):
    """A person logged in through the simple auth manager's form, who may read the clipboard."""
    base, password = server
    context = browser.new_context(permissions=["clipboard-read", "clipboard-write"], base_url=base)
    context.add_init_script(WATCH)
    page = context.new_page()
    page.csp_violations = []
    page.on("console", lambda m: "Content Security Policy" in m.text and page.csp_violations.append(m.text))
    page.goto("/")
    page.fill("input[name=username]", "admin")
    page.fill("input[name=password]", password)
    page.click("button:has-text('Sign in')")
    page.wait_for_function("() => !location.pathname.startsWith('/auth')", timeout=30000)
    yield page
    context.close()


def _runs(base: str, token: str) -> list[dict]:
    status, body = http_get(f"{base}/api/v2/dags/{RELEASE_DAG}/dagRuns", token)
    assert status == 200, body
    return json.loads(body)["dag_runs"]


def test_promote_from_a_models_channels_to_the_release_dags_trigger_form(
    page, server, token: str, seeded: tuple[Path, Releases], shots: Path
) -> None:
    base, _ = server
    keys = seeded[1]
    page.goto("/plugin/neuronforge-catalog")
    frame = page.wait_for_selector("iframe", timeout=30000).content_frame()
    frame.wait_for_selector("#matrix", timeout=30000)
    # the rejected build stable still points to is said in words in the catalog's rows
    row = frame.inner_text(f"#artifact-{keys.a[:12]}")
    assert "REJECTED (wrong tokenizer), still on stable" in row
    frame.locator("#matrix th", has_text=MODEL).locator("a.channels-link").click()
    frame.wait_for_selector("#channel-cpu-stable", timeout=30000)
    assert frame.url == f"{base}/neuronforge/channels?{urlencode({'model': MODEL})}"
    assert "REJECTED by dave" in frame.inner_text("#channel-cpu-stable .loud")
    page.screenshot(path=str(shots / "channels.png"), full_page=True)

    frame.locator("#channel-cpu-stable a.action", has_text=f"promote candidate's {keys.b[:12]} here").click()
    frame.wait_for_selector("#confirm", timeout=30000)
    assert frame.inner_text("#describe") == f"point {MODEL} · cpu · stable at build {keys.b[:12]}."
    assert frame.inner_text("#before").startswith(keys.a[:12])  # what stable points to now
    assert frame.inner_text("#after") == f"→ {keys.b[:12]}"  # and after
    expected = {
        "action": "promote",
        "model": MODEL,
        "profile": "cpu",
        "channel": "stable",
        "build": keys.b,
        "from_channel": "",
        "steps": 1,
        "to": "",
        "reason": "from candidate",
    }
    assert json.loads(frame.inner_text("#conf")) == expected
    page.screenshot(path=str(shots / "channels-confirm.png"), full_page=True)

    # the confirmation copies the request and opens the release DAG in the whole window
    frame.click("#trigger")
    page.wait_for_url(f"{base}/dags/{RELEASE_DAG}", timeout=30000, wait_until="commit")
    trigger = page.get_by_role("button", name="Trigger").first
    # Airflow's own trigger form, the request pasted as its configuration JSON
    before = len(_runs(base, token))
    trigger.click()
    dialog = page.locator("[role=dialog][data-state=open]")
    dialog.get_by_text("Advanced Options").click()
    dialog.get_by_text('"action"').first.click()  # the conf editor
    page.keyboard.press("Control+A")
    page.keyboard.press("Delete")
    page.keyboard.press("Control+V")  # what the confirmation copied
    dialog.get_by_text(keys.b).first.wait_for(timeout=10000)
    page.screenshot(path=str(shots / "channels-trigger-form.png"), full_page=True)
    dialog.get_by_role("button", name="Trigger").last.click()
    page.get_by_text("Dag run has been successfully triggered").first.wait_for(timeout=30000)
    runs = _runs(base, token)
    assert len(runs) == before + 1 and runs[-1]["conf"] == expected
    assert page.csp_violations == []


def test_hostile_channel_records_run_nothing(page, server, seeded: tuple[Path, Releases]) -> None:
    keys = seeded[1]
    dialogs: list[str] = []
    page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    for path in (
        f"/neuronforge/channels?{urlencode({'model': ODD_MODEL})}",
        f"/neuronforge/artifacts/{keys.hostile}",
        "/neuronforge/?model=org/hostile-model",
        f"/neuronforge/release?{urlencode({'action': 'approve', 'build': keys.hostile, 'reason': SCRIPT})}",
    ):
        response = page.goto(path)
        assert response is not None and response.status == 200, path
        page.wait_for_load_state("load")
        time.sleep(0.05)  # an `onerror` of a broken image fires after load
        found = page.evaluate(INSPECT)
        assert found["pwned"] == "undefined" and found["made"] == [] and dialogs == [], (path, found)
        assert SCRIPT in page.inner_text("body"), path  # shown as text
    assert page.csp_violations == []
