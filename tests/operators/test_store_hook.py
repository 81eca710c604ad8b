"""`NeuronforgeStoreHook` (issue 55): every task, trigger and the catalog open the store through it, from
the Airflow Connection `neuronforge_default` when one is defined, else from the settings object; an S3
store with the identity and endpoint of the AWS Connection it names (the Amazon provider's `AwsBaseHook`).
Connections are given as Airflow reads them from the environment (`AIRFLOW_CONN_<ID>`, JSON), the S3
endpoint is a real one on 127.0.0.1."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest

from neuronforge.common.errors import InvalidInput, StoreNotFound
from neuronforge_airflow.hooks.store import NeuronforgeStoreHook, open_store, store_uri
from neuronforge_airflow.operators.scrub import run_scrub


def _connection(monkeypatch: pytest.MonkeyPatch, conn_id: str, conn_type: str, **fields) -> None:
    monkeypatch.setenv(f"AIRFLOW_CONN_{conn_id.upper()}", json.dumps({"conn_type": conn_type, **fields}))


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("NEURONFORGE_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("NEURONFORGE_STORE", raising=False)
    monkeypatch.delenv("AIRFLOW_CONN_NEURONFORGE_DEFAULT", raising=False)
    return tmp_path


def test_without_a_connection_the_settings_name_the_store_and_a_run_may_name_another(home: Path, monkeypatch) -> None:
    assert store_uri() == f"file://{home / 'home' / 'store'}"
    monkeypatch.setenv("NEURONFORGE_STORE", f"file://{home / 'set'}")
    assert store_uri() == f"file://{home / 'set'}"
    assert store_uri(f"file://{home / 'given'}") == f"file://{home / 'given'}"  # the run's form wins


def test_the_connections_store_is_the_deployments_and_a_task_uses_it(home: Path, monkeypatch) -> None:
    monkeypatch.setenv("NEURONFORGE_STORE", f"file://{home / 'not-this-one'}")
    _connection(monkeypatch, "neuronforge_default", "neuronforge", extra={"store": f"file://{home / 'connected'}"})
    assert store_uri() == f"file://{home / 'connected'}"
    with pytest.raises(StoreNotFound, match="connected does not exist"):  # read, never created
        run_scrub({})
    open_store().put_bytes(b"{}", "probe.json")  # a write makes it
    assert (home / "connected" / "probe.json").is_file() and not (home / "not-this-one").exists()
    assert run_scrub({})["checked"] == 0  # the scrub task read the connection's store


@pytest.mark.parametrize(
    "extra, said",
    [
        ({}, "names no store: set its extra's `store`"),
        ({"store": "file:///s", "bucket": "b"}, "unknown: bucket"),
        ({"store": ["file:///s"]}, "as text"),
    ],
)
def test_a_connection_that_names_no_store_is_one_line(home: Path, monkeypatch, extra: dict, said: str) -> None:
    _connection(monkeypatch, "neuronforge_default", "neuronforge", extra=extra)
    with pytest.raises(InvalidInput, match="Airflow connection neuronforge_default") as caught:
        store_uri()
    assert said in str(caught.value) and "\n" not in str(caught.value)


def test_an_s3_store_opens_with_the_aws_connections_identity_and_endpoint(
    home: Path, s3_endpoint: str, monkeypatch
) -> None:
    import boto3

    for var in ("AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3", "AWS_PROFILE"):
        monkeypatch.delenv(var, raising=False)
    bucket = f"nf-{uuid.uuid4().hex[:12]}"
    boto3.client(
        "s3", endpoint_url=s3_endpoint, region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="y"
    ).create_bucket(Bucket=bucket)
    _connection(
        monkeypatch,
        "nf_aws",
        "aws",
        login="AKIDNEURONFORGETEST",
        password="a-secret-the-logs-never-show",
        extra={"endpoint_url": s3_endpoint, "region_name": "us-east-1"},
    )
    _connection(
        monkeypatch,
        "neuronforge_default",
        "neuronforge",
        extra={"store": f"s3://{bucket}/farm", "aws_conn_id": "nf_aws"},
    )
    store = NeuronforgeStoreHook().get_conn()
    assert store.root_uri == f"s3://{bucket}/farm"
    assert store.client.meta.endpoint_url == s3_endpoint  # not the environment's (unset: it would be AWS)
    assert store.client._request_signer._credentials.access_key == "AKIDNEURONFORGETEST"
    store.put_bytes(b"through the connection", "probe.txt")
    assert store.get_bytes("probe.txt") == b"through the connection"


def test_the_catalog_reads_the_connections_store(home: Path, monkeypatch) -> None:
    from tests.plugins.conftest import load_plugin

    (home / "connected").mkdir()
    _connection(monkeypatch, "neuronforge_default", "neuronforge", extra={"store": f"file://{home / 'connected'}"})
    pages = load_plugin("neuronforge_catalog").pages
    assert pages.base.open_configured().root_uri == f"file://{home / 'connected'}"


def test_airflow_lists_the_connection_type_of_the_installed_package() -> None:
    """The `apache_airflow_provider` entry point (pyproject.toml): the UI's Connection form offers the type."""
    from airflow.providers_manager import ProvidersManager

    info = ProvidersManager().hooks.get("neuronforge")
    assert info is not None and info.hook_class_name == "neuronforge_airflow.hooks.store.NeuronforgeStoreHook"
    assert info.connection_id_attribute_name == "neuronforge_conn_id" and info.package_name == "neuronforge"
