"""The artifact catalog plugin in a real `airflow api-server` (tests/plugins/conftest.py), over HTTP:
access follows Airflow's own authentication; the JSON endpoints, the page (a page of rows at a time)
and each artifact's own page show what `neuronforge.farm.rows` reads. Also the forms middleware
(plugins/neuronforge_forms.py) in the same api-server, compared with a second one without plugins
over the same database: refused callers and other requests get Airflow's own answers."""

from __future__ import annotations

import html
import json
import re
import time

import pytest
from markupsafe import escape

from tests.conftest import Compiled
from tests.plugins.conftest import http_get, resigned


@pytest.mark.parametrize(
    "path",
    ["/neuronforge/", "/neuronforge/artifacts/x", "/neuronforge/api/artifacts", "/neuronforge/api/artifacts/x"],
)
def test_an_unauthenticated_request_is_refused(server, path: str) -> None:
    base, _ = server
    assert http_get(base + path)[0] == 401
    assert http_get(base + path, token="not-a-jwt")[0] == 403


def test_the_json_rows(server, token: str, compiled: Compiled) -> None:
    base, _ = server
    status, body = http_get(f"{base}/neuronforge/api/artifacts", token)
    answer = json.loads(body)
    assert status == 200 and answer["total"] == 4 and answer["offset"] == 0 and answer["limit"] == 100
    assert answer["counts"] == {"published": 1, "stale": 1, "smoke-failed": 1, "failed": 0, "building": 1, "damaged": 0}
    rows = {r["key"][:1] if r["key"][0] in "ab" else r["status"]: r for r in answer["rows"]}
    assert set(rows) == {"a", "b", "published", "stale"}
    assert rows["stale"]["profile"] == "cpu@0" and "now cpu@local" in rows["stale"]["message"]
    assert rows["published"]["status"] == "published" and rows["published"]["key"] == compiled.first.key
    assert rows["a"]["status"] == "smoke-failed" and rows["a"]["model"] == "org/smoke-fails"
    assert rows["a"]["run_id"] == "manual__7" and "greedy tokens differ" in rows["a"]["message"]
    assert rows["b"]["status"] == "building" and "worker-1:42" in rows["b"]["message"]
    assert rows["b"]["model"] == "org/in-progress"
    status, body = http_get(f"{base}/neuronforge/api/artifacts?status=smoke-failed", token)
    assert [r["key"][0] for r in json.loads(body)["rows"]] == ["a"]
    status, body = http_get(f"{base}/neuronforge/api/artifacts/{compiled.first.key[:12]}", token)
    detail = json.loads(body)
    assert status == 200 and detail["manifest"]["cache_key"] == compiled.first.key
    assert detail["snippets"] and all(text for text in detail["snippets"].values())
    assert detail["incomplete"] == []  # checked: one listing of the artifact's folder
    status, body = http_get(f"{base}/neuronforge/api/artifacts/{'f' * 64}", token)
    assert status == 404 and json.loads(body)["detail"].startswith(f"no single build with key '{'f' * 64}'")


def test_the_json_rows_a_page_at_a_time(server, token: str) -> None:
    base, _ = server
    every = [r["key"] for r in json.loads(http_get(f"{base}/neuronforge/api/artifacts", token)[1])["rows"]]
    pages = []
    for offset in (0, 2, 4):
        status, body = http_get(f"{base}/neuronforge/api/artifacts?offset={offset}&limit=2", token)
        answer = json.loads(body)
        assert status == 200 and answer["offset"] == offset and answer["limit"] == 2 and answer["total"] == 4
        pages.append([r["key"] for r in answer["rows"]])
    assert pages == [every[:2], every[2:], []]


def test_the_page_with_the_ui_cookie(server, token: str, compiled: Compiled) -> None:
    base, _ = server
    status, body = http_get(f"{base}/neuronforge/", cookie=token)  # what the browser sends after logging in
    page = body.decode()
    assert status == 200 and '<table id="matrix">' in page
    for state in ("published", "stale", "smoke-failed", "building"):
        assert f'data-status="{state}"' in page
    assert 'id="latency-plot"' in page and 'class="copy"' in page
    assert "1 published, 1 stale, 1 smoke-failed, 1 building" in page and "page 1 of 1" in page
    assert 'id="next"' not in page and 'id="prev"' not in page
    # each cell and row links to its artifact's own page; no artifact's detail is rendered here
    assert page.count(f'href="/neuronforge/artifacts/{compiled.first.key}"') == 2
    assert f'id="artifact-{compiled.first.key[:12]}"' in page
    assert '<pre class="snippet">' not in page and 'class="hosts"' not in page
    assert '<option value="inf2.xlarge">' in page  # the instance filter, from the page's own read
    status, body = http_get(f"{base}/neuronforge/?status=building", cookie=token)
    assert 'data-status="building"' in body.decode() and 'data-status="published"' not in body.decode()


def test_a_page_of_two_rows(server, token: str) -> None:
    """per_page=2 over the four rows: two rows and a link to the next page, which keeps the filters."""
    base, _ = server
    status, body = http_get(f"{base}/neuronforge/?per_page=2", cookie=token)
    page = body.decode()
    assert status == 200 and page.count('<tr id="artifact-') == 2 and page.count("data-status=") == 2
    assert "page 1 of 2 (rows 1–2 of 4)" in page and 'id="prev"' not in page
    found = re.search(r'<a id="next" rel="next" href="([^"]+)"', page)
    assert found is not None
    href = html.unescape(found[1])
    assert href == "/neuronforge/?page=2&per_page=2"
    second = http_get(base + href, cookie=token)[1].decode()
    assert second.count('<tr id="artifact-') == 2 and "page 2 of 2 (rows 3–4 of 4)" in second
    assert 'id="next"' not in second and 'href="/neuronforge/?per_page=2"' in second  # back to page 1
    keys = set(re.findall(r'<tr id="artifact-(\w+)"', page)) | set(re.findall(r'<tr id="artifact-(\w+)"', second))
    assert len(keys) == 4
    # the filters ride along
    status, body = http_get(f"{base}/neuronforge/?status=published&per_page=1&page=1", cookie=token)
    assert status == 200 and "page 1 of 1" in body.decode() and 'id="next"' not in body.decode()
    status, body = http_get(f"{base}/neuronforge/?model=org&per_page=1", cookie=token)
    found = re.search(r'<a id="next" rel="next" href="([^"]+)"', body.decode())
    assert found is not None and html.unescape(found[1]) == "/neuronforge/?model=org&page=2&per_page=1"


def test_the_artifact_page(server, token: str, compiled: Compiled) -> None:
    base, _ = server
    key = compiled.first.key
    snippets = json.loads(http_get(f"{base}/neuronforge/api/artifacts/{key}", token)[1])["snippets"]
    status, body = http_get(f"{base}/neuronforge/artifacts/{key[:12]}", cookie=token)
    page = body.decode()
    assert status == 200 and f'<div class="detail" id="artifact-{key[:12]}">' in page
    assert compiled.first.published.manifest_uri.rsplit("/store/", 1)[1] in page
    assert 'aria-label="copy manifest URI"' in page and 'href="/neuronforge/"' in page  # and the way back
    assert "verify: complete (sizes match the manifest)" in page
    # where its build's seconds went
    assert '<p class="hosts">hosts: CPU hosts ' in page and "Neuron hosts 0.0s" in page and "smoke " in page
    # the deploy files, inline with a copy button each
    assert snippets and page.count('<pre class="snippet">') == len(snippets)
    for name, text in snippets.items():
        assert f'<pre class="snippet">{escape(text)}</pre>' in page and f'aria-label="copy {name}"' in page
    status, body = http_get(f"{base}/neuronforge/artifacts/{'a' * 12}", cookie=token)
    assert status == 200 and "smoke-failed" in body.decode() and "greedy tokens differ" in body.decode()
    status, body = http_get(f"{base}/neuronforge/artifacts/{'f' * 64}", cookie=token)
    assert status == 404 and "no single build with key" in body.decode()


@pytest.mark.parametrize(
    ("query", "sentence"),
    [
        ("?per_page=0", "per_page = 0 is not allowed; use a whole number from 1 to 500."),
        ("?page=two", 'page = "two" is not allowed; use a whole number from 1 up.'),
        ("?status=bogus", "status 'bogus' is not one of published, stale, smoke-failed, failed, building, damaged."),
        ("api/artifacts?limit=1001", "limit = 1001 is not allowed; use a whole number from 1 to 1000."),
        (
            "api/artifacts?status=bogus",
            "status 'bogus' is not one of published, stale, smoke-failed, failed, building, damaged.",
        ),
    ],
)
def test_a_bad_parameter_is_answered_in_one_sentence(server, token: str, query: str, sentence: str) -> None:
    base, _ = server
    status, body = http_get(f"{base}/neuronforge/{query}", token)
    assert status == 400, body
    if query.startswith("api/"):
        assert json.loads(body)["detail"] == sentence
    else:
        found = re.search(r"<p id='error'>([^<]*)</p>", body.decode())
        assert found is not None and html.unescape(found[1]) == sentence


def test_the_navigation_entry(server, token: str) -> None:
    base, _ = server
    status, body = http_get(f"{base}/api/v2/plugins", token)
    assert status == 200
    (plugin,) = [p for p in json.loads(body)["plugins"] if p["name"] == "neuronforge_catalog"]
    (view,) = plugin["external_views"]
    assert view["href"] == "/neuronforge/" and view["destination"] == "nav" and view["url_route"]


def _trigger(base: str, dag_id: str, conf: dict, token: str | None) -> tuple[int, dict]:
    import urllib.error
    import urllib.request

    body = json.dumps({"logical_date": None, "conf": conf}).encode()
    request = urllib.request.Request(f"{base}/api/v2/dags/{dag_id}/dagRuns", data=body, method="POST")
    request.add_header("Content-Type", "application/json")
    if token:
        request.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read() or b"{}")


BAD_CONFS = {
    "tp out of range": ({"tp_degree": 0}, "tp_degree = 0 is not allowed; use a whole number from 1 to 128."),
    "unknown instance": ({"instance_type": "inf9.huge"}, 'instance_type = "inf9.huge" is not allowed; use one of inf2'),
    "typo in a key": ({"tp_degre": 2}, "does not take the conf key 'tp_degre' (did you mean 'tp_degree'?)"),
    "bad extra target": (
        {"targets": [{"instance_type": "inf2.xlarge", "tp_degree": "two", "sequence_length": 64}]},
        'targets[0].tp_degree = "two" is not allowed; use a whole number from 1 to 128.',
    ),
}


@pytest.mark.parametrize("case", sorted(BAD_CONFS))
def test_a_bad_trigger_is_answered_in_one_sentence(server, token: str, case: str) -> None:
    base, _ = server
    conf, sentence = BAD_CONFS[case]
    status, body = _trigger(base, "neuronforge_compile_publish", conf, token)
    assert status == 400 and sentence in body["detail"] and "\n" not in body["detail"], body
    assert "Failed validating" not in body["detail"]
    assert _trigger(base, "neuronforge_compile_publish", conf, None)[0] == 401  # no credentials: Airflow answers


def test_a_good_trigger_passes_through(server, token: str) -> None:
    base, _ = server
    status, body = _trigger(base, "neuronforge_config_sweep", {"instance": "inf2.xlarge", "profile": "cpu"}, token)
    assert status == 200 and body["conf"]["instance"] == "inf2.xlarge", body


# The forms middleware against the real api-server, and against a second api-server over the same
# DB without any plugin (`plain_server`): what the plugin must not change is compared, not assumed.
COMPILE_TRIGGER = "/api/v2/dags/neuronforge_compile_publish/dagRuns"
DEEP = b'{"conf": ' + b'{"a": ' * 100_000 + b"1" + b"}" * 100_001
BAD_CONF = b'{"logical_date": null, "conf": {"tp_degree": 0}}'


def _post(url: str, data: bytes, headers: dict[str, str]) -> tuple[int, bytes]:
    import urllib.error
    import urllib.request

    request = urllib.request.Request(url, data=data, method="POST", headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


def _expired(token: str, secret: str) -> str:
    """`token` with its expiry an hour ago, signed with the api-server's own JWT secret."""
    now = int(time.time())
    return resigned(token, secret, iat=now - 7200, nbf=now - 7200, exp=now - 3600)


def _credentials(kind: str, token: str, secret: str) -> dict[str, str]:
    return {
        "none": {},
        "garbage bearer": {"Authorization": "Bearer not-a-jwt"},
        "garbage cookie": {"Cookie": "_token=not-a-jwt"},
        "expired bearer": {"Authorization": f"Bearer {_expired(token, secret)}"},
        "expired cookie": {"Cookie": f"_token={_expired(token, secret)}"},
        "basic": {"Authorization": "Basic YWRtaW46YWRtaW4="},
    }[kind]


@pytest.mark.parametrize("body", [BAD_CONF, DEEP, b"{not json"], ids=["bad conf", "deep", "malformed"])
@pytest.mark.parametrize(
    "kind", ["none", "garbage bearer", "garbage cookie", "expired bearer", "expired cookie", "basic"]
)
def test_a_caller_airflow_refuses_gets_airflows_answer(
    server, plain_server: str, token: str, jwt_secret: str, kind: str, body: bytes
) -> None:
    """No sentence of ours before Airflow's authentication: a request without a credential Airflow
    accepts gets exactly what Airflow answers without the plugin (401/403, or Airflow's own 4xx for
    a body it cannot parse, which FastAPI reads before authenticating)."""
    base, _ = server
    headers = {"Content-Type": "application/json", **_credentials(kind, token, jwt_secret)}
    ours = _post(base + COMPILE_TRIGGER, body, headers)
    plain = _post(plain_server + COMPILE_TRIGGER, body, headers)
    assert ours == plain and 400 <= ours[0] < 500, (ours, plain)
    assert b"neuronforge_compile_publish" not in ours[1]
    if kind.startswith("expired") and body == BAD_CONF:
        assert ours[0] == 401 and json.loads(ours[1])["detail"] == "Token Expired"


OTHER_REQUESTS = {
    "another DAG's bad conf": ("POST", "/api/v2/dags/not_ours/dagRuns", BAD_CONF),
    "another DAG's deep body": ("POST", "/api/v2/dags/not_ours/dagRuns", DEEP),
    "another DAG's malformed body": ("POST", "/api/v2/dags/not_ours/dagRuns", b"{not json"),
    "another DAG's 2 MiB body": ("POST", "/api/v2/dags/not_ours/dagRuns", b'{"conf": {"x": "' + b"y" * 2**21 + b'"}}'),
    "Airflow's wildcard": ("POST", "/api/v2/dags/~/dagRuns", BAD_CONF),
    "trailing slash": ("POST", COMPILE_TRIGGER + "/", BAD_CONF),
    "the version": ("GET", "/api/v2/version", None),
    "the runs list": ("GET", COMPILE_TRIGGER + "?limit=1&order_by=run_after", None),
    "an encoded id": ("POST", "/api/v2/dags/not%2Eours%C3%A9/dagRuns", BAD_CONF),
}


@pytest.mark.parametrize("case", sorted(OTHER_REQUESTS))
def test_other_requests_are_answered_as_without_the_plugin(server, plain_server: str, token: str, case: str) -> None:
    import urllib.error
    import urllib.request

    method, path, body = OTHER_REQUESTS[case]
    answers = []
    for base in (server[0], plain_server):
        request = urllib.request.Request(base + path, data=body, method=method)
        request.add_header("Authorization", f"Bearer {token}")
        request.add_header("Content-Type", "application/json")
        try:
            with urllib.request.urlopen(request, timeout=60) as response:
                answers.append((response.status, response.read()))
        except urllib.error.HTTPError as exc:
            answers.append((exc.code, exc.read()))
    assert answers[0] == answers[1] and answers[0][0] < 500, answers


SENTENCES = {
    "100 000 nested objects": (DEEP, 400, "nests deeper than 32 levels"),
    "NaN": (b'{"conf": {"max_new_tokens": NaN}}', 400, "NaN is not a JSON number"),
    "malformed": (b"{not json", 400, "the trigger's body is not JSON"),
    "not UTF-8": (b'{"conf": {"model": "\xff"}}', 400, "is not UTF-8 text"),
    "a key twice": (b'{"conf": {"tp_degree": 2, "tp_degree": 0}}', 400, 'the key "tp_degree" appears twice'),
    "2 MiB": (b'{"conf": {"model": "' + b"y" * 2**21 + b'"}}', 413, "larger than 1048576 bytes"),
    "a credential": (b'{"conf": {"store": "s3://AKIAEXAMPLE:wJalrXUtnFEMIK7MDENG@b/s"}}', 400, "s3://***@b/s"),
}


@pytest.mark.parametrize("case", sorted(SENTENCES))
def test_a_bad_body_from_a_signed_in_user_is_one_sentence(server, token: str, case: str) -> None:
    base, _ = server
    body, status, words = SENTENCES[case]
    headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
    code, answer = _post(base + COMPILE_TRIGGER, body, headers)
    detail = json.loads(answer)["detail"]
    assert code == status and words in detail and "\n" not in detail and len(detail) < 700, (code, detail)
    assert "wJalrXUtnFEMIK7MDENG" not in detail and "Traceback" not in detail and "/" + "tmp" not in detail
    from tests.plugins.conftest import STARTED

    assert "Traceback" not in (STARTED[base][0] / "api-server.log").read_text()
