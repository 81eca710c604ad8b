"""`NeuronforgeStoreHook`: the one way a task, a trigger, a sensor or the catalog opens the store, from an
Airflow Connection — as the Amazon provider's `AwsBaseHook` opens AWS from one.

Which store: the URI a run names (its form's `store`, the URI a task was handed), else the Connection's
(`neuronforge_default`, type `neuronforge`: its extra's `store`), else the settings object's
(`NEURONFORGE_STORE`, else the local store) — so a deployment that configures nothing works as the CLI
does, and one that prefers Airflow's Connections (secrets backends, the UI) keeps the store there.

With which identity: an S3 store is opened with the AWS Connection the neuronforge Connection names
(extra `aws_conn_id`), through the Amazon provider's `AwsBaseHook` (its session: keys, role, profile;
its `endpoint_url`); without one, boto3's own chain (the environment, the instance's role). A URI is
refused if it carries keys (`stores.refuse_credentials`), and every line that names one is masked.

    {"conn_type": "neuronforge", "extra": {"store": "s3://bucket/prefix", "aws_conn_id": "aws_default"}}
"""

from __future__ import annotations

from functools import cached_property
from typing import TYPE_CHECKING, Any

from airflow.sdk import BaseHook
from airflow.sdk.exceptions import AirflowNotFoundException

from neuronforge.common import settings
from neuronforge.common.errors import InvalidInput

if TYPE_CHECKING:
    from neuronforge.stores import ArtifactStore


class NeuronforgeStoreHook(BaseHook):
    """Opens the store (`get_conn`) and names it (`store_uri`), from the Connection `neuronforge_conn_id`
    when it exists, else from the settings object."""

    conn_name_attr = "neuronforge_conn_id"
    default_conn_name = "neuronforge_default"
    conn_type = "neuronforge"
    hook_name = "neuronforge store"

    def __init__(self, neuronforge_conn_id: str = default_conn_name, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.neuronforge_conn_id = neuronforge_conn_id

    @classmethod
    def get_ui_field_behaviour(cls) -> dict[str, Any]:
        """The Connection form: only the extra matters (the store, the AWS Connection)."""
        return {
            "hidden_fields": ["host", "schema", "login", "password", "port"],
            "relabeling": {},
            "placeholders": {"extra": '{"store": "s3://bucket/prefix", "aws_conn_id": "aws_default"}'},
        }

    @cached_property
    def extra(self) -> dict[str, Any] | None:
        """The Connection's extra; None when no such Connection is defined (the settings decide)."""
        try:
            connection = self.get_connection(self.neuronforge_conn_id)
        except AirflowNotFoundException:
            return None
        extra = connection.extra_dejson
        unknown = ", ".join(sorted(set(extra) - {"store", "aws_conn_id"}))
        if unknown or not all(isinstance(extra.get(name, ""), str) for name in ("store", "aws_conn_id")):
            raise InvalidInput(
                f"Airflow connection {self.neuronforge_conn_id}: its extra takes `store` (a store URI) and "
                f"`aws_conn_id` (an AWS connection's id), as text" + (f"; unknown: {unknown}" if unknown else "")
            )
        return extra

    def store_uri(self, given: str | None = None) -> str:
        """`given` (a run's or a task's), else the Connection's store, else the settings' store."""
        if given:
            return given
        extra = self.extra
        if extra is None:
            return settings.store_uri()
        if not extra.get("store"):
            raise InvalidInput(
                f"Airflow connection {self.neuronforge_conn_id} names no store: set its extra's `store` to the "
                "store URI (s3://bucket/prefix, file:///path), or delete it to use NEURONFORGE_STORE"
            )
        return extra["store"]

    def get_conn(self, uri: str | None = None, *, must_exist: bool = False) -> ArtifactStore:
        """The store `store_uri(uri)`; an S3 one with the identity of the Connection's `aws_conn_id`."""
        from neuronforge.stores import open_store

        uri = self.store_uri(uri)
        options: dict[str, Any] = {}
        aws_conn_id = (self.extra or {}).get("aws_conn_id")
        if aws_conn_id and uri.startswith("s3://"):
            from airflow.providers.amazon.aws.hooks.base_aws import AwsBaseHook

            aws = AwsBaseHook(aws_conn_id=aws_conn_id, client_type="s3")
            options["session"] = aws.get_session()
            if aws.conn_config.endpoint_url:
                options["endpoint_url"] = aws.conn_config.endpoint_url
        return open_store(uri, must_exist=must_exist, **options)


def open_store(uri: str | None = None, *, must_exist: bool = False) -> ArtifactStore:
    """The store a task names (`uri`: given, else the deployment's), opened by the hook."""
    return NeuronforgeStoreHook().get_conn(uri, must_exist=must_exist)


def store_uri(given: str | None = None) -> str:
    """The URI of the store a run names (`given`), else the deployment's (the Connection, else the settings)."""
    return NeuronforgeStoreHook().store_uri(given)
