"""Any stored text renders; one bad record costs its own row (issue 39).

A store seeded by the pipeline's own writers with a model folder whose name is not UTF-8 (a lone
surrogate in Python: `os.fsdecode(b"caf\\xe9")`) — published by `stages.publish.publish`, failed by
`farm_index.record_failure` — and by an older writer that stored the surrogate as it was, plus a
page of the farm index holding, beside good rows, lines that are no row: a field of the wrong type
(every field of a row, one line each), a NUL, bytes that are not UTF-8, text that is not JSON; and
failure records and manifests of the wrong type in every field. The real api-server's catalog page
and JSON API, `neuronforge ls` and `show` answer 200 / exit 0 with the name escaped (`caf\\xe9`),
each bad line one damaged row with its reason, every other row intact; the artifact page and JSON of
a bad record say damaged, with the reason. The index-page path is also driven on the S3 endpoint.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import os
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from neuronforge.artifacts import farm_index, layout
from neuronforge.artifacts.farm_index import snapshot
from neuronforge.artifacts.localcache import file_entries, publish_tree
from neuronforge.interfaces.cli import main
from neuronforge.pipeline.stages.publish import PublishInput, publish
from neuronforge.profiles.cpu import PROFILE as CPU
from neuronforge.profiles.request import CompileRequest, cache_key
from neuronforge.records.farm_index import Entry
from neuronforge.records.payload_manifest import PayloadManifest
from neuronforge.records.smoke import SmokeRecord
from neuronforge.spec.source import ModelSource
from neuronforge.spec.target import TargetSpec
from neuronforge.spec.toolchain import Toolchain
from neuronforge.stores import ArtifactStore, open_store
from tests.conftest import TARGET
from tests.farm_index.publishers import key_of, manifest_only
from tests.farm_index.publishers import publish as publish_summary
from tests.plugins.conftest import http_get

CAFE = os.fsdecode(b"/srv/models/caf\xe9")  # "/srv/models/caf\udce9"
SHOWN = "/srv/models/caf\\xe9"  # what every surface shows of it
GOOD = [key_of("good", i) for i in range(3)]
# A value of the wrong type for each field of a farm-index row (`Entry`).
WRONG: dict[str, Any] = {
    "key": 7,
    "model": 7,
    "profile": ["cpu"],
    "target": {"slug": 1},
    "instance": 1.5,
    "published": "yes",
    "failure": {"stage": "x", "at": 1},
    "building": [1],
    "channels": [1, 2],
    "review": "approved",
    "damage": "manifest gone",
    "attested": [2, 33],
}
ROW_FIELDS = [f for f in Entry.model_fields if f != "unreadable"]
# Lines of a page that are no row, each with what its reason names.
LINES = {
    **{f"wrong {f}": (None, f) for f in ROW_FIELDS},
    "nul": (b'{"key": "%s", "model": "org/n\\u0000ul", "published": {"at": "t"}}', "NUL"),
    "not utf-8": (b'{"key": "%s", "model": "org/caf\xe9", "published": {"at": "t"}}', "not UTF-8"),
    "not json": (b'{"key": "%s", "model": ', "not JSON"),
    # outside the bounds of stored JSON (issue 51): each one damaged row, never a RecursionError or ValueError
    "nested": (b'{"key": "%s", "model": "org/nested", "published": ' + b"[" * 5000 + b"]" * 5000 + b"}", "32 deep"),
    "nan": (b'{"key": "%s", "model": "org/nan", "published": {"at": "t", "size_bytes": NaN}}', "NaN"),
    "huge": (b'{"key": "%s", "model": "org/huge", "published": {"at": "t", "size_bytes": 1e400}}', "not finite"),
}


def test_every_field_of_a_row_has_a_wrong_value() -> None:
    assert set(WRONG) == set(ROW_FIELDS)


def _publish_cafe(store: ArtifactStore, tmp: Path) -> str:
    """The artifact of a model in a folder whose name is not UTF-8, as the pipeline publishes it
    (`stages.publish.publish`, no compile). Returns its key."""
    source = ModelSource("local", CAFE, resolved_revision="r" * 12)
    request = CompileRequest(source, TargetSpec.parse({**TARGET, "profile": CPU.ref}), CPU)
    toolchain = Toolchain(CPU.backend.name, "1.0", "torch-inductor", "2.0")
    key = cache_key(request, toolchain)
    payload = tmp / "payload"
    (payload / "cpu-aoti").mkdir(parents=True)
    (payload / "cpu-aoti" / "model.pt2").write_bytes(b"x" * 10)
    staged = PayloadManifest(files=file_entries(payload))
    build = publish_tree(
        store, payload, layout.build_prefix(key, hashlib.sha256(staged.to_bytes()).hexdigest()), staged
    )
    smoke = {"passed": True, "reason": f"loaded {CAFE}", "time_to_first_token_s": 0.01, "per_token_s": 0.002}
    publish(
        PublishInput(
            request, toolchain, key, build, SmokeRecord.model_validate(smoke), {"formats": {"cpu-aoti": "cpu-aoti"}}
        ),
        store,
    )
    return key


def _forge_page_lines(store: ArtifactStore) -> dict[str, str]:
    """Append LINES to the first page of the farm index, its checksum and row count recomputed as a
    writer that forges pages would. Returns each line's name -> its key."""
    farm_index.compact(store)
    raw = json.loads(store.get_bytes(snapshot.HEAD))
    ref = raw["pages"][0]
    lines = gzip.decompress(store.get_bytes(ref["key"])).splitlines()
    keys = {}
    old = {"key": key_of("old writer", 0), "model": CAFE, "published": {"at": "t", "prefix": "p"}}
    lines.append(json.dumps(old).encode())  # "\udce9", as writers stored it before
    for name, (line, _) in LINES.items():
        key = key_of(f"forged {name}", 0)
        keys[name] = key
        if line is None:
            field = name.removeprefix("wrong ")
            row = {"key": key, "model": f"org/forged-{field}", "published": {"at": "t", "prefix": "p"}}
            row[field] = WRONG[field]
            line = json.dumps(row).encode()
        else:
            line = line.replace(b"%s", key.encode())
        lines.append(line)
    data = gzip.compress(b"\n".join(lines) + b"\n", mtime=0)
    store.put_bytes(data, ref["key"])
    ref.update(sha256=hashlib.sha256(data).hexdigest(), rows=len(lines))
    store.put_bytes(json.dumps(raw).encode(), snapshot.HEAD)
    return keys


def seed(store: ArtifactStore, tmp: Path) -> SimpleNamespace:
    for i, key in enumerate(GOOD):
        publish_summary(store, key, model=f"org/good-{i}")
    cafe = _publish_cafe(store, tmp)
    # an older writer stored the surrogate as it was (JSON's "\udce9"): still shown escaped
    old = key_of("old writer", 0)
    state = SimpleNamespace(model=CAFE, target=TargetSpec.parse({**TARGET, "sequence_length": 32}))
    failed = key_of("failed", 0)
    farm_index.record_failure(store, failed, "fetch", FileNotFoundError(f"no such folder {CAFE}"), "r\x00un", state)
    forged = _forge_page_lines(store)  # with the old writer's row
    index, manifest = manifest_only(store, old, model="org/old")
    store.write_json(index.manifest, {**manifest.as_stored(), "source": {"kind": "local", "location": CAFE}})
    return SimpleNamespace(store=store, cafe=cafe, old=old, failed=failed, forged=forged)


@pytest.fixture(scope="module")
def hostile(tmp_path_factory: pytest.TempPathFactory) -> SimpleNamespace:
    root = tmp_path_factory.mktemp("hostile-store") / "store"
    seeded = seed(open_store(f"file://{root}"), tmp_path_factory.mktemp("payload"))
    seeded.root = root
    return seeded


@pytest.fixture(scope="module")
def seeded_store(hostile: SimpleNamespace) -> Path:
    """The api-server of tests/plugins/conftest.py serves the hostile store."""
    return hostile.root


def test_the_writers_store_no_text_that_cannot_be_encoded(hostile: SimpleNamespace) -> None:
    """What the writers stored is UTF-8 with the name escaped, and reads back as the name."""
    from neuronforge.artifacts.failures import read_failure
    from neuronforge.artifacts.published import lookup
    from neuronforge.common.stored_text import original

    store = hostile.store
    raw = store.get_bytes(layout.failure_entry(hostile.failed))
    raw.decode("utf-8")
    assert b"\\\\udce9" not in raw and b"/srv/models/caf\\\\xe9" in raw and b"\\u0000" not in raw
    failure = read_failure(store, hostile.failed)
    assert failure is not None and failure.model == CAFE and failure.run_id == "r\x00un"
    found = lookup(store, hostile.cafe)
    assert found is not None and found.manifest.source.location == CAFE
    manifest = store.get_bytes(f"{found.prefix}/{layout.ARTIFACT_MANIFEST}")
    assert b"udce9" not in manifest and os.fsencode(original(json.loads(manifest)["source"]["location"])).endswith(
        b"caf\xe9"
    )
    for key in (snapshot.HEAD, "farm-index/tail.json"):
        if store.exists(key):
            assert b"udce9" not in store.get_bytes(key)


def _check_listing(rows: dict[str, dict[str, Any]], hostile: SimpleNamespace) -> None:
    """Every good row intact, the names escaped, each forged line one damaged row naming why."""
    for i, key in enumerate(GOOD):
        assert (rows[key]["status"], rows[key]["model"]) == ("published", f"org/good-{i}")
    assert rows[hostile.cafe]["status"] == "published" and SHOWN in rows[hostile.cafe]["model"]
    assert rows[hostile.old]["model"] == SHOWN
    for name, key in hostile.forged.items():
        what = LINES[name][1]
        if name == "wrong key":  # no key to show: the row is named by where it is
            (row,) = [r for r in rows.values() if r["model"] == "org/forged-key"]
            assert row[next(k for k in ("key", "cache_key") if k in row)].startswith("(farm-index/pages/")
        else:
            row = rows[key]
        assert row["status"] == "damaged", (name, row)
        assert what in row["message"], (name, row["message"])


def test_the_json_api_lists_every_row(server, token: str, hostile: SimpleNamespace) -> None:
    base, _ = server
    for status in (None, "failed", "damaged"):
        query = f"&status={status}" if status else ""
        code, body = http_get(f"{base}/neuronforge/api/artifacts?limit=1000{query}", token)
        assert code == 200, body[:300]
        rows = {r["key"]: r for r in json.loads(body)["rows"]}
        if status is None:
            _check_listing(rows, hostile)
        elif status == "failed":
            r = rows[hostile.failed]
            assert SHOWN in r["model"] and f"no such folder {SHOWN}" in r["message"]
            assert r["run_id"] == "r\\x00un"
    body.decode("utf-8")


def test_the_catalog_page_renders_with_the_damaged_rows_marked(server, token: str, hostile: SimpleNamespace) -> None:
    base, _ = server
    code, body = http_get(f"{base}/neuronforge/?per_page=500", token)
    assert code == 200, body[:300]
    page = body.decode("utf-8").replace("<wbr>", "")  # the pages break long names after / - _
    assert "caf\\xe9" in page and "udce9" not in page
    for i, key in enumerate(GOOD):
        assert f'id="artifact-{key[:12]}"' in page and f"org/good-{i}" in page
    for name, key in hostile.forged.items():
        start = page.index('id="artifact-(farm-index/' if name == "wrong key" else f'id="artifact-{key[:12]}"')
        row = page[start : page.index("</tr>", start)]
        assert 'class="damaged"' in row and LINES[name][1] in row, (name, row)


@pytest.mark.parametrize("which", ["cafe", "old", "failed"])
def test_each_artifact_page_and_its_json_render(server, token: str, hostile: SimpleNamespace, which: str) -> None:
    base, _ = server
    key = getattr(hostile, which)
    code, body = http_get(f"{base}/neuronforge/artifacts/{key}", token)
    assert code == 200 and "caf\\xe9" in body.decode("utf-8"), body[:300]
    code, body = http_get(f"{base}/neuronforge/api/artifacts/{key}", token)
    assert code == 200, body[:300]
    assert SHOWN in json.loads(body)["model"]


# -- records of the wrong type in every field: the artifact's own page ---------------------------------
FAILURE_WRONG = {"key": 1, "stage": [], "error": {}, "run_id": 2, "at": None, "model": 3, "target": [], "profile": 4}
FAILURE_WRONG["instance"] = {"a": 1}
MANIFEST_CORE = {"cache_key": 5, "source": "hub", "toolchain": [], "files": {"a": 1}}


def test_every_field_of_a_failure_record_has_a_wrong_value() -> None:
    from neuronforge.records.failure import FailureRecord

    assert set(FAILURE_WRONG) == set(FailureRecord.model_fields)


@pytest.fixture(scope="module")
def bad_records(hostile: SimpleNamespace) -> dict[str, str]:
    """Failure records and manifests forged with a wrong type in one field each (plus a NUL, bytes
    that are not UTF-8), written after the seeding. Returns name -> key."""
    store = hostile.store
    out = {}
    base = {"key": "", "stage": "compile", "error": "E", "run_id": "", "at": "t", "model": "org/m"}
    for field, value in FAILURE_WRONG.items():
        key = key_of(f"failure {field}", 0)
        store.put_bytes(json.dumps({**base, "key": key, field: value}).encode(), layout.failure_entry(key))
        out[f"failure {field}"] = key
    for name, raw in (
        ("failure nul", b'{"key": "K", "stage": "s\\u0000", "error": "", "run_id": "", "at": ""}'),
        ("failure not utf-8", b'{"key": "K", "stage": "caf\xe9", "error": "", "run_id": "", "at": ""}'),
    ):
        key = key_of(name, 0)
        store.put_bytes(raw.replace(b"K", key.encode()), layout.failure_entry(key))
        out[name] = key
    for field, value in MANIFEST_CORE.items():
        key = key_of(f"manifest {field}", 0)
        index, manifest = manifest_only(store, key, model="org/forged")
        store.write_json(index.manifest, {**manifest.as_stored(), field: value})
        out[f"manifest {field}"] = key
    key = key_of("manifest nul", 0)
    index, manifest = manifest_only(store, key, model="org/forged")
    store.write_json(index.manifest, {**manifest.as_stored(), "run_id": "a\x00b"})
    out["manifest nul"] = key
    return out


def test_a_bad_record_is_its_own_damaged_page(server, token: str, hostile: SimpleNamespace, bad_records) -> None:
    base, _ = server
    for name, key in bad_records.items():
        code, body = http_get(f"{base}/neuronforge/artifacts/{key}", token)
        assert code == 200 and ">damaged<" in body.decode("utf-8"), (name, code, body[:300])
        code, body = http_get(f"{base}/neuronforge/api/artifacts/{key}", token)
        assert code == 200, (name, body[:300])
        row = json.loads(body)
        field = name.split(" ", 1)[1]
        reason = {"nul": "NUL", "not utf-8": "not valid JSON"}.get(field, field)
        assert row["status"] == "damaged" and reason in row["message"], (name, row["message"])
    # and the rest of the farm is untouched
    code, body = http_get(f"{base}/neuronforge/api/artifacts?limit=1000", token)
    assert code == 200
    _check_listing({r["key"]: r for r in json.loads(body)["rows"]}, hostile)


# -- the CLI -------------------------------------------------------------------------------------------
def test_ls_lists_every_row(hostile: SimpleNamespace, capsys) -> None:
    uri = f"file://{hostile.root}"
    assert main(["ls", uri, "--limit", "500", "--json"]) == 0
    _check_listing({r["cache_key"]: r for r in json.loads(capsys.readouterr().out)}, hostile)
    assert main(["ls", uri, "--limit", "500"]) == 0
    out = capsys.readouterr().out
    assert f"{SHOWN}" in out and "udce9" not in out
    for name, key in hostile.forged.items():
        start = "(farm-index/" if name == "wrong key" else key[:12]
        line = next(x for x in out.splitlines() if x.startswith(start))
        assert "DAMAGED:" in line and LINES[name][1] in line, (name, line)
    assert main(["ls", uri, "--status", "failed", "--limit", "500"]) == 0
    assert f"{SHOWN}" in capsys.readouterr().out


def test_show_prints_the_name_escaped(hostile: SimpleNamespace, capsys) -> None:
    uri = f"file://{hostile.root}"
    assert main(["show", hostile.cafe, "--store", uri]) == 0
    out = capsys.readouterr().out
    assert f"model      {SHOWN}" in out
    assert main(["show", hostile.cafe, "--store", uri, "--json"]) == 0
    out = capsys.readouterr().out
    assert SHOWN in json.loads(out)["source"]["location"]
    for key in GOOD:
        assert main(["show", key, "--store", uri]) == 0
    capsys.readouterr()


def test_a_piped_cli_prints_the_name_escaped(hostile: SimpleNamespace) -> None:
    """Through a real pipe (stdout encoding strict): no UnicodeEncodeError, the escape printed."""
    import subprocess
    import sys

    repo = Path(__file__).resolve().parents[2]
    env = {**os.environ, "PYTHONPATH": str(repo), "PYTHONIOENCODING": "utf-8"}
    cli = str(Path(sys.executable).parent / "neuronforge")
    store = f"file://{hostile.root}"
    for args in (["ls", store, "--limit", "500"], ["show", hostile.cafe, "--store", store]):
        done = subprocess.run([cli, *args], capture_output=True, env=env, timeout=120)
        assert done.returncode == 0, done.stderr[-2000:]
        assert SHOWN.encode() in done.stdout and b"Traceback" not in done.stderr


# -- the index-page path on S3 ---------------------------------------------------------------------------
def test_the_listing_on_s3(s3_bucket: str, tmp_path: Path, capsys) -> None:
    from fastapi.testclient import TestClient

    from tests.plugins.conftest import load_plugin

    uri = f"s3://{s3_bucket}/farm"
    seeded = seed(open_store(uri), tmp_path)
    assert main(["ls", uri, "--limit", "500", "--json"]) == 0
    _check_listing({r["cache_key"]: r for r in json.loads(capsys.readouterr().out)}, seeded)
    # the catalog's own app, in process, over the S3 store (the api-server's auth replaced)
    from airflow.api_fastapi.core_api.security import get_user

    plugin = load_plugin("neuronforge_catalog")
    plugin.app.dependency_overrides[get_user] = lambda: None
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("NEURONFORGE_STORE", uri)
        client = TestClient(plugin.app)
        page = client.get("/?per_page=500")
        assert page.status_code == 200 and "caf\\xe9" in page.text
        api = client.get("/api/artifacts?limit=1000")
        assert api.status_code == 200
        _check_listing({r["key"]: r for r in api.json()["rows"]}, seeded)
