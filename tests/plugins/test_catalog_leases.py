"""The catalog's compile-leases page and its JSON: each lease's state as `neuronforge lease ls` says it
(live, stale, dead-on-this-host, released, unreadable), one page of `locks/` at a time, read-only, its
stored text escaped (markup, a lone surrogate) and credentials masked; a bad page parameter is a 400."""

from __future__ import annotations

import html
import signal
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

from neuronforge.artifacts import layout, leases
from neuronforge.stores import open_store
from tests.plugins.conftest import read_from

ROOT = Path(__file__).resolve().parents[2]
LIVE, DEAD, STALE, RELEASED, BROKEN, HOSTILE = ("1" * 64, "2" * 64, "3" * 64, "4" * 64, "5" * 64, "6" * 64)
SCRIPT = "<script>window.__pwned=1</script>"
SECRET = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYSECRET"


@pytest.fixture
def farm(tmp_path: Path) -> Path:
    root = tmp_path / "store"
    store = open_store(f"file://{root}")
    held = leases.try_acquire(store, LIVE, "worker-1:42:00000000", ttl_s=600)  # this process: running
    assert held is not None
    dead = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    lease = leases.try_acquire(store, DEAD, "worker-2:1:00000000", ttl_s=600)
    lease.owner = leases.Owner(lease.owner.host, dead.pid, leases.process_start(dead.pid))
    store.put_bytes(lease.record(), layout.lock_entry(DEAD))
    dead.send_signal(signal.SIGKILL)
    dead.wait()
    stale = leases.try_acquire(store, STALE, "far:7:00000000", ttl_s=0.001)
    stale.owner = leases.Owner(leases.Host("far", "other-boot", None), 7)
    store.put_bytes(stale.record(), layout.lock_entry(STALE))
    leases.release(store, leases.try_acquire(store, RELEASED, "done:1:00000000"))
    store.put_bytes(b"\xff not a lease " + SCRIPT.encode(), layout.lock_entry(BROKEN))
    forged = leases.try_acquire(store, HOSTILE, f"s3://AKIA:{SECRET}@bucket/{SCRIPT}caf\udce9", ttl_s=0.001)
    forged.owner = leases.Owner(leases.Host(SCRIPT, None, None), None)
    store.put_bytes(forged.record(), layout.lock_entry(HOSTILE))
    return root


@pytest.fixture
def client(plugin: ModuleType, farm: Path, monkeypatch: pytest.MonkeyPatch):
    from airflow.api_fastapi.core_api.security import get_user
    from fastapi.testclient import TestClient

    store = open_store(f"file://{farm}", must_exist=True)
    read_from(plugin, lambda: store)
    plugin.app.dependency_overrides[get_user] = lambda: None
    with TestClient(plugin.app) as client:
        yield client
    plugin.app.dependency_overrides.clear()


def test_the_leases_page_shows_each_state(client) -> None:
    page = client.get("/leases")
    assert page.status_code == 200, page.text
    text = page.text
    states = {key: text.split(f'id="lease-{key[:12]}"', 1)[1].split("</tr>", 1)[0] for key in (LIVE, DEAD, STALE)}
    assert ">live</b>" in states[LIVE] and ">dead-on-this-host</b>" in states[DEAD] and ">stale</b>" in states[STALE]
    assert "far:7" in states[STALE] and "every 10 s" in states[LIVE]
    assert "1 live, 2 stale, 1 dead-on-this-host, 1 released, 1 unreadable" in text
    assert SCRIPT not in text and "&lt;script&gt;" in text  # escaped, not dropped
    assert SECRET not in text and "\\udce9" in text  # masked; a lone surrogate shown escaped, no 500
    assert "<form" not in text and text.count("<button") == text.count('class="copy"')  # read-only: copy buttons only
    assert 'href="/neuronforge/leases" id="leases-link"' in client.get("/").text  # from the catalog's page


def test_no_leases_and_a_page_past_the_last_say_so(client) -> None:
    """A store with no leases (or a page after its last key) is a page that says so, not a 500."""
    for url in ("/leases?start_after=ffff", f"/leases?start_after={'f' * 64}&per_page=1"):
        page = client.get(url)
        assert page.status_code == 200 and '<p id="lease-summary">no leases</p>' in page.text, url
    assert client.get("/api/leases?start_after=ffff").json() == {"leases": [], "next_start_after": None}


def test_the_leases_json_pages_through_locks(client) -> None:
    first = client.get("/api/leases?limit=2").json()
    assert [(r["key"], r["state"]) for r in first["leases"]] == [(LIVE, "live"), (DEAD, "dead-on-this-host")]
    assert first["next_start_after"] == DEAD
    rest = client.get(f"/api/leases?start_after={DEAD}").json()
    assert [r["state"] for r in rest["leases"]] == ["stale", "released", "unreadable", "stale"]
    assert rest["next_start_after"] is None
    hostile = rest["leases"][-1]
    assert SECRET not in hostile["holder"] and hostile["holder"].endswith("caf\\udce9") and hostile["host"] == SCRIPT
    page = client.get("/leases?per_page=2")
    assert f"/neuronforge/leases?start_after={DEAD}&amp;per_page=2" in page.text


@pytest.mark.parametrize(
    ("url", "words"),
    [
        ("/leases?start_after=../x", 'start_after = "../x" is not a cache key'),
        ("/api/leases?limit=0", "limit = 0 is not allowed"),
        ("/leases?per_page=9999", "per_page = 9999 is not allowed"),
        ("/api/leases?start_after=" + "a" * 65, "start_after is 65 characters long"),
    ],
)
def test_a_bad_page_parameter_is_one_sentence(client, url: str, words: str) -> None:
    answer = client.get(url)
    assert answer.status_code == 400 and words in html.unescape(answer.text), answer.text
