"""The catalog shows a build's attestations at newer Neuron SDK releases (routes in this process:
FastAPI's test client): its row carries the releases it is attested for from the farm index (no read
per row; the build's JSON answer keeps its three requests), its page every attestation with what was
run and the keys a re-trace missed, and a model's channels page, for a channel requiring its fleet's
release, whether the build it points to is attested for it and the command that would attest it."""

from __future__ import annotations

import html
import re
from pathlib import Path
from types import ModuleType
from urllib.parse import urlencode

import pytest

from neuronforge.artifacts import attestations, channels
from neuronforge.records.attestation import Attestation
from neuronforge.stores import open_store
from tests.plugins.conftest import read_from
from tests.releases.builds import MODEL, publish


@pytest.fixture
def client(plugin: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    from airflow.api_fastapi.core_api.security import get_user
    from fastapi.testclient import TestClient

    store = open_store(f"file://{tmp_path / 'store'}")
    read_from(plugin, lambda: store)
    plugin.app.dependency_overrides[get_user] = lambda: None
    client = TestClient(plugin.app)
    client.store = store
    yield client
    plugin.app.dependency_overrides.clear()


def _page(client, url: str) -> str:
    response = client.get(url)
    assert response.status_code == 200, response.text
    return html.unescape(re.sub(r"<[^>]+>", "", response.text))


def test_the_catalog_shows_attestations_and_a_channels_release(client) -> None:
    store = client.store
    attested, other = publish(store, 1), publish(store, 2)
    attestations.attest(
        store, attested, Attestation(release="2.33.1", run="re-smoke", passed=True, at="2026-11-29T01:00:00Z", host="h")
    )
    missed = Attestation(release="2.34.0", run="re-verify", passed=False, keys_found=["k1"], keys_missing=["k2"])
    attestations.attest(store, attested, missed)
    ref = channels.ChannelRef.parse(MODEL, "cpu", "candidate")
    channels.promote(store, ref, build=other, by="ci")
    channels.require_release(store, ref, "2.33.1")

    rows = client.get("/api/artifacts").json()
    found = rows["rows"] if isinstance(rows, dict) else rows
    assert {r["key"][:12]: r["attested"] for r in found} == {attested[:12]: ["2.33.1"], other[:12]: []}
    page = _page(client, f"/artifacts/{attested}")
    assert "SDK 2.33.1: re-smoke passed on h at 2026-11-29T01:00:00Z" in page
    assert "SDK 2.34.0: re-verify FAILED" in page and "1 key(s) found, missing: k2" in page

    page = _page(client, f"/channels?{urlencode({'model': MODEL})}")
    assert "requires SDK 2.33.1: NOT ATTESTED" in page
    assert f"neuronforge attest {other[:12]} --sdk 2.33.1" in page
    attestations.attest(store, other, Attestation(release="2.33.1", run="re-smoke", passed=True))
    page = _page(client, f"/channels?{urlencode({'model': MODEL})}")
    assert "requires SDK 2.33.1: attested" in page and "neuronforge attest" not in page
