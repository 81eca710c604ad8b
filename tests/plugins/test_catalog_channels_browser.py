"""Release channels in the Airflow UI, in headless Chromium against a real `airflow api-server` over a
store moved and reviewed by `farm.releases.run` (tests/plugins/release_store.py): a person opens a
model's channels from the catalog, clicks promote, reads the confirmation naming the build the channel
points to now and the one it will point to, follows it to Airflow's own trigger form of the release DAG
with the request, pastes it and triggers: the run Airflow creates carries exactly that request. And the
channels of a model whose records are markup run nothing in the browser.

The api-server serves the repository's DAGs: the trigger form is the real `neuronforge_release`'s (an
enum without a default kept its Trigger button disabled: this test found it)."""

from __future__ import annotations

import json
import time
from pathlib import Path
from urllib.parse import urlencode

import pytest

from neuronforge.farm.releases import ReleaseRequest, run
from neuronforge.stores import open_store
from tests.plugins.conftest import NEEDS_CHROMIUM, http_get
from tests.plugins.release_store import MODEL, ODD_MODEL, SCRIPT, Releases, seed
from tests.plugins.speed_store import MODEL as SPEED_MODEL
from tests.plugins.speed_store import seed as speed_seed
from tests.plugins.test_catalog_browser import OVERFLOWING
from tests.plugins.test_catalog_hostile import INSPECT, WATCH

pytestmark = NEEDS_CHROMIUM

RELEASE_DAG = "neuronforge_release"


@pytest.fixture(scope="module")
def seeded(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Releases]:
    """The channels store, with build b approved (so stable may take it)."""
    root = tmp_path_factory.mktemp("channels-ui") / "store"
    store = open_store(f"file://{root}")
    keys = seed(store, tmp_path_factory.mktemp("channels-ui-work"))
    run(store, ReleaseRequest(action="approve", build=keys.b, reason="evals pass"), by="erin")
    speed_seed(store, tmp_path_factory.mktemp("speed-ui-work"))  # another model: its speed charts
    return root, keys


@pytest.fixture(scope="module")
def seeded_store(seeded: tuple[Path, Releases]) -> Path:
    """What conftest's api-server serves: the channels store."""
    return seeded[0]


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
        "reason": "from candidate",
        "accept_regression": "",
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
    page.context.add_init_script(WATCH)  # records what a page's data would make run
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


# Each chart of the page as the reader sees it: its box, its accessible name, and the marks it draws.
CHARTS = """() => [...document.querySelectorAll('svg.chart')].map(svg => {
  const box = svg.getBoundingClientRect();
  const labels = [...svg.querySelectorAll('text.build')].map(t => t.getBoundingClientRect());
  const overlaps = labels.slice(1).filter((b, i) => b.left < labels[i].right).length;
  return {id: svg.id, left: box.left, right: box.right, width: box.width, height: box.height,
          label: svg.getAttribute('aria-label'), role: svg.getAttribute('role'),
          points: svg.querySelectorAll('circle.point').length, gaps: svg.querySelectorAll('.gap[data-key]').length,
          current: [...svg.querySelectorAll('text.current')].map(t => t.textContent),
          fill: getComputedStyle(svg.querySelector('circle.point')).fill, overlaps};
})"""


def test_a_models_speed_charts_are_drawn_and_readable_at_1400_by_900(page, shots: Path) -> None:
    page.set_viewport_size({"width": 1400, "height": 900})
    response = page.goto(f"/neuronforge/channels?{urlencode({'model': SPEED_MODEL})}")
    assert response is not None and response.status == 200
    page.wait_for_selector("#speed svg.chart", timeout=30000)
    charts = page.evaluate(CHARTS)
    assert [c["id"] for c in charts] == ["chart-0-0", "chart-0-1", "chart-1-0", "chart-1-1"]
    for c in charts:
        # visible, inside the window, wide enough to read, styled by the style sheet (no inline style)
        assert c["left"] >= 0 and c["right"] <= 1400 and c["width"] >= 380 and c["height"] >= 140, c
        assert c["role"] == "img" and c["label"].startswith(("time to first token", "per output token")), c
        assert c["overlaps"] == 0 and c["fill"] == "rgb(29, 78, 216)", c
    first = charts[0]
    assert (first["points"], first["gaps"], first["current"]) == (3, 1, ["stable", "candidate"])
    assert page.is_visible("#chart-0-0") and not page.is_visible(".speed-table")  # the numbers: one click away
    page.click("#chart-0 details summary")
    assert page.is_visible("#chart-0 .speed-table")
    assert page.evaluate(OVERFLOWING) == []
    page.screenshot(path=str(shots / "speed-charts.png"), full_page=True)
    assert page.csp_violations == []
