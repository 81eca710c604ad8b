"""Artifact stores: one interface (`ArtifactStore`), a local-folder and an S3 implementation.

`open_store(uri)` picks the implementation from the URI: `file:///abs/path` or a plain path for the
embedded default, `s3://bucket/prefix` for S3 (credentials and endpoint from the standard AWS
environment / profile, or a boto3 session handed in by the Airflow connection).
"""

from neuronforge.stores.base import ArtifactStore, NotFound, ObjectInfo, open_store

__all__ = ["ArtifactStore", "NotFound", "ObjectInfo", "open_store"]
