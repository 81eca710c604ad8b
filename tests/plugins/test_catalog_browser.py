"""The Airflow UI in headless Chromium (Debian's /usr/bin/chromium driven by playwright), against the
real api-server of tests/plugins/conftest.py: a person logs in, opens "Artifact catalog" from the
navigation, reads the matrix, filters it, opens an artifact's page and copies a URI, and triggers the
compile DAG from its form without writing JSON; and the page as a person reads it: distinct labels for
targets that differ in one field, nothing overflowing its box, a latency plot still readable with a
10x outlier. Screenshots go to `test-artifacts/ui/` (NEURONFORGE_TEST_ARTIFACTS names another folder)."""

from __future__ import annotations

import contextlib
import hashlib
import itertools
import json
import math
import shutil
from pathlib import Path

import pytest

from neuronforge.artifacts import farm_index, layout
from neuronforge.records.artifact_manifest import ArtifactManifest
from neuronforge.records.index_entry import IndexEntry
from neuronforge.spec.target import TargetSpec
from neuronforge.stores import open_store
from tests.conftest import TARGET, Compiled
from tests.plugins.conftest import NEEDS_CHROMIUM

pytestmark = NEEDS_CHROMIUM


# Two more builds of the published target, differing from it only in max_context_length; one of them
# ten times slower to its first token.
VARIANTS = {16: 1.2, 48: 10.0}


@pytest.fixture(scope="module")
def seeded_store(shared_seeded_store: Path, compiled: Compiled, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of the plugin tests' store (others share the original), plus the published artifact
    copied as two builds of targets that differ from it only in `max_context_length`, published as
    `stages.publish` does (payload, manifest last, index pointer, farm-index record)."""
    seeded_store = tmp_path_factory.mktemp("catalog-browser") / "store"
    shutil.copytree(shared_seeded_store, seeded_store)
    store = open_store(f"file://{seeded_store}")
    first = compiled.first.published
    for ctx, slower in VARIANTS.items():
        spec = TargetSpec.parse({**TARGET, "max_context_length": ctx})
        key = hashlib.sha256(f"max_context_length={ctx}".encode()).hexdigest()
        prefix = f"{first.prefix.rsplit('/', 2)[0]}/{spec.slug}/{key[:12]}"
        shutil.copytree(seeded_store / first.prefix, seeded_store / prefix)
        manifest = first.manifest.to_json()
        manifest["cache_key"], manifest["target_slug"] = key, spec.slug
        manifest["request"]["target"]["max_context_length"] = ctx
        manifest["smoke"]["time_to_first_token_s"] *= slower
        store.write_json(f"{prefix}/{layout.ARTIFACT_MANIFEST}", manifest)
        index = {"schema_version": 1, "cache_key": key, "manifest": f"{prefix}/manifest.json", "prefix": prefix}
        store.put_if_absent(json.dumps(index).encode(), layout.index_entry(key))
        farm_index.note_published(store, IndexEntry.from_json(index), ArtifactManifest.from_json(manifest))
    return seeded_store


# Every box of the page's matrix, rows, plot and artifact detail that is narrower than its content
# (a code block `pre` scrolls by design), and the page itself if it is wider than the window.
OVERFLOWING = """() => {
  const out = [];
  for (const el of document.querySelectorAll('#matrix *, #rows *, #latency-plot *, .detail *, #matrix, #rows')) {
    if (el.closest('pre') || el.clientWidth === 0) continue;
    if (el.scrollWidth > el.clientWidth + 1) out.push(`${el.tagName}.${el.className}: ${el.textContent.slice(0, 80)}`);
  }
  const root = document.documentElement;
  if (root.scrollWidth > root.clientWidth + 1) out.push(`the page: ${root.scrollWidth} > ${root.clientWidth}`);
  return out;
}"""
# Pairs of axis labels of the latency plot that run into each other.
OVERLAPPING_TICKS = """() => {
  const out = [];
  for (const axis of document.querySelectorAll('#latency-plot .axis')) {
    const boxes = [...axis.querySelectorAll('text')].map(s => [s.textContent, s.getBoundingClientRect()]);
    for (let i = 1; i < boxes.length; i++)
      if (boxes[i][1].left < boxes[i - 1][1].right) out.push(`${boxes[i - 1][0]} / ${boxes[i][0]}`);
  }
  return out;
}"""


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
    assert page.csp_violations == []


@pytest.mark.parametrize("width", [1280, 900])
def test_the_catalog_as_a_person_reads_it(page, server, compiled: Compiled, shots: Path, width: int) -> None:
    """Targets that differ only in max_context_length have different labels everywhere; no box
    overflows; the plot shows both latencies, and its bars stay readable beside a 10x outlier."""
    base, _ = server
    page.set_viewport_size({"width": width, "height": 900})
    frame = _catalog(page, base)
    heads = [h.inner_text() for h in frame.query_selector_all("#matrix th.target")]
    assert len(heads) == len(set(heads)) == 6, heads  # 4 seeded targets + 2 variants, each its own column
    for ctx in (32, *VARIANTS):  # the published target and its two variants: one column each
        assert sum(h.endswith(f"s64-fp32-ctx{ctx}") for h in heads) == (2 if ctx == 32 else 1), heads  # +stale
    labels = [t.inner_text() for t in frame.query_selector_all("#latency-plot td.label")]
    assert len(labels) == len(set(labels)) == 4, labels  # the three published builds and the stale one
    assert frame.query_selector_all("#latency-plot .bar.ttft") and len(
        frame.query_selector_all("#latency-plot .bar.ttft")
    ) == len(frame.query_selector_all("#latency-plot .bar.per-token"))
    text = frame.inner_text("#latency-plot")
    assert "time to first token" in text and "per output token" in text and "log scale" in text
    # A log scale: every bar visible (>= 4% of its track), and equal latency ratios give equal width
    # differences — the 10x outlier is one decade further, not ten times longer. (Which bar is the
    # smallest depends on where this machine's smoke latencies fall between decades: not asserted.)
    bars = [
        (b.bounding_box()["width"] / b.evaluate("e => e.parentElement.getBoundingClientRect().width"), float(ms))
        for b in frame.query_selector_all("#latency-plot .bar.ttft")
        if (ms := b.get_attribute("data-ms"))
    ]
    assert len(bars) == 4 and min(w for w, _ in bars) >= 0.035, bars
    slopes = [
        (wa - wb) / math.log10(ma / mb)
        for (wa, ma), (wb, mb) in itertools.combinations(bars, 2)
        if abs(math.log10(ma / mb)) > 0.3
    ]
    assert slopes and max(slopes) / min(slopes) < 1.1, (bars, slopes)  # linear widths: far from constant
    assert frame.query_selector_all("#latency-plot .axis text")  # the ticks checked next exist
    assert frame.evaluate(OVERFLOWING) == [] and frame.evaluate(OVERLAPPING_TICKS) == []
    # the style sheet applied (it is a file behind the login: the bars have their colour)
    assert frame.eval_on_selector("#latency-plot .bar.ttft", "e => getComputedStyle(e).fill") == "rgb(96, 165, 250)"
    page.screenshot(path=str(shots / f"catalog-{width}px.png"), full_page=True)
    # each variant's own page says which target it is, and its URIs wrap inside the page
    frame.click("#matrix td[data-status=published] a >> nth=-1")
    frame.wait_for_selector(".detail h2", timeout=30000)
    heading = frame.inner_text(".detail h2")
    assert heading.endswith("-s64-fp32-ctx48") and compiled.checkpoint.name in heading
    assert "time to first token" in frame.inner_text(".detail .latency")
    assert frame.evaluate(OVERFLOWING) == []
    page.screenshot(path=str(shots / f"catalog-artifact-{width}px.png"), full_page=True)


def test_copying_a_uri(page, server, compiled: Compiled, shots: Path) -> None:
    base, _ = server
    frame = _catalog(page, base)
    # the published cell opens that artifact's own page, inside the same frame
    frame.click(f"td[data-status=published] a[href$='{compiled.first.key}']")
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
    assert frame.evaluate("navigator.clipboard.readText()") == expected  # the script file ran
    assert page.csp_violations == []


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
    """Opens the DAG's trigger dialog. On a loaded machine the first click can land while the page
    is still hydrating and open nothing, so a page that opened no dialog is loaded again (twice at most);
    the dialog's own behaviour is what the tests assert, not how fast the SPA boots."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    for _ in range(2):
        with contextlib.suppress(PlaywrightTimeout):
            return _open_trigger_dialog(page)
    return _open_trigger_dialog(page)  # the third try's timeout is the test's failure


def _open_trigger_dialog(page):
    page.goto("/dags/neuronforge_compile_publish", wait_until="networkidle")
    page.get_by_role("button", name="Trigger").first.click(timeout=20000)
    dialog = page.locator("[role=dialog][data-state=open]")
    dialog.get_by_text("Run Parameters").wait_for(timeout=20000)
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


@pytest.mark.parametrize("typed", ["0", "300"])
def test_a_number_out_of_range_is_refused_not_clamped(page, server, token: str, shots: Path, typed: str) -> None:
    """The browser used to clamp a number field to the schema's range (0 sent as 1, 300 as 128)
    while showing what was typed: now the value typed is sent, and refused in one sentence."""
    base, _ = server
    before = len(_runs(base, token))
    dialog = _trigger_dialog(page)
    field = dialog.locator("input[name=element_tp_degree], #element_tp_degree input, input#element_tp_degree").first
    field.fill(typed)
    field.press("Tab")  # leave the field, as a person does before clicking Trigger
    assert field.input_value() == typed
    page.screenshot(path=str(shots / f"trigger-tp-{typed}-typed.png"), full_page=True)
    dialog.get_by_role("button", name="Trigger").last.click()
    sentence = f"neuronforge_compile_publish: tp_degree = {typed} is not allowed; use a whole number from 1 to 128."
    error = dialog.get_by_text(sentence)
    error.wait_for(timeout=30000)
    assert field.input_value() == typed
    error.scroll_into_view_if_needed()
    page.screenshot(path=str(shots / f"trigger-tp-{typed}.png"), full_page=True)
    assert len(_runs(base, token)) == before


def test_a_refusal_is_in_sight_where_trigger_was_clicked(page, server, token: str, shots: Path) -> None:
    """At 1400x900 the form is taller than the window: Trigger is at the dialog's bottom, and the
    refusal, which the UI draws at the dialog's top, must be on screen (and on top) once it is clicked.
    Airflow's own toast only says "Bad Request"."""
    base, _ = server
    page.set_viewport_size({"width": 1400, "height": 900})
    dialog = _trigger_dialog(page)
    field = dialog.locator("input[name=element_tp_degree], #element_tp_degree input, input#element_tp_degree").first
    field.fill("0")
    field.press("Tab")
    trigger = dialog.get_by_role("button", name="Trigger").last
    assert trigger.bounding_box()["y"] > 900  # below the window: the click scrolls the dialog to it
    trigger.click()
    sentence = "neuronforge_compile_publish: tp_degree = 0 is not allowed; use a whole number from 1 to 128."
    error = dialog.get_by_text(sentence)
    error.wait_for(timeout=30000)
    page.wait_for_timeout(500)  # the dialog settles (React re-renders with the alert)
    box = error.bounding_box()
    assert box is not None and box["y"] >= 0 and box["y"] + box["height"] <= 900, box
    assert box["x"] >= 0 and box["x"] + box["width"] <= 1400, box
    # on top of the fields it floats over, not under them: what is drawn at its centre is the alert
    centre = (box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
    shown = page.evaluate("([x, y]) => document.elementFromPoint(x, y)?.textContent ?? ''", list(centre))
    assert sentence in shown, shown
    page.screenshot(path=str(shots / "trigger-refusal-in-sight.png"))  # the window, as the user sees it
    # the rule comes from the plugin's theme, as the api-server hands it to every page
    from tests.plugins.conftest import http_get

    status, body = http_get(f"{base}/ui/config", token)
    assert status == 200 and "[data-testid=error-alert]" in json.dumps(json.loads(body)["theme"]["globalCss"])


# -- the look: the Airflow UI's theme, light and dark ----------------------------------------------------
# A colour as sRGB bytes, whatever notation the browser computes it in (oklch stays oklch): painted.
RGB = """(color) => {
  const c = document.createElement('canvas').getContext('2d');
  c.fillStyle = color; c.fillRect(0, 0, 1, 1);
  return [...c.getImageData(0, 0, 1, 1).data.slice(0, 3)];
}"""


def _luminance(rgb: list[int]) -> float:
    """WCAG's relative luminance of an sRGB colour."""
    lin = [c / 255 / 12.92 if c / 255 <= 0.04045 else ((c / 255 + 0.055) / 1.055) ** 2.4 for c in rgb]
    return 0.2126 * lin[0] + 0.7152 * lin[1] + 0.0722 * lin[2]


def _colours(frame) -> tuple[float, float]:
    """The luminance of the page's background and of its text."""
    bg, fg = frame.evaluate(
        "() => [getComputedStyle(document.body).backgroundColor, getComputedStyle(document.body).color]"
    )
    return _luminance(frame.evaluate(RGB, bg)), _luminance(frame.evaluate(RGB, fg))


@pytest.mark.parametrize("theme", ["light", "dark"])
def test_each_page_in_the_uis_theme(page, server, compiled: Compiled, shots: Path, theme: str) -> None:
    """Each page at 1400x900 as the UI shows it, in the UI's light and dark mode: the page takes the
    UI's mode and its colours (Chakra's variables, copied from the UI's document), the text readable on
    its background (WCAG contrast >= 7); a screenshot of each."""
    base, _ = server
    key = compiled.first.key
    page.set_viewport_size({"width": 1400, "height": 900})
    page.emulate_media(color_scheme=theme)  # the UI's mode is the system's unless the user chose one
    frame = _catalog(page, base)
    ui_bg = page.evaluate("() => getComputedStyle(document.documentElement).getPropertyValue('--chakra-colors-bg')")
    assert ui_bg.strip(), "the Airflow UI no longer has its background colour as --chakra-colors-bg"
    channels = frame.get_attribute("#matrix a.channels-link", "href")  # the seeded model's channels page
    for name, url, ready in (
        ("catalog", "/neuronforge/", "#matrix"),
        ("artifact", f"/neuronforge/artifacts/{key}", ".detail"),
        ("channels", channels, "#channels"),
        ("release", f"/neuronforge/release?action=approve&build={key}", "#change"),
        ("leases", "/neuronforge/leases", "#leases"),
    ):
        frame.goto(f"{base}{url}")
        frame.wait_for_selector(ready, timeout=30000)
        assert frame.evaluate("() => document.documentElement.classList.contains('dark')") == (theme == "dark"), name
        ours = frame.evaluate("() => getComputedStyle(document.documentElement).getPropertyValue('--nf-bg')")
        assert ours.strip() == ui_bg.strip(), (name, ours, ui_bg)  # the UI's own value, not our copy
        bg, fg = _colours(frame)
        assert (bg < 0.1) if theme == "dark" else (bg > 0.8), (name, bg)
        contrast = (max(bg, fg) + 0.05) / (min(bg, fg) + 0.05)
        assert contrast >= 7, (name, theme, contrast)
        page.screenshot(path=str(shots / f"theme-{theme}-{name}.png"))
    assert page.csp_violations == []


def test_the_page_follows_when_the_user_switches_the_uis_mode(page, server) -> None:
    base, _ = server
    page.emulate_media(color_scheme="light")
    frame = _catalog(page, base)
    assert frame.evaluate("() => document.documentElement.classList.contains('light')")
    light = _colours(frame)[0]
    page.evaluate(
        "() => { document.documentElement.classList.remove('light'); document.documentElement.classList.add('dark'); }"
    )
    frame.wait_for_function("() => document.documentElement.classList.contains('dark')")
    assert _colours(frame)[0] < 0.1 < light
