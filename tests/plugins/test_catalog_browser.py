"""The Airflow UI in headless Chromium (Debian's /usr/bin/chromium driven by playwright), against the
real api-server of tests/plugins/conftest.py: a person logs in, opens "Artifact catalog" from the
navigation, reads the matrix, filters it, opens an artifact's page and copies a URI, and triggers the
compile DAG from its form without writing JSON. Screenshots go to `test-artifacts/` (NEURONFORGE_TEST_ARTIFACTS)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from tests.conftest import Compiled
from tests.plugins.conftest import REPO

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
pytestmark = pytest.mark.skipif(
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


@pytest.fixture(scope="module")
def shots() -> Path:
    folder = Path(os.environ.get("NEURONFORGE_TEST_ARTIFACTS", REPO / "test-artifacts")) / "ui"
    folder.mkdir(parents=True, exist_ok=True)
    return folder


@pytest.fixture(scope="module")
def browser():
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        yield browser
        browser.close()


@pytest.fixture
def page(browser, server):
    """A logged-in page: the simple auth manager's login form, as a person fills it."""
    base, password = server
    context = browser.new_context(permissions=["clipboard-read", "clipboard-write"], base_url=base)
    page = context.new_page()
    page.goto("/")
    page.fill("input[name=username]", "admin")
    page.fill("input[name=password]", password)
    page.click("button:has-text('Sign in')")
    page.wait_for_function("() => !location.pathname.startsWith('/auth')", timeout=30000)
    assert "_token" in {c["name"] for c in context.cookies()}
    yield page
    context.close()


def _catalog(page, base: str):
    """The plugin's page as the UI shows it: inside an iframe of the navigation entry's route."""
    page.goto("/plugin/neuronforge-catalog")
    frame = page.wait_for_selector("iframe", timeout=30000).content_frame()
    frame.wait_for_selector("#matrix", timeout=30000)
    assert frame.url.startswith(f"{base}/neuronforge/")
    return frame


def test_the_catalog_in_the_ui(page, server, compiled: Compiled, shots: Path) -> None:
    base, _ = server
    frame = _catalog(page, base)
    statuses = {cell.get_attribute("data-status") for cell in frame.query_selector_all("td[data-status]")}
    assert statuses == {"published", "stale", "smoke-failed", "building"}
    assert frame.query_selector("#latency-plot") is not None
    page.screenshot(path=str(shots / "catalog.png"), full_page=True)

    # filter: only the smoke failure is left
    frame.select_option("#filter-status", "smoke-failed")
    frame.click("#filters button[type=submit]")
    frame.wait_for_url("**status=smoke-failed**")
    frame.wait_for_selector("#matrix")
    statuses = {cell.get_attribute("data-status") for cell in frame.query_selector_all("td[data-status]")}
    assert statuses == {"smoke-failed"}
    assert "greedy tokens differ" in frame.content()  # the page's list of rows says why
    page.screenshot(path=str(shots / "catalog-filtered.png"), full_page=True)


def test_copying_a_uri(page, server, compiled: Compiled, shots: Path) -> None:
    base, _ = server
    frame = _catalog(page, base)
    # the published cell opens that artifact's own page, inside the same frame
    frame.click("td[data-status=published] a")
    frame.wait_for_selector(f"#artifact-{compiled.first.key[:12]}.detail", timeout=30000)
    assert frame.url == f"{base}/neuronforge/artifacts/{compiled.first.key}"
    assert frame.query_selector_all("pre.snippet")
    page.screenshot(path=str(shots / "catalog-artifact.png"), full_page=True)
    button = frame.query_selector("button[aria-label='copy manifest URI']")
    expected = button.get_attribute("data-copy")
    assert expected.endswith("/manifest.json")
    button.click()
    frame.wait_for_function(
        "() => document.querySelector(\"button[aria-label='copy manifest URI']\").textContent === 'copied'"
    )
    assert frame.evaluate("navigator.clipboard.readText()") == expected


def test_an_unauthenticated_browser_is_refused(browser, server) -> None:
    base, _ = server
    context = browser.new_context()
    response = context.new_page().goto(f"{base}/neuronforge/")
    assert response.status == 401 and "Not authenticated" in response.text()
    context.close()


# -- the compile DAG's trigger form -------------------------------------------------------------------
def _runs(base: str, token: str) -> list[dict]:
    import json

    from tests.plugins.conftest import http_get

    status, body = http_get(f"{base}/api/v2/dags/neuronforge_compile_publish/dagRuns", token)
    assert status == 200, body
    return json.loads(body)["dag_runs"]


def _trigger_dialog(page):
    page.goto("/dags/neuronforge_compile_publish")
    page.get_by_role("button", name="Trigger").first.click()
    dialog = page.locator("[role=dialog][data-state=open]")
    dialog.get_by_text("Run Parameters").wait_for()
    return dialog


def test_the_default_trigger_needs_no_json(page, server, token: str, shots: Path) -> None:
    base, _ = server
    before = len(_runs(base, token))
    dialog = _trigger_dialog(page)
    # the common case is fields with titles and dropdowns, not a JSON array
    for title in (
        "Serving profile",
        "Instance type",
        "Tensor parallel degree",
        "Batch size",
        "Sequence length",
        "Quantization",
        "More targets (advanced)",
    ):
        dialog.get_by_text(title).first.wait_for(timeout=30000)  # a labelled field (required ones get a *)
    page.screenshot(path=str(shots / "trigger-form.png"), full_page=True)
    dialog.get_by_role("button", name="Trigger").last.click()
    page.get_by_text("Dag run has been successfully triggered").first.wait_for(timeout=30000)
    runs = _runs(base, token)
    assert len(runs) == before + 1
    conf = runs[-1]["conf"]
    assert conf["instance_type"] == "inf2.xlarge" and conf["tp_degree"] == 1 and conf["profile"] == "cpu"


def test_a_bad_field_gets_one_sentence(page, server, token: str, shots: Path) -> None:
    base, _ = server
    before = len(_runs(base, token))
    dialog = _trigger_dialog(page)
    dialog.get_by_text("Advanced Options").click()
    dialog.get_by_text('"model"').first.click()  # the conf editor
    page.keyboard.press("Control+A")
    page.keyboard.press("Delete")
    page.keyboard.insert_text('{"tp_degree": 0}')
    dialog.get_by_role("button", name="Trigger").last.click()
    sentence = "neuronforge_compile_publish: tp_degree = 0 is not allowed; use a whole number from 1 to 128."
    dialog.get_by_text(sentence).wait_for(timeout=30000)
    assert "Failed validating" not in dialog.inner_text()  # not Airflow's JSON schema dump
    page.screenshot(path=str(shots / "trigger-bad-field.png"), full_page=True)
    assert len(_runs(base, token)) == before
