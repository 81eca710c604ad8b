"""`S3Store`: artifacts in an S3 bucket (or any S3-compatible endpoint).

Uploads and server-side copies go through boto3's transfer manager (s3transfer): multipart above
`multipart_threshold`, parts and files in parallel on one thread pool. Downloads are parallel ranged
GETs written in place (`s3_download.RangedDownload`: a third of s3transfer's CPU per byte, measured),
each object to a temporary name and renamed. Every transfer is measured (`ArtifactStore.measured`).
Integrity: the client computes and sends a CRC checksum with every upload and validates the
checksum S3 returns on a whole-object download (`request_checksum_calculation` /
`response_checksum_validation`); a ranged one is pinned to the object's ETag (`If-Match`), and the
readers that need it re-hash what they downloaded against their manifest (`localcache.materialize`).

Endpoint and credentials come from the standard AWS chain (environment, profile, instance role;
`AWS_ENDPOINT_URL` / `AWS_ENDPOINT_URL_S3` for a non-AWS endpoint), or from a boto3 session that the
Airflow operators build from an `aws_default`-style connection. Nothing here logs credentials.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import os
import threading
import uuid
from pathlib import Path
from typing import Any

import boto3
from boto3.s3.transfer import TransferConfig, create_transfer_manager
from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError, NoCredentialsError
from s3transfer.exceptions import RetriesExceededError
from s3transfer.subscribers import BaseSubscriber

from neuronforge.common.errors import StoreError, StoreUnreachable
from neuronforge.common.progress import Step
from neuronforge.common.transfers import DOWNLOAD, UPLOAD
from neuronforge.stores.base import (
    ArtifactStore,
    NotFound,
    ObjectInfo,
    clean_key,
    common_prefix,
    inside,
    join,
    local_files,
    transfer_step,
)

MIB = 1024 * 1024
_CLIENTS: dict[tuple[Any, ...], Any] = {}
_CLIENTS_LOCK = threading.Lock()


def _shared_client(endpoint_url: str | None, max_concurrency: int) -> Any:
    """One client per endpoint and pool size for the process (boto3 clients are thread-safe): the
    credential chain is walked once, not once per store opened — each walk costs a lookup and
    logs which provider answered."""
    with _CLIENTS_LOCK:
        # Which identity the environment names now: a changed profile or key gets its own client.
        # A corrected secret for the same key id too (kept as a digest: this dict holds no secret).
        secret = hashlib.sha256(os.environ.get("AWS_SECRET_ACCESS_KEY", "").encode()).hexdigest()
        identity = (os.environ.get("AWS_PROFILE"), os.environ.get("AWS_ACCESS_KEY_ID"), secret)
        key = (endpoint_url, max_concurrency, *identity)
        if key not in _CLIENTS:
            _CLIENTS[key] = boto3.session.Session().client(
                "s3", endpoint_url=endpoint_url, config=_config(max_concurrency)
            )
        return _CLIENTS[key]


def _config(max_concurrency: int) -> Config:
    return Config(
        max_pool_connections=max(10, max_concurrency * 2),
        retries={"mode": "standard", "max_attempts": 5},
        request_checksum_calculation="when_supported",
        response_checksum_validation="when_supported",
    )


def _env_endpoint() -> str | None:
    """The endpoint the environment names now (part of the shared client's identity, so a changed
    AWS_ENDPOINT_URL — tests, several endpoints in one process — gets its own client)."""
    return os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL") or None


class _Progress(BaseSubscriber):
    """The transfer manager's byte callbacks (every part, every thread) into a progress step."""

    def __init__(self, step: Step) -> None:
        self.step = step

    def on_progress(self, future: Any, bytes_transferred: int, **kwargs: Any) -> None:
        self.step.advance(bytes_transferred)  # negative when a part is retried: the count stays true


def _code(exc: ClientError) -> str:
    return str(exc.response.get("Error", {}).get("Code", ""))


# 403 answers: the credentials themselves refused, or valid but not allowed.
_REJECTED = frozenset(
    {"InvalidAccessKeyId", "SignatureDoesNotMatch", "InvalidToken", "ExpiredToken", "InvalidClientTokenId"}
)
_DENIED = frozenset({"AccessDenied", "AllAccessDisabled", "AccountProblem"})


def _status(exc: ClientError) -> int:
    return int(exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0))


class S3Store(ArtifactStore):
    def __init__(
        self,
        bucket: str,
        prefix: str = "",
        *,
        session: boto3.session.Session | None = None,
        client: Any = None,
        endpoint_url: str | None = None,
        max_concurrency: int = 8,
        multipart_threshold: int = 16 * MIB,
        multipart_chunksize: int = 64 * MIB,
        io_chunksize: int = 8 * MIB,
    ) -> None:
        self.bucket = bucket
        self.prefix = prefix.strip("/")
        if client is None and session is not None:
            client = session.client("s3", endpoint_url=endpoint_url, config=_config(max_concurrency))
        elif client is None:
            client = _shared_client(endpoint_url or _env_endpoint(), max_concurrency)
        self.client = client
        self.transfer_config = TransferConfig(
            multipart_threshold=multipart_threshold,
            multipart_chunksize=multipart_chunksize,
            max_concurrency=max_concurrency,
            # Measured with bench/transfer.py on 2 cores: 8 MiB reads (s3transfer's default is
            # 256 KiB) and 64 MiB parts on 8 threads download 3-5x faster than 32 MiB parts on 20
            # threads, which thrash the disk and the GIL; uploads are unaffected.
            io_chunksize=io_chunksize,
            use_threads=True,
        )
        # downloads: `s3_download.RangedDownload`, as many parts at once, of the same size
        self.download_concurrency, self.download_part_size = max_concurrency, multipart_chunksize

    def transfer_settings(self, direction: str) -> tuple[str, int, int]:
        if direction == DOWNLOAD:
            return "s3 ranged GET", self.download_concurrency, self.download_part_size
        return "s3transfer", self.transfer_config.max_concurrency, self.transfer_config.multipart_chunksize

    @classmethod
    def from_uri(cls, uri: str, **kwargs: Any) -> S3Store:
        bucket, _, prefix = uri.removeprefix("s3://").partition("/")
        if not bucket:
            raise StoreError(f"S3 store URI {uri!r} has no bucket")
        return cls(bucket, prefix, **kwargs)

    @property
    def root_uri(self) -> str:
        return f"s3://{self.bucket}/{self.prefix}" if self.prefix else f"s3://{self.bucket}"

    def _key(self, key: str) -> str:
        return join(self.prefix, clean_key(key))

    def _rel(self, full_key: str) -> str:
        return full_key[len(self.prefix) + 1 :] if self.prefix else full_key

    def _wrap(self, exc: ClientError, key: str) -> StoreError:
        if _code(exc) == "NoSuchBucket":  # on any request, not only the probe: every command says the same
            return self._no_bucket()
        if _code(exc) in _REJECTED or _code(exc) in _DENIED:
            return self._refused(_code(exc))
        if _code(exc) in ("NoSuchKey", "404", "NotFound") or _status(exc) == 404:
            return NotFound(f"{self.uri(key)} does not exist")
        return StoreError(f"S3 {_code(exc) or _status(exc)} on {self.uri(key)}: {exc}")

    def _endpoint(self) -> str:
        return str(getattr(self.client.meta, "endpoint_url", "") or "AWS S3")

    def _unusable(self, exc: Exception) -> StoreError:
        """A failure of the connection or the credentials, as one line naming the store and the fix
        (botocore's own messages name the endpoint URL, never a credential)."""
        if isinstance(exc, NoCredentialsError):
            return StoreError(
                f"no AWS credentials for {self.root_uri}: set AWS_PROFILE or AWS_ACCESS_KEY_ID / "
                "AWS_SECRET_ACCESS_KEY, or use the Airflow connection"
            )
        return StoreUnreachable(
            f"cannot reach the S3 endpoint {self._endpoint()} for {self.root_uri} ({exc}); check that it is "
            "running and that AWS_ENDPOINT_URL names it"
        )

    def _refused(self, code: str) -> StoreError:
        """S3 answered 403: the credentials were rejected (unknown key, wrong secret, expired token) or
        lack the permission. One line naming the endpoint, the store and the fix; never the key (the
        error's own text is left out: some servers echo the access key id or the string to sign)."""
        where = f"the S3 endpoint {self._endpoint()}"
        creds = "check AWS_PROFILE or AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY (or the Airflow connection)"
        grant = f"grant s3:ListBucket, s3:GetObject and s3:PutObject on {self.root_uri}"
        if code in _REJECTED:
            return StoreError(
                f"{where} rejected these credentials for {self.root_uri} ({code}: the access key is unknown, the "
                f"secret does not match it, or the session token expired): {creds}"
            )
        if code in _DENIED:
            return StoreError(
                f"{where} denied these credentials access to {self.root_uri} ({code}): {grant}, or {creds}"
            )
        return StoreError(
            f"{where} rejected or denied these credentials for {self.root_uri} (HTTP 403: an unknown access key, a "
            f"wrong secret, or no permission on the bucket): {creds}; or {grant}"
        )

    def _no_bucket(self) -> StoreError:
        return StoreError(
            f"bucket {self.bucket!r} does not exist at {self._endpoint()}: create it "
            f"(aws s3 mb s3://{self.bucket}) or correct the store URI {self.root_uri}"
        )

    def probe(self, write: bool) -> None:
        """The bucket exists and answers (and, with `write`, accepts a PUT), checked with one or two
        requests before a run downloads anything."""
        try:
            self.client.head_bucket(Bucket=self.bucket)
        except ClientError as exc:
            if _status(exc) == 404 or _code(exc) in ("404", "NoSuchBucket", "NotFound"):
                raise self._no_bucket() from None
            if _status(exc) == 403:  # HEAD has no body: which refusal it was is not said
                raise self._refused(_code(exc)) from None
            raise self._wrap(exc, "") from None
        if not write:
            return
        probe = f".nf-tmp-probe-{uuid.uuid4().hex}"
        try:
            self.client.put_object(Bucket=self.bucket, Key=self._key(probe), Body=b"")
        except ClientError as exc:
            raise StoreError(
                f"cannot write to {self.root_uri} (S3 {_code(exc) or _status(exc)}): grant s3:PutObject on it, "
                "or use a store these credentials may write"
            ) from None
        with contextlib.suppress(ClientError):  # no delete permission: the empty probe is harmless
            self.client.delete_object(Bucket=self.bucket, Key=self._key(probe))

    # -- single objects ----------------------------------------------------------------------
    def put_file(self, local: Path, key: str) -> None:
        size = local.stat().st_size
        with (
            self.measured(UPLOAD, self.uri(key), size, 1),
            transfer_step(f"uploading {local.name} to {self.uri(key)}", size) as step,
            create_transfer_manager(self.client, self.transfer_config) as mgr,
        ):
            try:
                mgr.upload(str(local), self.bucket, self._key(key), subscribers=[_Progress(step)]).result()
            except ClientError as exc:
                raise self._wrap(exc, key) from None

    def get_file(self, key: str, local: Path) -> None:
        # the size is not known before the HEAD: a small one-object step
        with self.measured(DOWNLOAD, self.uri(key), 0, 1) as done:
            done.bytes = self._download([(key, local, -1, "")], key, Step(f"downloading {key}", 0, "B"))

    def put_bytes(self, data: bytes, key: str) -> None:
        try:
            self.client.put_object(Bucket=self.bucket, Key=self._key(key), Body=data)
        except ClientError as exc:
            raise self._wrap(exc, key) from None

    def get_bytes(self, key: str) -> bytes:
        try:
            return self.client.get_object(Bucket=self.bucket, Key=self._key(key))["Body"].read()
        except ClientError as exc:
            raise self._wrap(exc, key) from None

    def exists(self, key: str) -> bool:
        try:
            self.client.head_object(Bucket=self.bucket, Key=self._key(key))
            return True
        except ClientError as exc:
            if isinstance(self._wrap(exc, key), NotFound):
                return False
            raise self._wrap(exc, key) from None

    def put_if_absent(self, data: bytes, key: str) -> bool:
        try:
            self.client.put_object(Bucket=self.bucket, Key=self._key(key), Body=data, IfNoneMatch="*")
            return True
        except ClientError as exc:
            # 412: the key exists. 409: a concurrent conditional write to it is in flight and wins.
            if _code(exc) in ("PreconditionFailed", "ConditionalRequestConflict") or _status(exc) in (409, 412):
                return False
            raise self._wrap(exc, key) from None

    def read_versioned(self, key: str) -> tuple[bytes, str]:
        try:
            obj = self.client.get_object(Bucket=self.bucket, Key=self._key(key))
        except ClientError as exc:
            raise self._wrap(exc, key) from None
        return obj["Body"].read(), obj["ETag"]

    def read_capped(self, key: str, max_bytes: int) -> tuple[bytes, str]:
        """One GET read no further than `max_bytes + 1` bytes (the rest of a larger object is never
        downloaded: its connection is closed); one within the cap is read to its end, so the checksum
        S3 returns is still validated."""
        try:
            obj = self.client.get_object(Bucket=self.bucket, Key=self._key(key))
        except ClientError as exc:
            raise self._wrap(exc, key) from None
        body = obj["Body"]
        data = body.read(max_bytes + 1)
        if len(data) > max_bytes:
            body.close()
        else:
            data += body.read()  # empty: reaching the end validates the checksum and the length
        return data, obj["ETag"]

    def replace_if_version(self, data: bytes, key: str, version: str) -> bool:
        """S3 conditional write: `If-Match: <ETag>` (412 when another writer got there first)."""
        try:
            self.client.put_object(Bucket=self.bucket, Key=self._key(key), Body=data, IfMatch=version)
            return True
        except ClientError as exc:
            if _code(exc) in ("PreconditionFailed", "ConditionalRequestConflict", "NoSuchKey") or _status(exc) in (
                404,
                409,
                412,
            ):
                return False
            raise self._wrap(exc, key) from None

    # -- listings ---------------------------------------------------------------------------------
    def _list_full(self, full_prefix: str) -> list[ObjectInfo]:
        out = []
        paginator = self.client.get_paginator("list_objects_v2")
        try:
            for page in paginator.paginate(Bucket=self.bucket, Prefix=full_prefix):
                out.extend(self._info(obj) for obj in page.get("Contents", []))
        except ClientError as exc:
            raise self._wrap(exc, full_prefix) from None
        return out

    def list(self, prefix: str = "") -> list[ObjectInfo]:
        if not prefix.strip("/"):
            return sorted(self._list_full(f"{self.prefix}/" if self.prefix else ""), key=lambda o: o.key)
        key = self._key(prefix)
        out = self._list_full(key + "/")
        if not out and self.exists(prefix):
            head = self.client.head_object(Bucket=self.bucket, Key=key)
            modified = head.get("LastModified")
            when = modified.timestamp() if hasattr(modified, "timestamp") else None
            out = [ObjectInfo(clean_key(prefix), int(head["ContentLength"]), head.get("ETag", "").strip('"'), when)]
        return sorted(out, key=lambda o: o.key)

    def list_page(self, prefix: str, start_after: str = "", limit: int = 1000) -> list[ObjectInfo]:
        full = f"{self._key(prefix)}/" if prefix.strip("/") else (f"{self.prefix}/" if self.prefix else "")
        kwargs: dict[str, Any] = {"Bucket": self.bucket, "Prefix": full, "MaxKeys": max(1, min(limit, 1000))}
        if start_after:
            kwargs["StartAfter"] = self._key(start_after)
        try:
            page = self.client.list_objects_v2(**kwargs)
        except ClientError as exc:
            raise self._wrap(exc, prefix) from None
        return [self._info(o) for o in page.get("Contents", [])][:limit]

    def _info(self, obj: dict[str, Any]) -> ObjectInfo:
        """One entry of a ListObjectsV2 answer."""
        modified = obj.get("LastModified")
        when = modified.timestamp() if hasattr(modified, "timestamp") else None
        return ObjectInfo(self._rel(obj["Key"]), int(obj["Size"]), obj.get("ETag", "").strip('"'), when)

    def delete_prefix(self, prefix: str) -> int:
        objects = self.list(prefix)
        for i in range(0, len(objects), 1000):
            batch = [{"Key": self._key(o.key)} for o in objects[i : i + 1000]]
            self.client.delete_objects(Bucket=self.bucket, Delete={"Objects": batch, "Quiet": True})
        return len(objects)

    # -- trees ------------------------------------------------------------------------------------
    def put_tree(self, local_dir: Path, prefix: str, exclude: tuple[str, ...] = ()) -> list[ObjectInfo]:
        files = local_files(local_dir, exclude)
        total = sum(path.stat().st_size for path, _ in files)
        with (
            self.measured(UPLOAD, self.uri(prefix), total, len(files)),
            transfer_step(f"uploading {len(files)} files to {self.uri(prefix)}", total) as step,
            create_transfer_manager(self.client, self.transfer_config) as mgr,
        ):
            bytes_done = [_Progress(step)]
            futures = [
                mgr.upload(str(path), self.bucket, self._key(join(prefix, rel)), subscribers=bytes_done)
                for path, rel in files
            ]
            try:
                for future in futures:
                    future.result()
            except ClientError as exc:
                raise self._wrap(exc, prefix) from None
        return [ObjectInfo(join(prefix, rel), path.stat().st_size) for path, rel in files]

    def get_files(self, pairs: list[tuple[str, Path]], total_bytes: int = 0) -> None:
        where = self.uri(common_prefix([k for k, _ in pairs]))
        with (
            self.measured(DOWNLOAD, where, 0, len(pairs)) as done,
            transfer_step(f"downloading {len(pairs)} files from {where}", total_bytes) as step,
        ):
            jobs = [(key, dest, -1, "") for key, dest in pairs]
            done.bytes = self._download(jobs, pairs[0][0] if pairs else "", step)

    def copy_keys(self, pairs: list[tuple[str, str]]) -> None:
        """Server-side copies through the transfer manager (CopyObject, or UploadPartCopy in parts
        above the multipart threshold, in parallel): no byte goes through this host."""
        with create_transfer_manager(self.client, self.transfer_config) as mgr:
            futures = [
                (src, mgr.copy({"Bucket": self.bucket, "Key": self._key(src)}, self.bucket, self._key(dst)))
                for src, dst in pairs
            ]
            for src, future in futures:
                try:
                    future.result()
                except ClientError as exc:
                    raise self._wrap(exc, src) from None

    def get_tree(self, prefix: str, local_dir: Path) -> list[ObjectInfo]:
        objects = self.list(prefix)
        base = clean_key(prefix)
        total = sum(o.size for o in objects)
        jobs = [(o.key, inside(local_dir, o.key[len(base) + 1 :]), o.size, o.etag) for o in objects]
        with (
            self.measured(DOWNLOAD, self.uri(prefix), total, len(objects)),
            transfer_step(f"downloading {len(objects)} files from {self.uri(prefix)}", total) as step,
        ):
            self._download(jobs, prefix, step)
        return objects

    def _download(self, jobs: list[tuple[str, Path, int, str]], where: str, step: Step) -> int:
        """`RangedDownload` of (key, dest, size or -1, etag) jobs; the bytes written."""
        from neuronforge.stores.s3_download import RangedDownload

        full = [(self._key(key), dest, size, f'"{etag}"' if etag else "") for key, dest, size, etag in jobs]
        concurrency, part_size = self.download_concurrency, self.download_part_size
        download = RangedDownload(self.client, self.bucket, concurrency, part_size, step.advance)
        try:
            return sum(download.run(full))
        except ClientError as exc:
            if _code(exc) == "PreconditionFailed" or _status(exc) == 412:
                raise StoreError(
                    f"an object under {self.uri(where)} was replaced while it was being downloaded; run again"
                ) from None
            raise self._wrap(exc, self._rel(getattr(exc, "failed_key", "")) or where) from None


def _translated(method: Any) -> Any:
    """Connection and credential failures (botocore raises them outside `ClientError`, s3transfer
    wraps them in `RetriesExceededError`) become a `StoreError` naming the store, never a traceback."""

    @functools.wraps(method)
    def wrapper(self: S3Store, *args: Any, **kwargs: Any) -> Any:
        try:
            return method(self, *args, **kwargs)
        except (BotoCoreError, RetriesExceededError) as exc:
            raise self._unusable(exc) from None

    return wrapper


for _name in (
    "probe",
    "put_file",
    "get_file",
    "get_files",
    "put_bytes",
    "get_bytes",
    "exists",
    "put_if_absent",
    "read_versioned",
    "read_capped",
    "replace_if_version",
    "list",
    "list_page",
    "delete_prefix",
    "put_tree",
    "get_tree",
    "copy_keys",
):
    setattr(S3Store, _name, _translated(getattr(S3Store, _name)))
