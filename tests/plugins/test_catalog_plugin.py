"""The artifact catalog plugin in a real `airflow api-server` (tests/plugins/conftest.py), over HTTP:
access follows Airflow's own authentication; the JSON endpoints and the page show the rows of
`neuronforge.farm`."""

from __future__ import annotations

import json

import pytest

from tests.conftest import Compiled
from tests.plugins.conftest import http_get


@pytest.mark.parametrize("path", ["/neuronforge/", "/neuronforge/api/artifacts", "/neuronforge/api/artifacts/x"])
def test_an_unauthenticated_request_is_refused(server, path: str) -> None:
    base, _ = server
    assert http_get(base + path)[0] == 401
    assert http_get(base + path, token="not-a-jwt")[0] == 403


def test_the_json_rows(server, token: str, compiled: Compiled) -> None:
    base, _ = server
    status, body = http_get(f"{base}/neuronforge/api/artifacts", token)
    rows = {r["key"][:1] if r["key"][0] in "ab" else r["status"]: r for r in json.loads(body)}
    assert status == 200 and set(rows) == {"a", "b", "published", "stale"}
    assert rows["stale"]["profile"] == "cpu@0" and "now cpu@local" in rows["stale"]["message"]
    assert rows["published"]["status"] == "published" and rows["published"]["key"] == compiled.first.key
    assert rows["a"]["status"] == "smoke-failed" and rows["a"]["model"] == "org/smoke-fails"
    assert rows["a"]["run_id"] == "manual__7" and "greedy tokens differ" in rows["a"]["message"]
    assert rows["b"]["status"] == "building" and "worker-1:42" in rows["b"]["message"]
    status, body = http_get(f"{base}/neuronforge/api/artifacts?status=smoke-failed", token)
    assert [r["key"][0] for r in json.loads(body)] == ["a"]
    status, body = http_get(f"{base}/neuronforge/api/artifacts/{compiled.first.key[:12]}", token)
    detail = json.loads(body)
    assert status == 200 and detail["manifest"]["cache_key"] == compiled.first.key
    assert detail["snippets"] and all(text for text in detail["snippets"].values())
    assert http_get(f"{base}/neuronforge/api/artifacts/{'f' * 64}", token)[0] == 404


def test_the_page_with_the_ui_cookie(server, token: str, compiled: Compiled) -> None:
    base, _ = server
    status, body = http_get(f"{base}/neuronforge/", cookie=token)  # what the browser sends after logging in
    page = body.decode()
    assert status == 200 and '<table id="matrix">' in page
    for state in ("published", "stale", "smoke-failed", "building"):
        assert f'data-status="{state}"' in page
    assert 'id="latency-plot"' in page and 'class="copy"' in page
    assert compiled.first.published.manifest_uri.rsplit("/store/", 1)[1] in page
    # each artifact's detail says where its build's seconds went
    assert '<p class="hosts">hosts: CPU hosts ' in page and "Neuron hosts 0.0s" in page and "smoke " in page
    status, body = http_get(f"{base}/neuronforge/?status=building", cookie=token)
    assert 'data-status="building"' in body.decode() and 'data-status="published"' not in body.decode()


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
