"""The catalog's pictures of speed (issue 53), routes in this process (FastAPI's test client, Airflow's
`get_user` overridden) over a store of hand-measured builds (tests/plugins/speed_store.py): a model's
channels page charts each target's builds oldest to newest from the farm index (no manifest read), the
channels' current builds marked and named, a synthetic measurement hollow and said, a build without a
measurement a gap; a promotion's confirmation shows the candidate against what the channel serves, with
the verdict, and says a regression will be refused unless a reason is given."""

from __future__ import annotations

import html
import re
from pathlib import Path
from types import ModuleType
from urllib.parse import urlencode

import pytest

from neuronforge.stores import open_store
from tests.plugins.speed_store import MODEL, Speed, seed
from tests.plugins.test_catalog_channels import _client, _get, _text


@pytest.fixture(scope="module")
def seeded(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Speed]:
    root = tmp_path_factory.mktemp("speed") / "store"
    return root, seed(open_store(f"file://{root}"), tmp_path_factory.mktemp("speed-work"))


@pytest.fixture
def client(plugin: ModuleType, seeded: tuple[Path, Speed], monkeypatch: pytest.MonkeyPatch):
    yield _client(plugin, seeded[0], monkeypatch)
    plugin.app.dependency_overrides.clear()


def _svgs(page: str) -> dict[str, str]:
    return dict(re.findall(r'<svg id="([^"]+)" class="chart"(.*?)</svg>', page, re.S))


def test_a_models_page_charts_each_target_across_its_builds(client, seeded: tuple[Path, Speed]) -> None:
    keys = seeded[1]
    page = _get(client, f"/channels?{urlencode({'model': MODEL})}")
    # the page's reads of before (tests/plugins/test_catalog_channels.py) and the farm index's head, tail
    # and the one page holding the model's rows: the chart reads no manifest
    assert client.store.requests == 1 + 2 + 2 + 2 * 4 + 3
    headings = [_heading(page, f"chart-{n}") for n in range(2)]
    assert [h.split(" · ")[0] for h in headings] == ["cpu", "cpu"] and "-b1-" in headings[0] and "-b2-" in headings[1]
    assert 'id="chart-2"' not in page  # batch 1 and batch 2: one chart per target
    svgs = _svgs(page)
    first = svgs["chart-0-0"]
    # accessible: a role, a name, a title and a description saying what is drawn
    assert 'role="img"' in first and 'aria-label="time to first token, short prompt: cpu · ' in first
    assert '<title id="chart-0-0-title">time to first token, short prompt' in first
    desc = html.unescape(re.search(r"<desc[^>]*>(.*?)</desc>", first, re.S)[1])
    assert desc.startswith("4 build(s) oldest to newest, 3 measured. 1 without a measurement")
    assert "synthetic numbers (a fake consumer's) drawn hollow" in desc
    assert f"channels now: stable: {keys.fast[:8]}; candidate: {keys.slow[:8]}" in desc
    # the builds oldest to newest: a gap, then the three measured points, the synthetic one hollow
    drawn = re.findall(r'<(circle|text) class="(point[^"]*|gap)"[^>]*data-key="([0-9a-f]+)"', first)
    assert [(k, css) for _, css, k in drawn] == [
        (keys.old, "gap"),
        (keys.fast, "point current"),
        (keys.synthetic, "point synthetic"),
        (keys.slow, "point current"),
    ]
    # the channels' builds marked and named above the plot
    assert re.findall(r'<text class="current"[^>]*>([^<]+)</text>', first) == ["stable", "candidate"]
    # the median line and the p10–p90 band join the measured run, never across the gap
    assert len(re.findall(r"<polyline class=\"median\"", first)) == 1
    assert len(re.findall(r'<polygon class="band"', first)) == 1
    # per-token chart: the slow build's median is drawn above (larger y is lower) the fast one's
    per = svgs["chart-0-1"]
    ys = {
        k: float(y)
        for y, k in re.findall(r'<circle class="point[^"]*" cx="[^"]+" cy="([^"]+)" r="4" data-key="([^"]+)"', per)
    }
    assert ys[keys.slow] < ys[keys.fast]
    # the numbers as a table
    table = _text(page, "chart-0")
    assert "no measurement (published before the protocol)" in table
    assert "synthetic (a fake consumer's numbers) on cpu with torch 2.9" in table
    assert "12.5 ms (12.4 ms–12.6 ms)" in table and "10 ms (9.9 ms–10.1 ms)" in table


def _heading(page: str, section_id: str) -> str:
    found = re.search(rf'<section class="speed" id="{section_id}"><h3>(.*?)</h3>', page, re.S)
    assert found is not None
    return html.unescape(re.sub(r"<[^>]+>", "", found[1]))


def test_a_model_without_builds_says_so(client) -> None:
    page = _get(client, "/channels?model=org/no-builds")
    assert "no published build of this model in the farm index" in page


def test_the_confirmation_of_a_slower_build_shows_the_regression_and_the_gate(client, seeded) -> None:
    keys = seeded[1]
    query = {"action": "promote", "model": MODEL, "profile": "cpu", "channel": "stable", "build": keys.slow}
    page = _get(client, f"/release?{urlencode(query)}")
    rows = [(css, html.unescape(t)) for css, t in re.findall(r'<tr class="(regression|figure)"><td>([^<]+)</td>', page)]
    assert ("regression", "per output token, at the target's batch size") in rows
    assert ("figure", "time to first token, short prompt") in rows
    verdict = _text(page, "verdict")
    assert verdict.startswith("verdict: regression · ") and "+25.0 %" in verdict
    gate = _text(page, "gate")
    assert "will be refused unless a reason for accepting it is given" in gate
    comparison = _text(page, "comparison")
    assert "what stable serves now" in comparison and keys.fast[:12] in comparison
    assert "numerics: 1 prompt(s), tokens agree 100%, max logit diff 0" in comparison


def test_the_confirmation_of_an_ungated_channel_shows_the_comparison_without_the_gate(client, seeded) -> None:
    keys = seeded[1]
    query = {"action": "promote", "model": MODEL, "profile": "cpu", "channel": "candidate", "build": keys.fast}
    page = _get(client, f"/release?{urlencode(query)}")
    assert _text(page, "verdict").startswith("verdict: no regression · ")  # faster than what candidate serves
    assert 'id="gate"' not in page and "candidate is not gated" in page


def test_a_comparison_that_cannot_be_made_says_why(client, seeded) -> None:
    keys = seeded[1]
    query = {"action": "promote", "model": MODEL, "profile": "cpu", "channel": "stable", "build": keys.synthetic}
    page = _get(client, f"/release?{urlencode(query)}")
    verdict = _text(page, "verdict")
    assert verdict.startswith("verdict: not comparable · ") and "one measurement is synthetic" in verdict
    assert 'id="comparison-table"' not in page and 'id="gate"' not in page


def test_a_promotion_to_a_new_channel_has_nothing_to_compare_with(client, seeded) -> None:
    keys = seeded[1]
    query = {"action": "promote", "model": MODEL, "profile": "cpu", "channel": "beta", "build": keys.fast}
    page = _get(client, f"/release?{urlencode(query)}")
    assert _text(page, "verdict") == (
        "verdict: not compared · the channel points to no build yet: nothing to compare with"
    )
    assert "beta is not gated" in page and 'id="comparison-table"' not in page
