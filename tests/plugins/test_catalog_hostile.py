"""The catalog treats its store as hostile: a store whose records carry markup, quotes, `javascript:`
URLs, `</script>`, template syntax, bidirectional and zero-width characters and 100 KB strings in
every field the pages show — seeded through the pipeline's own writers (`stages.publish.publish`
over a staged payload, `farm_index.record_failure`, `leases.try_acquire` + `farm_index.announce`,
the lmi profile's `render_properties` for a launch file) — is rendered by the real api-server, in
headless Chromium with the real `_token` cookie, without anything of it executing: no dialog, no
`window.__pwned`, no `on*` attribute, `<script>` or `javascript:` link made from the data, no
Content-Security-Policy violation of a script directive; every hostile string is on the page as
text (escaped, not dropped), `{{7*7}}` literally; and the JSON API returns each string exactly.

Where a writer refuses a hostile value (a target's instance type, its profile), the test asserts
the refusal; what only a compromised writer could put in the store (a manifest's outputs, a launch
file's name, a farm-index record with a forged target, instance, profile and numbers) is forged
with the store's own writing calls and says so.
"""

from __future__ import annotations

import hashlib
import json
import time
from pathlib import Path
from types import SimpleNamespace
from urllib.parse import quote, urlencode

import pytest

from neuronforge.artifacts import farm_index, layout, leases
from neuronforge.artifacts.failures import MAX_MESSAGE
from neuronforge.artifacts.localcache import file_entries, publish_tree
from neuronforge.common.errors import InvalidInput
from neuronforge.common.hosts import StageRun, host_report
from neuronforge.pipeline.stages.publish import PublishInput, publish
from neuronforge.profiles.lmi_neuronx import PROFILE as LMI
from neuronforge.profiles.lmi_neuronx import PROPERTIES_FILE, render_properties
from neuronforge.profiles.request import CompileRequest, cache_key
from neuronforge.records.artifact_manifest import ArtifactManifest
from neuronforge.records.farm_index import LogRecord
from neuronforge.records.index_entry import IndexEntry
from neuronforge.records.payload_manifest import PayloadManifest
from neuronforge.records.smoke import SmokeRecord
from neuronforge.spec.source import ModelSource
from neuronforge.spec.target import TargetSpec
from neuronforge.spec.toolchain import Toolchain
from neuronforge.stores import open_store
from tests.conftest import TARGET
from tests.plugins.conftest import NEEDS_CHROMIUM

SCRIPT = "<script>window.__pwned=1</script>"
IMG = '"><img src=x onerror="window.__pwned=1">'
ATTR = "'onmouseover='window.__pwned=1"
SVG = "</textarea></pre><svg onload=window.__pwned=1>"
JS = "javascript:window.__pwned=1"
TEMPLATE = "tpl{{7*7}}end"  # Jinja2 / Angular: rendered, it would read tpl49end
DOLLAR = "tpl${7*7}end"  # JS template literal / shell
UNICODE = "rtl\u202egnp.exe\u200b\u200d\ufeffzw\u2066x\u2069"  # RTL override, zero-width, isolates
LONG = "L" * 100_000 + SCRIPT  # 100 KB, the payload at its end
PAYLOADS = {
    "script": SCRIPT,
    "img": IMG,
    "attr": ATTR,
    "svg": SVG,
    "js": JS,
    "template": TEMPLATE,
    "dollar": DOLLAR,
    "unicode": UNICODE,
    "long": LONG,
}
SHORT = {k: v for k, v in PAYLOADS.items() if k != "long"}  # those that fit a query string
OPTION = "</script><script>window.__pwned=1</script>"  # a profile option (lmi's rolling_batch)
FORGED_KEY = JS + IMG  # a farm-index record's key, forged (the writers key by sha256)


def _key(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


# -- what the pipeline's writers do with hostile values ---------------------------------------------
@pytest.mark.parametrize("field", ["instance_type", "profile"])
@pytest.mark.parametrize("payload", list(SHORT.values()), ids=list(SHORT))
def test_a_target_refuses_hostile_fields(field: str, payload: str) -> None:
    """A target's slug, instance and profile come from validated fields: no writer can put markup
    in them (only a forged record can: the seeded store has one)."""
    with pytest.raises(InvalidInput, match=rf"target\.{field}"):
        TargetSpec.parse({**TARGET, field: payload})


# -- the store -----------------------------------------------------------------------------------------
def _publish_hostile(store, tmp: Path) -> tuple[str, dict[str, str]]:
    """One lmi-neuronx artifact published by `stages.publish.publish` from a staged payload of small
    fake files (no compile): hostile model location, revision, profile option, toolchain version,
    run id, stage name and launch files. Returns its key and its launch files' texts."""
    option = {"rolling_batch": OPTION}  # what the profile's planner refuses, its renderer writes as given
    target = TargetSpec.parse({**TARGET, "profile": LMI.ref, "backend_options": option})
    # A local folder may be named anything; the revision is what the resolve stage recorded (a
    # store path component: no `/`).
    source = ModelSource("local", f"/srv/models/{SVG}{TEMPLATE}", resolved_revision=f"{IMG}{DOLLAR}")
    request = CompileRequest(source, target, LMI)
    # What a worker detected (a compromised one reports anything).
    toolchain = Toolchain(LMI.backend.name, ATTR, "neuronxcc", f"{JS}{UNICODE}")
    key = cache_key(request, toolchain)
    payload = tmp / "payload"
    (payload / "split" / "model").mkdir(parents=True)
    (payload / "split" / "model" / "config.json").write_text('{"model_type": "llama"}\n')
    (payload / "launch").mkdir()
    # serving.properties as the profile renders it: option.rolling_batch is the hostile option,
    # option.model_id a `javascript:` URL.
    props = render_properties(target, None, JS, None, "llama")
    launch = {
        PROPERTIES_FILE: "".join(f"{k}={v}\n" for k, v in props.items()) + f"# {SVG}\n# {TEMPLATE} {DOLLAR}\n",
        # Forged (a profile names its launch files itself): a hostile file name, and content of
        # every payload but the 100 KB one (a launch file over 64 KB is linked, not inlined).
        f"{ATTR}.env": "\n".join(SHORT.values()) + "\n",
    }
    for name, text in launch.items():
        (payload / "launch" / name).write_text(text)
    staged = PayloadManifest(files=file_entries(payload))
    build = publish_tree(
        store, payload, layout.build_prefix(key, hashlib.sha256(staged.to_bytes()).hexdigest()), staged
    )
    runs = [StageRun(stage=SVG, seconds=1.5, host="cpu"), StageRun(stage=SCRIPT, seconds=2, host="neuron")]
    hosts = host_report(runs)
    smoke = {"passed": True, "reason": SCRIPT, "time_to_first_token_s": 0.012, "per_token_s": 0.003}
    # Forged outputs (a profile's `assemble` names them): a hostile name, and `javascript:` targets.
    formats = {"split": "split/model", "launch": "launch", IMG: JS, SCRIPT: "javascript://x/%0awindow.__pwned=1"}
    publish(
        PublishInput(
            request,
            toolchain,
            key,
            build,
            SmokeRecord.model_validate(smoke),
            {"formats": formats},
            run_id=SCRIPT + ATTR,
            hosts=hosts,
        ),
        store,
    )
    return key, launch


# The farm index's own record of a published artifact, forged as a compromised writer could append
# it: the target, instance and profile the validated writers cannot produce, and numbers that are
# strings.
FORGED = {
    "kind": "published",
    "key": FORGED_KEY,
    "model": f"forged {TEMPLATE}",
    "profile": ATTR,
    "target": SVG,
    "instance": IMG,
    "published": {
        "revision": DOLLAR,
        "compiler_version": UNICODE,
        "size_bytes": SCRIPT,
        "ttft_ms": SCRIPT,
        "per_token_ms": JS,
        "at": SVG,
        "run_id": JS,
        "prefix": f"artifacts/{JS}",
        "manifest": f"artifacts/{JS}/manifest.json",
        "formats": {IMG: JS},
        "launch": [SCRIPT],
    },
}


@pytest.fixture(scope="module")
def hostile(tmp_path_factory: pytest.TempPathFactory) -> SimpleNamespace:
    """The hostile store and what was seeded in it."""
    root = tmp_path_factory.mktemp("hostile") / "store"
    store = open_store(f"file://{root}")
    published, launch = _publish_hostile(store, tmp_path_factory.mktemp("hostile-payload"))
    failures = {}
    for i, (name, payload) in enumerate(PAYLOADS.items()):
        state = SimpleNamespace(model=payload, target=TargetSpec.parse({**TARGET, "sequence_length": 32 + i}))
        stage = "smoke" if i % 2 else payload  # a stage name is the pipeline's; a hostile one renders too
        failures[name] = farm_index.record_failure(
            store, _key(f"failure {name}"), stage, RuntimeError(payload), f"manual__{payload}", state
        )
    lease = leases.try_acquire(store, _key("building"), f"{IMG}:42", ttl_s=3600)
    assert lease is not None
    building = SimpleNamespace(model=SCRIPT + UNICODE, target=TargetSpec.parse({**TARGET, "sequence_length": 60}))
    farm_index.announce(store, lease, building)
    farm_index.append(store, [LogRecord.model_validate(FORGED)])
    mistyped, broken = _forge_manifests(store, published)
    return SimpleNamespace(
        root=root,
        store=store,
        published=published,
        launch=launch,
        failures=failures,
        building=lease.key,
        mistyped=mistyped,
        broken=broken,
    )


def _forge_manifests(store, published: str) -> tuple[str, str]:
    """Two copies of the published artifact's manifest, forged with the store's own writing calls as
    a compromised writer could: one of the wrong types where `publish` writes numbers, objects and
    text (announced in the farm index as `publish` does), one whose files' sizes are text (no
    reader may take it for an artifact). Returns their keys."""
    index = store.read_json(layout.index_entry(published))
    original = store.read_json(index["manifest"])
    keys = []
    for name, changes in (
        (
            "mistyped",
            {
                "hosts": {"stages": [{"stage": SVG, "seconds": SCRIPT, "host": IMG}], "cpu_seconds": SCRIPT},
                "formats": [IMG],
                "smoke": SCRIPT,
                "run_id": {"run": SCRIPT},
                "published_at": 7,
            },
        ),
        ("broken", {"files": [{**f, "size": SCRIPT} for f in original["files"]]}),
    ):
        key = _key(f"forged manifest {name}")
        prefix = f"{index['prefix'].rsplit('/', 1)[0]}/{key[:12]}"
        store.copy_objects(index["prefix"], prefix, [f["path"] for f in original["files"]])
        manifest = {**original, "cache_key": key, **changes}
        store.write_json(f"{prefix}/{layout.ARTIFACT_MANIFEST}", manifest)
        pointer = {**index, "cache_key": key, "manifest": f"{prefix}/{layout.ARTIFACT_MANIFEST}", "prefix": prefix}
        store.put_if_absent(json.dumps(pointer).encode(), layout.index_entry(key))
        if name == "mistyped":
            farm_index.note_published(store, IndexEntry.from_json(pointer), ArtifactManifest.from_json(manifest))
        keys.append(key)
    return keys[0], keys[1]


@pytest.fixture(scope="module")
def seeded_store(hostile: SimpleNamespace) -> Path:
    """The api-server of tests/plugins/conftest.py serves the hostile store."""
    return hostile.root


def test_the_writers_keep_hostile_strings_and_bound_messages(hostile: SimpleNamespace) -> None:
    """Free-text fields are stored as given (the pages must escape them); a failure's message is
    cut at MAX_MESSAGE characters, so a 100 KB error never reaches a page whole."""
    long = hostile.failures["long"]
    assert long.model == LONG and long.run_id == f"manual__{LONG}"
    assert len(long.error) == MAX_MESSAGE and long.error.endswith("…")
    assert hostile.failures["svg"].error == f"RuntimeError: {SVG}"


# -- the pages in the browser ----------------------------------------------------------------------------
WATCH = """
window.__dialogs = [];
window.__violations = [];
document.addEventListener('securitypolicyviolation', e => window.__violations.push({
  directive: e.effectiveDirective, blocked: e.blockedURI, sample: e.sample, source: e.sourceFile, line: e.lineNumber}));
"""
# What injected markup would have made: event-handler attributes, `javascript:` URLs in attributes
# a browser follows, scripts carrying the payload; and whether the payload ran.
INSPECT = """() => {
  const made = [];
  const urls = ['href', 'src', 'action', 'formaction', 'xlink:href', 'data', 'srcdoc', 'poster', 'background'];
  for (const el of document.querySelectorAll('*')) {
    for (const a of el.attributes) {
      const name = a.name.toLowerCase();
      const value = a.value.replace(/[\\u0000-\\u0020]/g, '').toLowerCase();
      const what = `${el.tagName} ${a.name}=${a.value.slice(0, 60)}`;
      if (name.startsWith('on') || (urls.includes(name) && value.startsWith('javascript:'))) made.push(what);
    }
    if (el.tagName === 'SCRIPT' && el.textContent.includes('__pwned')) made.push(el.outerHTML.slice(0, 80));
  }
  return {made, pwned: typeof window.__pwned, violations: window.__violations || []};
}"""


@pytest.fixture(scope="module")
def context(browser, server, token: str):
    """A browser context holding the api-server's real `_token` cookie (what the UI's login sets)."""
    base, _ = server
    context = browser.new_context(base_url=base)
    context.add_cookies([{"name": "_token", "value": token, "url": base}])
    context.add_init_script(WATCH)
    yield context
    context.close()


@pytest.fixture(scope="module")
def tab(context):
    page = context.new_page()
    dialogs: list[str] = []

    def dismiss(dialog) -> None:
        dialogs.append(f"{dialog.type}: {dialog.message}")
        dialog.dismiss()

    page.on("dialog", dismiss)
    page.dialogs = dialogs
    return page


def _visit(tab, path: str, statuses: tuple[int, ...] = (200,)) -> str:
    """Open `path`, assert nothing of the data executed, and return the page's visible text."""
    response = tab.goto(path)
    assert response is not None and response.status in statuses, (path[:200], response and response.status)
    tab.wait_for_load_state("load")
    time.sleep(0.05)  # an `onerror` of a broken image fires after load
    found = tab.evaluate(INSPECT)
    assert tab.dialogs == [], (path[:200], tab.dialogs)
    assert found["pwned"] == "undefined", path[:200]
    assert found["made"] == [], (path[:200], found["made"])
    # With a CSP (i29-templates adds one), injected script would be blocked but reported here.
    scripts = [v for v in found["violations"] if v["directive"].startswith(("script-src", "default-src"))]
    assert scripts == [], (path[:200], scripts)
    assert not any("pwned" in json.dumps(v) for v in found["violations"]), found["violations"]
    return tab.inner_text("body")


def _shown(text: str, *expected: str) -> None:
    for s in expected:
        assert s in text, (s[:80], text[:500])
    assert "tpl49end" not in text  # {{7*7}} / ${7*7} evaluated by a template


@NEEDS_CHROMIUM
def test_the_catalog_page_shows_hostile_data_as_text(tab, hostile: SimpleNamespace) -> None:
    from neuronforge.spec.source import model_ref

    _shown(_visit(tab, "/neuronforge/"), SCRIPT)  # the default page
    text = _visit(tab, "/neuronforge/?per_page=500")
    _shown(text, *PAYLOADS.values(), SCRIPT + UNICODE, f"/srv/models/{SVG}{TEMPLATE}", SVG, IMG, ATTR)
    # each row's cells hold exactly what the store says: model, profile, target; status and message
    rows = {
        cells[1]: cells
        for cells in tab.eval_on_selector_all("#rows tr.row", "rs => rs.map(r => [...r.cells].map(c => c.innerText))")
    }
    for f in hostile.failures.values():
        assert f.error.removesuffix("…") in rows[f.model][4]
    # the forged record's profile and target, in the row of its model as every listing names a build of it
    assert rows[model_ref(FORGED["model"], FORGED["published"]["revision"])][2:4] == [ATTR, SVG]
    assert IMG in tab.eval_on_selector_all("#filter-instance option", "os => os.map(o => o.value)")  # its instance
    # each artifact link leads into the catalog, whatever the key says, and each model's channels
    # link, whatever the model is called; each opens a page, or a 400 (not a key, not a model) or a
    # 404 (no such artifact)
    base = tab.url.split("/neuronforge/")[0]
    hrefs = set(tab.eval_on_selector_all("#rows a, #matrix a", "as => as.map(a => a.href)"))
    artifacts = {h for h in hrefs if h.startswith(f"{base}/neuronforge/artifacts/")}
    assert len(artifacts) == len(hostile.failures) + 4  # + the published artifact, the build, 2 forged ones
    assert all(h.startswith(f"{base}/neuronforge/channels?model=") for h in hrefs - artifacts), hrefs - artifacts
    for href in sorted(hrefs):
        _visit(tab, href.removeprefix(base), (200, 400, 404))


@NEEDS_CHROMIUM
def test_the_watch_sees_what_a_csp_blocks(context, server) -> None:
    """The check of every page can fail: under a CSP, an injected handler is blocked and reported."""
    base, _ = server
    page = context.new_page()
    probe = f"{base}/neuronforge/csp-probe"
    page.route(
        probe,
        lambda route: route.fulfill(
            status=200,
            headers={"Content-Type": "text/html", "Content-Security-Policy": "script-src 'self'"},
            body=f"<p>{IMG}</p>",
        ),
    )
    page.goto(probe)
    page.wait_for_function("() => window.__violations.length > 0", timeout=5000)
    found = page.evaluate(INSPECT)
    assert found["pwned"] == "undefined" and found["made"] == ["IMG onerror=window.__pwned=1"]
    assert found["violations"][0]["directive"].startswith("script-src")
    page.close()


@NEEDS_CHROMIUM
@pytest.mark.parametrize("name", ["model", "profile", "instance", "status"])
def test_a_hostile_filter_value_is_shown_as_text(tab, name: str) -> None:
    for label, payload in SHORT.items():
        statuses = (400,) if name == "status" else (200,)
        text = _visit(tab, f"/neuronforge/?{urlencode({name: payload})}", statuses)
        if name == "model":  # the filter field keeps the value; the failure of that model matches
            assert tab.input_value("#filters input[name=model]") == payload, label
            assert payload in text, label
        if name == "status":
            assert tab.query_selector("#error") is not None, label
    for name in ("page", "per_page"):
        _visit(tab, f"/neuronforge/?{urlencode({name: SVG})}", (400,))


@NEEDS_CHROMIUM
def test_each_artifact_page_shows_hostile_data_as_text(tab, hostile: SimpleNamespace) -> None:
    text = _visit(tab, f"/neuronforge/artifacts/{hostile.published}")
    _shown(
        text,
        f"/srv/models/{SVG}{TEMPLATE}",  # model
        f"{JS}{UNICODE}",  # compiler version
        SCRIPT + ATTR,  # run id
        SVG,  # a stage name (hosts line)
        IMG,  # an output's name
        f"option.rolling_batch={OPTION}",  # the profile option, in serving.properties
        *SHORT.values(),  # the launch file of every payload
        f"{ATTR}.env",  # its name
    )
    snippets = tab.eval_on_selector_all("pre.snippet", "ps => ps.map(p => p.textContent)")
    assert sorted(snippets) == sorted(hostile.launch.values())  # each file whole, in its own block
    copies = tab.eval_on_selector_all("button.copy", "bs => bs.map(b => b.dataset.copy)")
    assert set(hostile.launch.values()) <= set(copies)  # the copy buttons carry the exact text
    run = tab.get_attribute(".detail a[target=_top]", "href")
    assert run.startswith("/dags/neuronforge_compile_publish/runs/")
    for name, failure in hostile.failures.items():
        text = _visit(tab, f"/neuronforge/artifacts/{failure.key}")
        _shown(text, failure.model, failure.run_id, failure.error.removesuffix("…"))
        assert name == "long" or failure.stage in text
    _shown(_visit(tab, f"/neuronforge/artifacts/{hostile.building}"), IMG)
    # a forged manifest of the wrong types is shown without what it mistyped; one whose files are
    # not path/size/sha256 entries is no artifact: its page says damaged, with why (not a 500)
    _shown(_visit(tab, f"/neuronforge/artifacts/{hostile.mistyped}"), f"/srv/models/{SVG}{TEMPLATE}", SCRIPT)
    _shown(_visit(tab, f"/neuronforge/artifacts/{hostile.broken}"), "damaged", "files.0.size")
    for payload in SHORT.values():  # a hostile key: one sentence, the key as text (400: not a key)
        text = _visit(tab, f"/neuronforge/artifacts/{quote(payload, safe='')}", (400, 404))
        if "/" in payload:  # %2F is a `/` to the router: no such route (the error page's 404)
            assert "Not Found" in text, text
        else:
            error = tab.inner_text("#error")  # the key as Python shows it: invisible characters escaped
            assert any(shown in error for shown in (payload, repr(payload), json.dumps(payload)[:80])), error


def _json(context, path: str):
    response = context.request.get(path)
    assert response.status == 200, (path[:200], response.status)
    assert response.headers["content-type"] == "application/json", response.headers
    return response.json()


@NEEDS_CHROMIUM
def test_the_json_api_returns_hostile_strings_exactly(tab, context, hostile: SimpleNamespace) -> None:
    rows = {r["key"]: r for r in _json(context, "/neuronforge/api/artifacts?limit=1000")["rows"]}
    for f in hostile.failures.values():
        row = rows[f.key]
        assert [row["model"], row["message"], row["run_id"], row["stage"]] == [f.model, f.error, f.run_id, f.stage]
    forged = rows[FORGED_KEY]
    assert (forged["model"], forged["profile"], forged["target"], forged["instance"]) == (
        FORGED["model"],
        ATTR,
        SVG,
        IMG,
    )
    assert (forged["revision"], forged["run_id"], forged["at"]) == (DOLLAR, JS, SVG)
    one = _json(context, f"/neuronforge/api/artifacts/{hostile.published}")
    manifest = hostile.store.read_json(one["manifest_uri"].removeprefix(hostile.store.root_uri).strip("/"))
    assert one["manifest"] == manifest  # the whole manifest, every string as written
    assert manifest["run_id"] == SCRIPT + ATTR and manifest["source"]["revision"] == f"{IMG}{DOLLAR}"
    assert manifest["request"]["backend_options"]["rolling_batch"].startswith("</script>")
    assert one["snippets"] == hostile.launch and one["model"] == f"/srv/models/{SVG}{TEMPLATE}"
    for payload in SHORT.values():  # a filter finds the row of that model, and says so exactly
        found = _json(context, f"/neuronforge/api/artifacts?{urlencode({'model': payload})}")["rows"]
        assert any(r["model"] == payload for r in found), payload
    assert _json(context, f"/neuronforge/api/artifacts/{hostile.mistyped}")["manifest"]["smoke"] == SCRIPT
    broken = _json(context, f"/neuronforge/api/artifacts/{hostile.broken}")  # damaged, with why
    assert broken["status"] == "damaged" and "files.0.size" in broken["message"] and broken["manifest"] is None
    # the JSON as the browser shows it runs nothing either
    _visit(tab, "/neuronforge/api/artifacts?limit=1000")
    _visit(tab, f"/neuronforge/api/artifacts/{hostile.published}")
