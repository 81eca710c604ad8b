"""The catalog plugin's routes in this process (FastAPI's test client, Airflow's `get_user` overridden)
over a store of recorded failures: what a page view costs the store, walking the pages, and that
hostile strings in a store stay text in every page."""

from __future__ import annotations

import hashlib
import html
import re
from pathlib import Path
from types import ModuleType, SimpleNamespace
from typing import Any

import pytest

from neuronforge.artifacts.farm_index import record_failure, snapshot
from neuronforge.common.errors import NeuronforgeError
from neuronforge.spec.target import TargetSpec
from neuronforge.stores import open_store
from tests.conftest import TARGET
from tests.plugins.conftest import STORE_READS, read_from

HOSTILE = '<script>alert("x")</script>'
READS = STORE_READS


class Counting:
    """A store that counts the requests made through it."""

    def __init__(self, store: Any) -> None:
        self._store = store
        self.requests = 0

    def __getattr__(self, name: str) -> Any:
        found = getattr(self._store, name)
        if name not in READS:
            return found

        def counted(*args: Any, **kwargs: Any) -> Any:
            self.requests += 1
            return found(*args, **kwargs)

        return counted


def _key(i: int) -> str:
    return hashlib.sha256(f"build {i}".encode()).hexdigest()


@pytest.fixture(scope="module")
def farm(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Twelve failed builds of twelve models, and one whose every string is markup."""
    root = tmp_path_factory.mktemp("catalog-pages") / "store"
    store = open_store(f"file://{root}")
    target = TargetSpec.parse(TARGET)
    for i in range(12):
        state = SimpleNamespace(model=f"org/m{i:02d}", target=target)
        record_failure(store, _key(i), "compile", RuntimeError(f"failure {i}"), f"manual__{i}", state)
    hostile = SimpleNamespace(slug=HOSTILE, profile=HOSTILE, instance=SimpleNamespace(name=HOSTILE))
    state = SimpleNamespace(model=HOSTILE, target=hostile)
    record_failure(store, _key(99), "smoke", RuntimeError('<img src=x onerror="alert(1)">'), HOSTILE, state)
    with pytest.MonkeyPatch.context() as mp:  # the index in pages of four rows, as thousands make pages of 2000
        mp.setattr(snapshot, "PAGE_ROWS", 4)
        assert len(snapshot.compact(store).pages) == 4
    return root


@pytest.fixture
def client(plugin: ModuleType, farm: Path, monkeypatch: pytest.MonkeyPatch):
    from airflow.api_fastapi.core_api.security import get_user
    from fastapi.testclient import TestClient

    store = Counting(open_store(f"file://{farm}", must_exist=True))
    read_from(plugin, lambda: store)
    plugin.app.dependency_overrides[get_user] = lambda: None
    with TestClient(plugin.app) as client:
        client.store = store
        yield client
    plugin.app.dependency_overrides.clear()


def _requests(client: Any, url: str) -> tuple[int, str]:
    client.store.requests = 0
    response = client.get(url)
    assert response.status_code == 200, response.text
    return client.store.requests, response.text


def test_a_page_view_costs_the_pages_it_shows(client) -> None:
    """The farm index's head and tail, and the index pages holding the rows shown: no request per row."""
    cost, page = _requests(client, "/?per_page=2")
    assert page.count('<tr id="artifact-') == 2 and "page 1 of 7 (rows 1–2 of 13)" in page
    assert cost == 3
    cost, page = _requests(client, "/?per_page=4&page=3")
    assert page.count('<tr id="artifact-') == 4 and "page 3 of 4 (rows 9–12 of 13)" in page
    assert cost == 3
    cost, page = _requests(client, "/?per_page=500")
    assert page.count('<tr id="artifact-') == 13 and "page 1 of 1" in page
    assert cost == 2 + 4
    assert "1 smoke-failed, 12 failed" in page  # the summary, from the same read
    cost, page = _requests(client, f"/artifacts/{_key(3)[:12]}")
    assert cost <= 6 and "failure 3" in page and "manual__3" in page


def test_walking_the_pages_keeps_the_filters(client) -> None:
    url, seen, pages = "/?model=org%2Fm&per_page=5", [], 0
    while url:
        page = client.get(url).text
        pages += 1
        seen += re.findall(r'<tr id="artifact-(\w+)"', page)
        assert 'value="org/m"' in page  # the filter form still shows it
        found = re.search(r'<a id="next" rel="next" href="([^"]+)"', page)
        url = html.unescape(found[1]).removeprefix("/neuronforge") if found else ""
        assert not url or "model=org%2Fm" in url
    assert pages == 3 and sorted(seen) == sorted(_key(i)[:12] for i in range(12))
    page = client.get("/?page=9&per_page=5").text
    assert "no rows on this page" in page and 'id="prev"' in page


@pytest.mark.parametrize(
    "url",
    [
        "/",
        "/?status=smoke-failed",
        f"/artifacts/{_key(99)}",
        "/?status=" + HOSTILE,
        "/?page=" + HOSTILE,
        "/artifacts/" + '<img src=x onerror="alert(1)">',
    ],
)
def test_hostile_strings_stay_text(client, url: str) -> None:
    page = client.get(url).text
    assert "<script>alert" not in page and "<img src=x" not in page
    assert "&lt;script&gt;alert(" in page or "&lt;img src=x" in page


def test_the_json_of_a_page_and_of_one_artifact(client) -> None:
    answer = client.get("/api/artifacts?offset=10&limit=5").json()
    assert len(answer["rows"]) == 3 and answer["total"] == 13 and (answer["offset"], answer["limit"]) == (10, 5)
    assert answer["counts"]["failed"] == 12
    one = client.get(f"/api/artifacts/{_key(99)[:12]}").json()
    assert one["model"] == HOSTILE and one["status"] == "smoke-failed" and one["manifest"] is None
    assert one["snippets"] == {}
    missing = client.get(f"/api/artifacts/{'f' * 64}")
    assert missing.status_code == 404 and "no single build with key" in missing.json()["detail"]


@pytest.mark.parametrize(
    ("url", "sentence"),
    [
        ("/?per_page=501", "per_page = 501 is not allowed; use a whole number from 1 to 500."),
        ("/?page=-1", "page = -1 is not allowed; use a whole number from 1 up."),
        ("/?page=1.5", 'page = "1.5" is not allowed; use a whole number from 1 up.'),
        ("/api/artifacts?offset=-1", "offset = -1 is not allowed; use a whole number from 0 up."),
        ("/api/artifacts?limit=0", "limit = 0 is not allowed; use a whole number from 1 to 1000."),
        ("/api/artifacts?limit=many", 'limit = "many" is not allowed; use a whole number from 1 to 1000.'),
    ],
)
def test_a_bad_number_is_one_sentence(client, url: str, sentence: str) -> None:
    response = client.get(url)
    assert response.status_code == 400
    if url.startswith("/api/"):
        assert response.json() == {"detail": sentence}
    else:
        assert _error(response.text) == sentence


def _error(page: str) -> str:
    """The sentence of an HTML error page."""
    found = re.search(r"<p id='error'>([^<]*)</p>", page)
    assert found is not None, page
    return html.unescape(found[1])


def test_the_plot_keeps_small_bars_readable_beside_a_10x_outlier(plugin: ModuleType) -> None:
    rows = [
        SimpleNamespace(model="org/m", profile="cpu@local", target=f"cpu-t{i}", ttft_ms=ms, per_token_ms=ms / 10)
        for i, ms in enumerate((20.0, 22.0, 25.0, 250.0))
    ]
    page = plugin.pages.render.render_page("_plot.html.j2", plot=plugin.pages.index._plot_view(rows))
    widths = [float(w) for w in re.findall(r'class="bar ttft" width="([\d.]+)"', page)]
    assert len(widths) == 4 and len(re.findall(r'class="bar per-token"', page)) == 4
    assert min(widths) / max(widths) > 0.2  # on a linear scale: 20/250 = 0.08
    assert "time to first token" in page and "per output token" in page and "log scale" in page


def test_uris_and_slugs_wrap_at_separators_and_stay_text(plugin: ModuleType) -> None:
    w = plugin.pages.render.ENV.get_template("macros.html.j2").module.w
    assert str(w("s3://b/x/cpu-inf2")) == "s3:<wbr>/<wbr>/<wbr>b/<wbr>x/<wbr>cpu-<wbr>inf2"
    hostile = str(w('<img src=x onerror="a&b">'))
    assert "<img" not in hostile and "a&amp;<wbr>b" in hostile  # never inside an entity


def test_an_s3_store_is_checked_once_then_each_view_costs_its_reads(
    plugin: ModuleType, s3_bucket: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The api-server keeps an S3 store open once its bucket answered: the second page view sends no
    HeadBucket, only the reads it shows; a bucket that goes away is said by the next view (503), as before."""
    import boto3
    from airflow.api_fastapi.core_api.security import get_user
    from fastapi.testclient import TestClient

    uri = f"s3://{s3_bucket}/farm"
    record_failure(open_store(uri), _key(1), "compile", RuntimeError("failure 1"), "manual__1",
                   SimpleNamespace(model="org/m01", target=TargetSpec.parse(TARGET)))  # fmt: skip
    monkeypatch.setenv("NEURONFORGE_STORE", uri)
    monkeypatch.setattr(plugin.pages.base, "_OPEN_REMOTE", {})
    from neuronforge.stores.s3 import S3Store

    probes: list[bool] = []
    real_probe = S3Store.probe
    monkeypatch.setattr(S3Store, "probe", lambda self, write: probes.append(write) or real_probe(self, write))
    plugin.app.dependency_overrides[get_user] = lambda: None
    try:
        with TestClient(plugin.app) as client:
            assert client.get("/").status_code == 200 and probes == [False]
            assert client.get("/").status_code == 200 and client.get("/api/artifacts").status_code == 200
            assert probes == [False]  # checked once
            boto3.resource("s3").Bucket(s3_bucket).objects.all().delete()
            boto3.client("s3").delete_bucket(Bucket=s3_bucket)
            assert client.get("/").status_code == 503
    finally:
        plugin.app.dependency_overrides.clear()


def test_an_error_is_answered_with_its_class_http_status(plugin: ModuleType) -> None:
    """The catalog's one mapping (`base.said`): the class's `http_status`; a 4xx's own sentence (the
    store's root said as "the store"), a stored record's too, any other 5xx one generic sentence."""
    from neuronforge.artifacts.channels import ChannelDamaged, PromotionRefused
    from neuronforge.common.errors import InvalidInput, StoreError, StoreUnreachable
    from neuronforge.stores.base import NotFound

    said = plugin.pages.base.said
    root = "file:///srv/farm"
    assert said(InvalidInput(f"no model in {root}"), root, "x") == (400, "no model in the store.")
    assert said(NotFound("no such build"), root, "x") == (404, "no such build.")
    assert said(PromotionRefused("build b is rejected"), root, "x") == (409, "build b is rejected.")
    assert said(ChannelDamaged(f"{root}/channels/c.json is not a record"), root, "x") == (
        503,
        "the store/channels/c.json is not a record.",
    )
    for hidden in (StoreError("/home/me/.aws AKIA"), StoreUnreachable("http://10.0.0.1:9000 refused")):
        assert said(hidden, root, "x") == (503, plugin.pages.base.UNREADABLE)
    assert said(NeuronforgeError("a bug's detail"), root, "x") == (500, plugin.pages.base.UNEXPECTED)
