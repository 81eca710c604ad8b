"""Every page of the catalog that reads a stored record × every hostile record class (issue 51): the
pages' row of the failure matrix's record table (`tests/reliability/test_matrix_records.py`), driven
through the catalog's own app in this process over a copy of the same store.

Each case plants one class (nested 10 000 deep, numbers out of range, NaN, a folder for the file,
UTF-16, a forged reference) at one record a page reads and asserts the page answers: 200 with the
damaged record shown as such (a damaged row, a damaged artifact page, an unreadable lease), or a
4xx/503 with one sentence — never a 500, never a traceback. `PAGE_READS` is held to the code as
`READS` is: each page runs once with the readers watched.
"""

from __future__ import annotations

import re
import shutil
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import pytest

from tests.reliability.test_matrix_records import ARTIFACT, INDEX, RECORDS, Case, Template, _plant, _watch, cases
from tests.reliability.test_matrix_records import template as template  # the module's fixture

# page -> what it reads (record kinds, as in `RECORDS`)
PAGES: dict[str, str] = {
    "catalog": "/?per_page=100",
    "artifacts API": "/api/artifacts?limit=100",
    "artifact page": f"/artifacts/{ARTIFACT}",
    "artifact API": f"/api/artifacts/{ARTIFACT}",
    "channels": "/channels?model=org/m1",
    "leases": "/leases",
    "leases API": "/api/leases",
}
ARTIFACT_READS = {
    "index entry",
    "artifact manifest",
    "release channel",
    "review state",
    "damage record",
    "attestations",
}
PAGE_READS: dict[str, set[str]] = {
    "catalog": INDEX | {"compile lease"},
    "artifacts API": INDEX | {"compile lease"},
    "artifact page": ARTIFACT_READS | INDEX,
    "artifact API": ARTIFACT_READS | INDEX,
    # each channel's build checked as a move checks it (`channels.pointer`); the speed charts: the farm index
    "channels": {"release channel", "review state", "index entry", "artifact manifest", "damage record"} | INDEX,
    "leases": {"compile lease"},
    "leases API": {"compile lease"},
}


@pytest.fixture(scope="module")
def client(plugin: ModuleType):
    from airflow.api_fastapi.core_api.security import get_user
    from fastapi.testclient import TestClient

    plugin.app.dependency_overrides[get_user] = lambda: None
    return TestClient(plugin.app, raise_server_exceptions=False)


@pytest.fixture
def copy(template: Template, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Callable[[], Case]:
    def make() -> Case:
        root, out = tmp_path / "sandbox" / "store", tmp_path / "sandbox" / "out" / "sweep.json"
        shutil.copytree(template.root, root)
        shutil.copytree(template.out.parent, out.parent)
        monkeypatch.setenv("NEURONFORGE_STORE", f"file://{root}")
        return Case(root, out, [])

    return make


def test_the_pages_table_names_only_planted_records() -> None:
    assert set(PAGES) == set(PAGE_READS)
    assert set().union(*PAGE_READS.values()) <= set(RECORDS)


@pytest.mark.parametrize("page", sorted(PAGES))
def test_each_page_reads_only_what_its_row_says(page: str, client, copy, monkeypatch: pytest.MonkeyPatch) -> None:
    copy()
    seen = _watch(monkeypatch)
    answer = client.get(f"/{PAGES[page].lstrip('/')}")
    assert answer.status_code == 200, answer.text[:300]
    unsaid = seen - PAGE_READS[page]
    assert not unsaid, f"{page} reads {sorted(unsaid)}: add them to its row of PAGE_READS"


CASES = cases(PAGE_READS)


@pytest.mark.parametrize(("page", "kind", "hostile"), CASES, ids=[f"{p}|{k}|{h}" for p, k, h in CASES])
def test_hostile_record_on_a_page(page: str, kind: str, hostile: str, client, copy) -> None:
    made = copy()
    _plant(kind, hostile, made)
    answer = client.get(f"/{PAGES[page].lstrip('/')}")
    assert answer.status_code in (200, 400, 404, 503), (answer.status_code, answer.text[:500])
    assert "Traceback" not in answer.text
    if answer.status_code != 200:
        is_json = answer.headers.get("content-type", "").startswith("application/json")
        detail = answer.json()["detail"] if is_json else re.findall(r"<p id='error'>(.*?)</p>", answer.text, re.S)[0]
        assert detail and "\n" not in detail, answer.text[:500]
    sandbox = made.root.parent
    assert not list(sandbox.parent.rglob("escape.json*")) and not (sandbox / "outside").exists()
