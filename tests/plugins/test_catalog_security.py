"""The catalog plugin treats the store and the request as hostile.

Against the real `airflow api-server` of tests/plugins/conftest.py: every route of the app
(enumerated from `app.routes`, so a new route is covered without editing this file) refuses a
missing, garbage, tampered or expired token, as a Bearer header and as the UI's `_token` cookie,
without showing anything of the store; with a valid token, every route answers with the
Content-Security-Policy and its own content type; path traversal in a route parameter is refused
and reads nothing outside the store. In this process: the templates escape a hostile string in
every slot and never render a `javascript:` link; a hostile manifest's launch-file names are not
read; errors carry no traceback, local path or credential.
"""

from __future__ import annotations

import base64
import html
import json
import re
import time
import urllib.error
import urllib.request
from pathlib import Path
from types import ModuleType, SimpleNamespace
from typing import Any

import pytest
from fastapi.routing import APIRoute
from markupsafe import escape

from neuronforge.farm.rows import FarmRow
from neuronforge.records.hosts import HostsReport
from neuronforge.stores import open_store
from tests.conftest import Compiled
from tests.plugins.conftest import REPO, STORE_READS, read_from, resigned

HOSTILE = "<script>alert(1)</script>\"'&javascript:alert(1)"
# What the seeded store holds and no refusal may show.
STORE_DATA = ("org/smoke-fails", "org/in-progress", "greedy tokens", "worker-1", "manual__7", "cpu@0")
CANARY = "canary-outside-the-store-7f3a"


def fetch(url: str, token: str | None = None, cookie: str | None = None) -> tuple[int, dict[str, str], str]:
    """(status, headers with lower-case names, body) of a GET, whatever the status."""
    request = urllib.request.Request(url)
    if token is not None:
        request.add_header("Authorization", f"Bearer {token}")
    if cookie is not None:
        request.add_header("Cookie", f"_token={cookie}")
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, {k.lower(): v for k, v in response.headers.items()}, response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, {k.lower(): v for k, v in exc.headers.items()}, exc.read().decode()


def _routes(plugin: ModuleType, compiled: Compiled) -> list[tuple[str, APIRoute]]:
    """Every route of the app as a URL with its path parameters filled with a plausible value
    (one that answers 200 with a valid token: a refusal below is the token's, not the value's)."""
    plausible = {"key": compiled.first.key[:12], "name": "catalog.css"}
    # the pages that take what they show as query parameters (a model, a release action)
    queries = {"/channels": "?model=builtin:tiny-llama", "/release": f"?action=approve&build={compiled.first.key}"}
    out = []
    for route in plugin.app.routes:
        assert isinstance(route, APIRoute), f"{route!r} is not an APIRoute: the app's get_user dependency skips it"
        assert "GET" in route.methods, route.path
        missing = set(route.param_convertors) - set(plausible)
        assert not missing, f"{route.path}: add a plausible value for {missing} to _routes"
        out.append((f"/neuronforge{route.path.format(**plausible)}{queries.get(route.path, '')}", route))
    assert len(out) >= 5  # the page, an artifact's page, the two JSON routes, the static files
    return out


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _flip(text: str, at: int) -> str:
    """`text` with the character at `at` replaced by another base64url character."""
    return text[:at] + ("A" if text[at] != "A" else "B") + text[at + 1 :]


def _bad_tokens(token: str, secret: str) -> dict[str, str | None]:
    head, payload, signature = token.split(".")
    claims = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    now = int(time.time())
    return {
        "none": None,
        "garbage": "not-a-jwt",
        "tampered signature": f"{head}.{payload}.{_flip(signature, len(signature) // 2)}",
        "tampered payload": f"{head}.{_flip(payload, len(payload) // 2)}.{signature}",
        # another user's name, the signature of the real one
        "forged claims": f"{head}.{_b64(json.dumps({**claims, 'sub': 'intruder'}).encode())}.{signature}",
        "expired": resigned(token, secret, iat=now - 7200, nbf=now - 7200, exp=now - 3600),
        "other secret": resigned(token, "not-the-api-servers-secret-" * 4),
    }


def test_the_signing_of_this_test_is_the_api_servers(server, token: str, jwt_secret: str) -> None:
    """The control of the expired token: the same claims re-signed with a future expiry are
    accepted, so the expired one is refused for its expiry alone."""
    base, _ = server
    fresh = resigned(token, jwt_secret, exp=int(time.time()) + 600)
    assert fetch(f"{base}/neuronforge/api/artifacts", token=fresh)[0] == 200
    assert fetch(f"{base}/neuronforge/api/artifacts", cookie=fresh)[0] == 200


@pytest.mark.parametrize("transport", ["bearer", "cookie"])
@pytest.mark.parametrize(
    "kind", ["none", "garbage", "tampered signature", "tampered payload", "forged claims", "expired", "other secret"]
)
def test_every_route_refuses_a_bad_token(
    server, token: str, jwt_secret: str, plugin: ModuleType, compiled: Compiled, seeded_store: Path, kind, transport
) -> None:
    base, _ = server
    bad = _bad_tokens(token, jwt_secret)[kind]
    for url, _route in _routes(plugin, compiled):
        status, headers, body = fetch(base + url, **({"token": bad} if transport == "bearer" else {"cookie": bad}))
        assert status in (401, 403), (url, status, body[:300])
        assert headers.get("content-security-policy") == plugin.pages.base.CSP, url
        leaked = [d for d in (*STORE_DATA, compiled.first.key[:12], str(seeded_store)) if d in body]
        assert not leaked, (url, leaked)
        assert "Traceback" not in body


def _content_type(url: str, route: APIRoute, plugin: ModuleType) -> str:
    if "/static/" in url:
        return plugin.pages.base.ASSETS[url.rsplit("/", 1)[1]]
    if route.path.startswith("/api/"):
        return "application/json"
    return "text/html; charset=utf-8"


def test_every_route_answers_with_the_csp_and_its_content_type(
    server, token: str, plugin: ModuleType, compiled: Compiled
) -> None:
    base, _ = server
    for url, route in _routes(plugin, compiled):
        for credentials in ({"token": token}, {"cookie": token}):
            status, headers, body = fetch(base + url, **credentials)
            assert status == 200, (url, body[:300])
            assert headers["content-type"] == _content_type(url, route, plugin), url
            assert headers["content-security-policy"] == plugin.pages.base.CSP
            assert headers["x-content-type-options"] == "nosniff" and headers["referrer-policy"] == "no-referrer"
    for name in plugin.pages.base.ASSETS:  # every static file the pages name
        status, headers, _ = fetch(f"{base}/neuronforge/static/{name}", token=token)
        assert status == 200 and headers["content-type"] == plugin.pages.base.ASSETS[name]
    # no inline script or style left for the policy to refuse
    for url in ("/neuronforge/", f"/neuronforge/artifacts/{compiled.first.key}"):
        page = fetch(base + url, token=token)[2]
        assert re.findall(r"<script[^>]*>", page) == ['<script src="/neuronforge/static/catalog.js">']
        assert "<style" not in page and " style=" not in page and re.search(r"\son\w+=", page) is None
    # errors too: JSON on /api/, HTML on the pages
    for url, status, kind in (
        (f"/neuronforge/api/artifacts/{'f' * 64}", 404, "application/json"),
        ("/neuronforge/api/artifacts?limit=0", 400, "application/json"),
        (f"/neuronforge/artifacts/{'f' * 64}", 404, "text/html; charset=utf-8"),
        ("/neuronforge/?page=0", 400, "text/html; charset=utf-8"),
        ("/neuronforge/static/nothing.js", 404, "application/json"),
    ):
        got, headers, body = fetch(base + url, token=token)
        assert (got, headers["content-type"]) == (status, kind), (url, body[:300])
        assert headers["content-security-policy"] == plugin.pages.base.CSP


TRAVERSALS = [
    "..",
    "..%2f..%2fcanary.json",
    "%2e%2e%2f%2e%2e%2fcanary",
    "%2e%2e",
    "..%5c..%5ccanary",
    "%2fetc%2fpasswd",
    "%252e%252e%252fcanary",
    "..%00",
    "a" * 65,
    "a" * 5000,
    "abcdef",  # a prefix shorter than 12: resolves to nothing
    "../../canary",
]


@pytest.mark.parametrize("attempt", TRAVERSALS)
def test_path_traversal_in_a_route_parameter(server, token: str, seeded_store: Path, attempt: str) -> None:
    """A key or file name that is not one is 400 or 404, and nothing outside the store is read: a
    canary file beside the store never shows, nor does the plugin's own source or /etc/passwd."""
    base, _ = server
    (seeded_store.parent / "canary.json").write_text(json.dumps({"manifest": CANARY, "secret": CANARY}))
    for route in ("artifacts", "api/artifacts", "static"):
        status, _, body = fetch(f"{base}/neuronforge/{route}/{attempt}", token=token)
        assert status in (400, 404), (route, attempt, status, body[:300])
        assert CANARY not in body and "root:x:" not in body and "AirflowPlugin" not in body
        assert str(seeded_store) not in body and str(REPO) not in body and "Traceback" not in body


def test_query_parameters_are_bounded(server, token: str) -> None:
    base, _ = server
    long = "x" * 257
    for url in (f"/neuronforge/?model={long}", f"/neuronforge/api/artifacts?instance={long}"):
        status, _, body = fetch(base + url, token=token)
        assert status == 400 and "257 characters long; give at most 256" in body, body[:300]
    status, _, body = fetch(f"{base}/neuronforge/api/artifacts?model=" + "x" * 256, token=token)
    assert status == 200 and json.loads(body)["rows"] == []
    status, _, body = fetch(f"{base}/neuronforge/api/artifacts?offset=" + "9" * 5000, token=token)
    assert status == 400 and len(body) < 300
    status, _, body = fetch(f"{base}/neuronforge/?model=..%2F..%2Fcanary", token=token)  # a substring, not a path
    assert status == 200 and CANARY not in body


# -- in this process ----------------------------------------------------------------------------
def _hostile_row(**changes: Any) -> FarmRow:
    """A row whose every string field is HOSTILE (as a store may hold it)."""
    row = FarmRow(
        key=HOSTILE,
        status=HOSTILE,
        model=HOSTILE,
        revision=HOSTILE,
        profile=HOSTILE,
        target=HOSTILE,
        instance=HOSTILE,
        compiler_version=HOSTILE,
        stage=HOSTILE,
        message=HOSTILE,
        size_bytes=1,
        ttft_ms=12.0,
        per_token_ms=3.0,
        at=HOSTILE,
        run_id=HOSTILE,
        artifact_uri=HOSTILE,
        manifest_uri=HOSTILE,
        uris={HOSTILE: HOSTILE},
        launch={HOSTILE: HOSTILE, "run.sh": HOSTILE},
        incomplete=[HOSTILE],
        hub_registry=HOSTILE,
        hub_registry_found=False,
    )
    for name, value in changes.items():
        setattr(row, name, value)
    return row


def _assert_inert(page: str) -> None:
    assert HOSTILE not in page and "<script>alert" not in page
    assert re.search(r"""href\s*=\s*["']?\s*javascript:""", page, re.IGNORECASE) is None
    assert re.search(r"<a\b[^>]*\bhref=\"(?!/|https?://)", page) is None  # links: our routes or http(s)
    assert re.search(r"\son\w+\s*=", page) is None and " style=" not in page


def _hostile_manifest(hosts: dict[str, Any]) -> SimpleNamespace:
    """The manifest parts the artifact page shows, every string HOSTILE: hosts, the optimum registry."""
    from neuronforge.records.hub_registry import HubRegistration, LookupCheck

    registry = HubRegistration(
        repo_id=HOSTILE,
        endpoint=HOSTILE,
        commit=HOSTILE,
        entry_path=HOSTILE,
        versions={HOSTILE: HOSTILE},
        neuron={"checkpoint_id": HOSTILE},
        lookup=LookupCheck(found=False, reason=HOSTILE, checked_at=HOSTILE),
    )
    return SimpleNamespace(
        hosts=HostsReport.model_validate(hosts), hub_registry=registry, consumer_versions={HOSTILE: HOSTILE}
    )


def test_the_templates_escape_a_hostile_string_in_every_slot(plugin: ModuleType) -> None:
    rows = [_hostile_row(), _hostile_row(key="b" * 64, revision="c" * 40)]  # two in one cell: each shows its rev
    shown = SimpleNamespace(rows=rows, total=3, counts={HOSTILE: 2}, instances=[HOSTILE])
    filters = dict.fromkeys(("model", "profile", "instance", "status"), HOSTILE)
    page = plugin.pages.render.render_page(
        "catalog.html.j2",
        title=HOSTILE,
        store_uri=HOSTILE,
        summary=HOSTILE,
        api_href=HOSTILE,
        filters=filters,
        profiles=[HOSTILE],
        instances=[HOSTILE],
        statuses=[HOSTILE],
        per_page_field=HOSTILE,
        pager=plugin.pages.index._pager_view(filters, 2, 1, shown),
        matrix=plugin.pages.index._matrix_view(rows),
        past_the_end=False,
        plot=plugin.pages.index._plot_view(rows),
        rows=[plugin.pages.index._row_view(r) for r in rows],
    )
    _assert_inert(page)
    assert page.count(str(escape(HOSTILE))) >= 15  # rendered (as text), not dropped
    assert 'href="/neuronforge/artifacts/%3Cscript%3Ealert' in page  # the key: quoted into our route
    hosts = {"cpu_seconds": 1.0, "neuron_seconds": 0.0, "stages": [{"stage": HOSTILE, "seconds": 1, "host": HOSTILE}]}
    row = _hostile_row()
    detail = plugin.pages.render.render_page(
        "artifact.html.j2",
        title=HOSTILE,
        store_uri=HOSTILE,
        a=plugin.pages.artifact._detail_view(
            row, _hostile_manifest(hosts), {HOSTILE: HOSTILE}
        ),  # the manifest's shown parts
        release=None,  # its release section: tests/plugins/test_catalog_channels.py
    )
    _assert_inert(detail)
    assert detail.count(str(escape(HOSTILE))) >= 20 and '<pre class="snippet">' in detail
    assert 'id="hub-registry"' in detail and "does not return this build" in detail
    assert 'href="/dags/neuronforge_compile_publish/runs/%3Cscript%3E' in detail  # the run id: quoted
    error = plugin.pages.render.render_page("error.html.j2", title=HOSTILE, message=HOSTILE)
    _assert_inert(error)
    assert str(escape(HOSTILE)) in error


@pytest.mark.parametrize(
    ("href", "link"),
    [
        ("/neuronforge/artifacts/abc", True),
        ("https://example.com/x", True),
        ("http://example.com/", True),
        ("javascript:alert(1)", False),
        ("JaVaScRiPt:alert(1)", False),
        (" javascript:alert(1)", False),
        ("java\tscript:alert(1)", False),
        ("data:text/html,<script>alert(1)</script>", False),
        ("vbscript:msgbox", False),
        ("//evil.example/x", False),
        ("/\\evil.example/x", False),
        ("s3://bucket/key", False),
        ("file:///etc/passwd", False),
        ("https:alert(1)", False),
    ],
)
def test_a_link_built_from_data_is_ours_or_http(plugin: ModuleType, href: str, link: bool) -> None:
    macros = plugin.pages.render.ENV.from_string(
        '{% import "macros.html.j2" as m %}{% call m.link(href, id="x") %}text{% endcall %}'
    )
    out = macros.render(href=href)
    assert out.startswith('<a id="x" href="') == link, out
    assert out == ("text" if not link else f'<a id="x" href="{escape(href)}">text</a>')


class Spy:
    """A store that records the keys read through it."""

    def __init__(self, store: Any) -> None:
        self._store = store
        self.keys: list[str] = []

    def __getattr__(self, name: str) -> Any:
        found = getattr(self._store, name)
        if name not in STORE_READS or name == "get_files":  # get_files takes (key, path) pairs, not a key
            return found

        def spied(key: str = "", *args: Any, **kwargs: Any) -> Any:
            self.keys.append(key)
            return found(key, *args, **kwargs)

        return spied


def test_a_hostile_manifest_cannot_make_the_page_read_outside_the_artifact(plugin: ModuleType, tmp_path: Path) -> None:
    (tmp_path / "secret.txt").write_text(CANARY)
    store = open_store(f"file://{tmp_path / 'store'}")
    store.put_bytes(b"#!/bin/sh\necho serve\n", "models/a/launch/run.sh")
    store.put_bytes(CANARY.encode(), "models/secret.txt")
    spy = Spy(store)
    names = ["run.sh", "../../secret.txt", "../secret.txt", "..", "a/b", "x\x00y", "x\ny", "C:\\x", ""]
    row = SimpleNamespace(key="k", launch={n: "u" for n in names}, artifact_uri=store.uri("models/a"))
    assert plugin.pages.reads.snippets(spy, row, None) == {"run.sh": "#!/bin/sh\necho serve\n"}
    assert spy.keys == ["models/a/launch/run.sh"]
    # an artifact folder outside the store, or escaping it, is not read at all
    for uri in ("file:///etc", store.uri("../"), store.uri("models/../..")):
        spy.keys.clear()
        assert (
            plugin.pages.reads.snippets(spy, SimpleNamespace(key="k", launch={"run.sh": "u"}, artifact_uri=uri), None)
            == {}
        )
        assert spy.keys == []


@pytest.fixture
def client(plugin: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    from airflow.api_fastapi.core_api.security import get_user
    from fastapi.testclient import TestClient

    store = Spy(open_store(f"file://{tmp_path / 'store'}"))
    read_from(plugin, lambda: store)
    plugin.app.dependency_overrides[get_user] = lambda: None
    with TestClient(plugin.app, raise_server_exceptions=False) as client:
        client.store = store
        yield client
    plugin.app.dependency_overrides.clear()


@pytest.mark.parametrize("key", ["x" * 11, "g" * 12, "a" * 65, "a" * 11, "%2e%2e", "abcdef012345%00"])
def test_a_bad_key_is_refused_before_the_store_is_touched(client, key: str) -> None:
    for url in (f"/artifacts/{key}", f"/api/artifacts/{key}"):
        response = client.get(url)
        assert response.status_code == 400, (url, response.text)
        assert "is not a cache key: give 12 to 64 hex characters" in html.unescape(response.text)
    assert client.store.keys == []


def test_an_unexpected_error_is_one_generic_sentence(client, plugin: ModuleType, monkeypatch, caplog) -> None:
    def broken() -> None:
        raise RuntimeError("/home/airflow/secret password=hunter2 AKIAIOSFODNN7EXAMPLE")

    read_from(plugin, broken)
    for url, kind in (
        ("/", "text/html"),
        ("/artifacts/" + "a" * 12, "text/html"),
        ("/api/artifacts", "application/json"),
    ):
        response = client.get(url)
        assert response.status_code == 500 and response.headers["content-type"].startswith(kind), url
        assert response.headers["content-security-policy"] == plugin.pages.base.CSP
        assert plugin.pages.base.UNEXPECTED in html.unescape(response.text)
        for leak in ("hunter2", "/home/airflow", "AKIA", "Traceback", "RuntimeError", str(REPO)):
            assert leak not in response.text, (url, leak)
    assert "hunter2" in caplog.text  # the detail is in the api-server's log


def test_store_errors_name_no_local_path(plugin: ModuleType, tmp_path: Path, monkeypatch) -> None:
    from airflow.api_fastapi.core_api.security import get_user
    from fastapi.testclient import TestClient

    missing = tmp_path / "no-such-store"
    monkeypatch.setenv("NEURONFORGE_STORE", f"file://{missing}")
    plugin.app.dependency_overrides[get_user] = lambda: None
    try:
        with TestClient(plugin.app, raise_server_exceptions=False) as client:
            for url in ("/", "/api/artifacts", f"/api/artifacts/{'a' * 12}", f"/artifacts/{'a' * 12}"):
                response = client.get(url)
                assert response.status_code == 503, (url, response.text)
                assert str(tmp_path) not in response.text and "NEURONFORGE_STORE" in response.text
            (tmp_path / "store").mkdir()
            monkeypatch.setenv("NEURONFORGE_STORE", f"file://{tmp_path / 'store'}")
            response = client.get(f"/api/artifacts/{'f' * 64}")
            assert response.status_code == 404 and str(tmp_path) not in response.text
            assert response.json() == {"detail": f"no single build with key '{'f' * 64}' in the store."}
    finally:
        plugin.app.dependency_overrides.clear()
