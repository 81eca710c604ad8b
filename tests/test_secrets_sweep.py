"""Hostile secrets through every surface (issue 39): an AWS secret key holding `/`, `:`, `%2F` and `@`
in a URI's userinfo, and a presigned URL's query credentials (X-Amz-Credential, X-Amz-Signature,
X-Amz-Security-Token, token=), given as a store or a model to the CLI's commands (their error lines
and logs), to the DAG's task callables (their failures and log lines), to the trigger middleware, to
the catalog (its pages and its log), and to the failure records and manifests a run writes. Neither
the secret nor any of its `/`-separated fragments longer than 3 characters may appear anywhere; the
masking is the one rule, `common.secrets.mask_credentials`."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from types import SimpleNamespace

import pytest

from neuronforge.interfaces.cli import main

KEY_ID = "AKIAIOSFODNN7EXAMPLE"
SECRET = "wJalrXUtnFEMI/K7MDENG/bPxRfi:CY%2FEX@AMPLEKEY"
USERINFO = f"s3://{KEY_ID}:{SECRET}@bucket/store"
SIGNATURE, TOKEN, HF_TOKEN = "f0e1d2c3b4a5deadbeef", "FwoGZXIvYXdzEJrSESSIONTOKEN", "hf_sweepsecrettoken"
PRESIGNED = (
    f"https://bucket.s3.amazonaws.com/store?X-Amz-Credential={KEY_ID}%2F20260101%2Fus-east-1"
    f"&X-Amz-Signature={SIGNATURE}&X-Amz-Security-Token={TOKEN}&token={HF_TOKEN}"
)
HOSTILE = {"userinfo": USERINFO, "presigned": PRESIGNED}
# What must never be shown: the secret, its fragments, the key id, the query credentials.
PIECES = [SECRET, KEY_ID, SIGNATURE, TOKEN, HF_TOKEN, *(p for p in SECRET.split("/") if len(p) > 3)]


def assert_clean(*texts: str) -> None:
    for text in texts:
        for piece in PIECES:
            assert piece not in text, (piece, text[:500])


def _files_text(*folders: Path) -> str:
    """Everything written under `folders`, as text (the store's records, the work folder)."""
    out = []
    for folder in folders:
        for path in folder.rglob("*") if folder.exists() else ():
            if path.is_file():
                out.append(path.read_bytes().decode("utf-8", "replace"))
    return "\n".join(out)


# -- the CLI ----------------------------------------------------------------------------------------
TARGET_FLAGS = ["--instance", "inf2.xlarge", "--tp", "1", "--seq-len", "64"]


@pytest.mark.parametrize("kind", list(HOSTILE))
@pytest.mark.parametrize(
    "argv",
    [
        lambda uri, work: ["run", "--model", "builtin:tiny-llama", *TARGET_FLAGS, "--store", uri],
        lambda uri, work: ["run", "--model", uri, *TARGET_FLAGS, "--store", f"file://{work}/store"],
        lambda uri, work: ["ls", uri],
        lambda uri, work: ["show", "a" * 12, "--store", uri],
        lambda uri, work: ["verify", "a" * 12, "--store", uri, "--work-dir", work],
        lambda uri, work: ["verify", "--store", uri],
    ],
    ids=["run --store", "run --model", "ls", "show", "verify KEY", "verify --store"],
)
def test_cli_errors_and_logs_never_show_the_secret(
    argv, kind: str, tmp_path: Path, capsys, caplog, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("NEURONFORGE_HOME", str(tmp_path / "home"))
    caplog.set_level(logging.DEBUG)
    work = tmp_path / "work"
    code = main(argv(HOSTILE[kind], str(work)))
    out, err = capsys.readouterr()
    assert code != 0 and err.startswith("error: ") and "Traceback" not in err, (code, err)
    assert_clean(out, err, caplog.text, _files_text(tmp_path))


# -- the DAG's task callables -------------------------------------------------------------------------
@pytest.mark.parametrize("kind", list(HOSTILE))
def test_task_failures_and_logs_never_show_the_secret(kind: str, caplog, tmp_path: Path, monkeypatch) -> None:
    """A stage task handed a store URI carrying the secret fails with one masked line; the planning
    task given a model carrying it refuses it or names it masked; nothing in the task log carries it
    (the build states it hands on are Airflow's XCom: the model there is the user's own conf)."""
    from neuronforge.pipeline.buildstate import BuildState
    from neuronforge.profiles import parse_target
    from neuronforge_airflow.operators import compile_publish
    from tests.conftest import TARGET

    monkeypatch.setenv("NEURONFORGE_HOME", str(tmp_path / "home"))
    caplog.set_level(logging.DEBUG)
    state = BuildState(model="builtin:tiny-llama", target=parse_target(TARGET), store_uri=str(tmp_path / "store"))
    payload = {**state.model_dump(mode="json"), "store_uri": HOSTILE[kind]}
    with pytest.raises(Exception) as failed:
        compile_publish.run_stage_task("prepare", payload)
    assert "***" in str(failed.value) or "credentials" in str(failed.value), failed.value
    messages = [str(failed.value)]
    try:  # refused, or planned with the model named masked in its log lines and result
        result = compile_publish.expand_targets({**TARGET, "model": HOSTILE[kind], "store": str(tmp_path / "store")})
        messages.append(json.dumps([t for t in result["targets"]]))
    except Exception as exc:  # whatever it raises, its text is what Airflow logs
        messages.append(str(exc))
    assert_clean(*messages, caplog.text, _files_text(tmp_path))


# -- the trigger middleware ---------------------------------------------------------------------------
@pytest.mark.parametrize("kind", list(HOSTILE))
@pytest.mark.parametrize("field", ["store", "model", "profile", "max_new_tokens", "unknown"])
def test_the_trigger_middleware_never_shows_the_secret(kind: str, field: str) -> None:
    from tests.plugins.conftest import load_plugin
    from tests.plugins.test_forms_middleware import TRIGGER, body, http, run

    forms = load_plugin("neuronforge_forms")
    conf = {HOSTILE[kind]: 1} if field == "unknown" else {field: HOSTILE[kind]}
    inner, client = run(forms, http(TRIGGER), body(json.dumps({"conf": conf}).encode()))
    if inner.calls:  # passed on to Airflow as sent (a value the form takes): nothing quoted back
        return
    assert client.status == 400
    assert_clean(client.detail)


# -- the catalog -----------------------------------------------------------------------------------
@pytest.mark.parametrize("kind", list(HOSTILE))
def test_the_catalog_never_shows_the_secret(kind: str, caplog, monkeypatch: pytest.MonkeyPatch) -> None:
    """A NEURONFORGE_STORE carrying the secret: every page and JSON answer is the one 503 sentence,
    and the api-server's log line masks it."""
    from airflow.api_fastapi.core_api.security import get_user
    from fastapi.testclient import TestClient

    from tests.plugins.conftest import load_plugin

    caplog.set_level(logging.DEBUG)
    monkeypatch.setenv("NEURONFORGE_STORE", HOSTILE[kind])
    plugin = load_plugin("neuronforge_catalog")
    plugin.app.dependency_overrides[get_user] = lambda: None
    client = TestClient(plugin.app)
    for path in ("/", "/api/artifacts", f"/artifacts/{'a' * 12}", f"/api/artifacts/{'a' * 12}", "/channels?model=o/m"):
        answer = client.get(path)
        assert answer.status_code in (400, 503), (path, answer.status_code)
        assert_clean(answer.text)
    assert_clean(caplog.text)


# -- what a run writes ---------------------------------------------------------------------------------
@pytest.mark.parametrize("kind", list(HOSTILE))
def test_failure_records_never_hold_the_secret(kind: str, tmp_path: Path) -> None:
    """A stage error that quotes the secret (a library's message naming the URL it could not reach)
    is recorded masked: the failure record, the farm index, the catalog's row."""
    from neuronforge.artifacts import farm_index
    from neuronforge.farm.rows import farm_page, farm_row
    from neuronforge.spec.target import TargetSpec
    from neuronforge.stores import open_store
    from tests.conftest import TARGET

    store = open_store(f"file://{tmp_path / 'store'}")
    state = SimpleNamespace(model="builtin:tiny-llama", target=TargetSpec.parse(TARGET))
    error = OSError(f"could not read {HOSTILE[kind]}: connection reset")
    failure = farm_index.record_failure(store, "c" * 64, "fetch", error, "run", state)
    assert "***" in failure.error
    row = farm_row(store, "c" * 64)
    assert row is not None
    assert_clean(failure.error, _files_text(tmp_path), json.dumps([r.to_json() for r in farm_page(store).rows]))
    assert_clean(json.dumps(row[0].to_json()))


def test_a_catalog_refusal_quoting_a_parameter_masks_it(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """A refused query parameter is quoted back (`start_after = "…" is not a cache key`): the page and
    the JSON error show it masked, as every error the catalog answers (`_error`, the one place)."""
    from airflow.api_fastapi.core_api.security import get_user
    from fastapi.testclient import TestClient

    from tests.plugins.conftest import load_plugin

    monkeypatch.setenv("NEURONFORGE_STORE", f"file://{tmp_path / 'store'}")
    plugin = load_plugin("neuronforge_catalog")
    plugin.app.dependency_overrides[get_user] = lambda: None
    client = TestClient(plugin.app)
    for path in ("/leases", "/api/leases"):
        answer = client.get(path, params={"start_after": f"s3://{KEY_ID}:{SECRET[:20]}@b"})
        assert answer.status_code == 400 and "start_after" in answer.text, (path, answer.text)
        assert "s3://***@b" in answer.text.replace("&#34;", '"'), answer.text
        assert_clean(answer.text)


def test_a_trigger_refusal_is_masked_whatever_built_it() -> None:
    """The middleware's answer masks its sentence once (`_answer`), whatever check wrote it."""
    import asyncio

    from tests.plugins.conftest import load_plugin

    forms = load_plugin("neuronforge_forms")
    sent: list[dict] = []

    async def send(message: dict) -> None:
        sent.append(message)

    asyncio.run(forms._answer(send, 400, f"the store {USERINFO} cannot be used."))
    shown = json.loads(sent[1]["body"])["detail"]
    assert shown == "the store s3://***@bucket/store cannot be used."
    assert_clean(shown)
