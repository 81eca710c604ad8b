"""Damage made visible (issue 39): whoever opens a published artifact and finds it damaged — its manifest
deleted, a file truncated or altered — records it in the farm index, so `ls`, the catalog's JSON and
`channels` show it damaged with the reason from then on, no channel takes it, an identical run rebuilds
it (and its publish clears the record), and the scrub (`verify --store --repair`) finds what nobody
opened, a bounded page at a time. On a local folder store and on the S3 endpoint."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from neuronforge.artifacts import farm_index, layout
from neuronforge.artifacts.farm_index import log as index_log
from neuronforge.interfaces.cli import ExitCode, main
from neuronforge.pipeline.runner import run_target
from neuronforge.stores import open_store
from tests.conftest import Compiled
from tests.releases.builds import MODEL, publish


@pytest.fixture(params=["file", "s3"])
def uri(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "file":
        return f"file://{tmp_path / 'store'}"
    return f"s3://{request.getfixturevalue('s3_bucket')}/farm"


def cli(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def _manifest(store, key: str) -> str:
    return json.loads(store.get_bytes(layout.index_entry(key)))["manifest"]


@pytest.fixture(scope="module")
def catalog():
    """The catalog plugin (loaded once, outside any test's captured output: Airflow configures its
    logging on import)."""
    from tests.plugins.conftest import load_plugin

    return load_plugin("neuronforge_catalog")


def _catalog_rows(plugin, monkeypatch: pytest.MonkeyPatch, store, **query: str) -> list[dict]:
    """The catalog's JSON API (`/api/artifacts`) over `store`, as the plugin serves it."""
    from urllib.parse import urlencode

    from airflow.api_fastapi.core_api.security import get_user
    from fastapi.testclient import TestClient

    from tests.plugins.conftest import read_from

    read_from(plugin, lambda: store)
    plugin.app.dependency_overrides[get_user] = lambda: None
    try:
        answer = TestClient(plugin.app).get(f"/api/artifacts?{urlencode(query)}")
    finally:
        plugin.app.dependency_overrides.clear()
    assert answer.status_code == 200, answer.text
    return answer.json()["rows"]


def test_a_deleted_manifest_is_refused_by_show_recorded_and_listed_damaged(
    uri: str, capsys, monkeypatch: pytest.MonkeyPatch, catalog
) -> None:
    store = open_store(uri)
    gone, whole = publish(store, 1), publish(store, 2)
    farm_index.compact(store)  # their rows in a page: a damage found by `show` still sorts onto its row
    store.delete_prefix(_manifest(store, gone))

    code, out, err = cli(capsys, "show", gone[:12], "--store", uri)
    # (the S3 endpoint's own request log may land on stderr too, when an earlier test configured logging)
    said = [line for line in err.splitlines() if line.startswith(("error:", "warning:"))]
    assert code == ExitCode.REJECTED and out == "" and len(said) == 1, err
    assert said[0].startswith(f"error: damaged: {gone[:12]} in {uri}: manifest gone: artifacts/")
    assert cli(capsys, "show", whole[:12], "--store", uri)[0] == ExitCode.OK

    code, out, _ = cli(capsys, "ls", "--store", uri)
    line = next(x for x in out.splitlines() if x.startswith(gone[:12]))
    assert code == ExitCode.OK and "DAMAGED: manifest gone: artifacts/" in line and "(found by show at " in line
    assert "DAMAGED" not in next(x for x in out.splitlines() if x.startswith(whole[:12]))
    assert out.splitlines()[-1] == f"2 published artifact(s) in {uri} (1 DAMAGED: each row says why)"

    code, out, _ = cli(capsys, "ls", "--status", "damaged", "--json", "--store", uri)
    (row,) = json.loads(out)
    assert row["cache_key"] == gone and row["status"] == "damaged" and row["model"] == MODEL
    assert row["damage"]["by"] == "show" and row["damage"]["reason"] == f"manifest gone: {_manifest(store, gone)}"

    rows = {r["key"]: r for r in _catalog_rows(catalog, monkeypatch, store)}
    assert rows[gone]["status"] == "damaged" and rows[gone]["message"].startswith("manifest gone: artifacts/")
    assert rows[whole]["status"] in ("published", "stale")  # built for cpu@1
    assert [r["key"] for r in _catalog_rows(catalog, monkeypatch, store, status="damaged")] == [gone]

    # from then on, whatever reads the index: a compaction, a rebuild from the store itself
    farm_index.compact(store)
    assert {e.key: e.status_class for e in farm_index.read_window(store).entries}[gone] == "damaged"
    farm_index.rebuild(store)
    assert {e.key: e.status_class for e in farm_index.read_window(store).entries}[gone] == "damaged"


def test_a_damage_is_recorded_once_however_often_it_is_found(tmp_path: Path, capsys) -> None:
    uri = f"file://{tmp_path / 'store'}"
    store = open_store(uri)
    key = publish(store, 1)
    store.delete_prefix(_manifest(store, key))
    for _ in range(3):
        assert cli(capsys, "show", key[:12], "--store", uri)[0] == ExitCode.REJECTED
    tail, _ = index_log.read_tail(store)
    assert tail is not None and [r.kind for r in tail.records if r.key == key] == ["published", "damaged"]


@pytest.mark.parametrize("where", ["file", "s3"])
def test_an_identical_run_refuses_a_truncated_artifact_records_it_and_rebuilds(
    where: str, compiled: Compiled, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """The pipeline's lookup (the first stage's cache-hit check) refuses the hit, records the damage, and
    the run builds again (from the compile cache) and publishes over it: the record is cleared."""
    if where == "file":
        store = open_store(f"file://{tmp_path / 'store'}")
        for o in compiled.store.list():
            store.put_bytes(compiled.store.get_bytes(o.key), o.key)
    else:
        store = open_store(f"s3://{request.getfixturevalue('s3_bucket')}/nf")
        assert run_target(str(compiled.checkpoint), compiled.target, store, compiled.work_dir).status == "published"
    key = compiled.first.key
    prefix = json.loads(store.get_bytes(layout.index_entry(key)))["prefix"]
    victim = next(o.key for o in store.list(prefix) if o.key.endswith(".safetensors"))
    store.put_bytes(store.get_bytes(victim)[:-7], victim)  # truncated

    out = run_target(str(compiled.checkpoint), compiled.target, store, compiled.work_dir)
    assert out.status == "published" and out.key == key and out.compiler_invocations == 0  # not a cache hit
    tail, _ = index_log.read_tail(store)
    assert tail is not None
    kinds = [(r.kind, (r.damage or {}).get("by")) for r in tail.records if r.key == key and r.kind != "building"]
    assert kinds[-2:] == [("damaged", "lookup"), ("published", None)], kinds
    damaged = next(r for r in tail.records if r.kind == "damaged")
    assert damaged.damage["reason"].startswith("1 of ") and victim.rsplit("/", 1)[1] in damaged.damage["reason"]
    assert damaged.model and damaged.target == compiled.target.slug  # named, so it sorts where its row is
    assert store.list(layout.DAMAGED) == []  # the publish cleared it
    assert {e.key: e.status_class for e in farm_index.read_window(store).entries}[key] == "published"
    assert run_target(str(compiled.checkpoint), compiled.target, store, compiled.work_dir).status == "cache-hit"


def test_no_channel_points_at_a_damaged_build(tmp_path: Path, capsys) -> None:
    uri = f"file://{tmp_path / 'store'}"
    store = open_store(uri)
    work = str(tmp_path / "verify")
    a, b, c = (publish(store, n) for n in (1, 2, 3))
    promote = ("promote", MODEL, "--profile", "cpu", "--channel", "candidate", "--store", uri, "--build")
    assert cli(capsys, *promote, a[:12])[0] == ExitCode.OK

    # same size, other bytes: only a re-hash sees it; `verify KEY` records it, and promote refuses
    weights = f"{json.loads(store.get_bytes(layout.index_entry(b)))['prefix']}/model/weights.bin"
    data = store.get_bytes(weights)
    store.put_bytes(bytes([data[0] ^ 1]) + data[1:], weights)
    code, out, _ = cli(capsys, "verify", b[:12], "--store", uri, "--work-dir", work)
    assert code == ExitCode.REJECTED and "model/weights.bin: sha256 mismatch" in out
    code, _, err = cli(capsys, *promote, b[:12])
    assert code == ExitCode.REJECTED and err.count("\n") == 1
    assert f"build {b[:12]} is damaged (1 file(s) do not match the manifest" in err and "found by verify" in err

    # a manifest gone: the move finds it, records it, refuses
    store.delete_prefix(_manifest(store, c))
    code, _, err = cli(capsys, *promote, c[:12])
    assert code == ExitCode.REJECTED and f"build {c[:12]} is damaged (manifest gone: " in err
    assert farm_index.read_damage(store, c).by == "promote"

    # a channel's own build, damaged later: `channels` says so; a rollback onto a damaged build is refused
    to_beta = ("promote", MODEL, "--profile", "cpu", "--channel", "beta", "--from", "candidate", "--store", uri)
    assert cli(capsys, *to_beta)[0] == ExitCode.OK  # beta: a
    assert cli(capsys, *promote, publish(store, 4)[:12])[0] == ExitCode.OK  # candidate: a -> 4
    store.delete_prefix(f"{json.loads(store.get_bytes(layout.index_entry(a)))['prefix']}/model")
    assert cli(capsys, "show", a[:12], "--store", uri)[0] == ExitCode.REJECTED
    code, out, _ = cli(capsys, "channels", MODEL, "--store", uri)
    assert code == ExitCode.OK and f"{a[:12]} " in out and "DAMAGED" in out
    assert f"points to the DAMAGED build {a[:12]} (1 of 2 file(s) missing" in out
    listing = json.loads(cli(capsys, "channels", MODEL, "--store", uri, "--json")[1])
    listed = {r["channel"]: r["damage"] for r in listing}
    assert listed["beta"]["by"] == "show" and listed["candidate"] is None
    code, _, err = cli(capsys, "rollback", MODEL, "--profile", "cpu", "--channel", "candidate", "--store", uri)
    assert code == ExitCode.REJECTED and f"build {a[:12]} is damaged" in err


def test_verify_store_repair_scrubs_a_page_at_a_time_and_counts(uri: str, capsys) -> None:
    """Nobody opened them: the scrub finds a deleted manifest and a truncated file, indexes again an
    artifact the index lost, clears a damage record whose artifact is whole — resuming page by page."""
    from neuronforge.artifacts.farm_index.entry import deleted_record
    from neuronforge.artifacts.published import Damage

    store = open_store(uri)
    keys = [publish(store, n) for n in range(1, 6)]
    gone, truncated, lost, healed = keys[:4]
    store.delete_prefix(_manifest(store, gone))
    weights = f"{json.loads(store.get_bytes(layout.index_entry(truncated)))['prefix']}/model/weights.bin"
    store.put_bytes(b"short", weights)
    farm_index.append(store, [deleted_record(lost)])  # the index lost it; its pointer and manifest are there
    farm_index.note_damaged(store, Damage(healed, "model/weights.bin missing (restored since)"), "ls --check")
    assert lost not in {e.key for e in farm_index.read_window(store).entries}

    totals: dict[str, int] = {}
    calls = []
    while True:
        code, out, _ = cli(capsys, "verify", "--store", uri, "--repair", "--page-size", "2", "--json")
        report = json.loads(out)
        calls.append((code, report["checked"]))
        for name in ("checked", "ok", "damaged", "marked", "re_indexed", "cleared"):
            totals[name] = totals.get(name, 0) + report[name]
        if report["done"]:
            break
    assert [n for _, n in calls] == [2, 2, 1]  # bounded pages, each call after the last one's cursor
    assert {c for c, _ in calls} <= {ExitCode.OK, ExitCode.REJECTED} and ExitCode.REJECTED in {c for c, _ in calls}
    assert totals == {"checked": 5, "ok": 3, "damaged": 2, "marked": 2, "re_indexed": 1, "cleared": 1}
    status = {e.key: e.status_class for e in farm_index.read_window(store).entries}
    assert status == {
        gone: "damaged",
        truncated: "damaged",
        lost: "published",
        healed: "published",
        keys[4]: "published",
    }

    code, out, _ = cli(capsys, "verify", "--store", uri, "--repair", "--cursor", "")  # a new pass, one line
    assert code == ExitCode.REJECTED
    assert out.splitlines()[-1] == (
        f"scrub of {uri}: checked 5, ok 3, damaged 2 (0 newly marked), re-indexed 0, cleared 0; pass complete"
    )
    code, _, err = cli(capsys, "verify", keys[0][:12], "--repair", "--store", uri)
    assert code == ExitCode.USAGE and "--repair scrubs a whole store" in err


def test_listings_stay_o_page_with_damaged_rows_on_s3(s3_bucket: str, monkeypatch: pytest.MonkeyPatch) -> None:
    from neuronforge.artifacts.farm_index import snapshot
    from neuronforge.artifacts.published import examine
    from neuronforge.farm.rows import FarmQuery, farm_page
    from tests.farm_index.publishers import key_of
    from tests.farm_index.publishers import publish as index_publish

    monkeypatch.setattr(snapshot, "PAGE_ROWS", 50)
    store = open_store(f"s3://{s3_bucket}/counted")
    keys = [key_of("d", i) for i in range(300)]
    for key in keys:
        index_publish(store, key)
    for key in keys[100:103]:  # found damaged (their manifests gone), recorded in the tail
        store.delete_prefix(_manifest(store, key))
        farm_index.note_damaged(store, examine(store, key), "show")
    requests: list[str] = []
    store.client.meta.events.register("before-send.s3", lambda request, **_: requests.append(request.url))
    page = farm_page(store, FarmQuery(), offset=0, limit=20)
    assert len(page.rows) == 20 and len(requests) <= 4, requests  # head, tail, one page
    requests.clear()
    damaged = farm_page(store, FarmQuery(status="damaged"), offset=0, limit=20)
    assert sorted(r.key for r in damaged.rows) == sorted(keys[100:103])
    assert len(requests) <= 3, requests  # head, tail: no page holds a damaged row yet
    farm_index.compact(store)
    requests.clear()
    damaged = farm_page(store, FarmQuery(status="damaged"), offset=0, limit=20)
    assert sorted(r.key for r in damaged.rows) == sorted(keys[100:103]) and all(r.revision for r in damaged.rows)
    assert len(requests) <= 2 + 3, requests  # head, tail, the pages that hold them (of 6)
