"""The instrument of `bench/bytes_moved.py`: its endpoint counts exactly the bytes it serves (GET
response bodies, ranged and whole) and receives (PUT bodies, multipart parts), per host."""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench" / "bytes_moved.py"
MIB = 1024 * 1024


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location("bytes_moved", BENCH)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def test_counts_get_and_put_bodies_per_host(bench, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import boto3
    from boto3.s3.transfer import TransferConfig

    for var in ("AWS_ENDPOINT_URL", "AWS_PROFILE", "AWS_SESSION_TOKEN"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "x")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    counter, server, endpoint = bench.start_endpoint()
    try:

        def client(host: str):
            return boto3.session.Session(aws_access_key_id=host).client("s3", endpoint_url=endpoint)

        bucket = bench.BUCKET
        small = client("setup")
        small.create_bucket(Bucket=bucket)
        big = tmp_path / "big"
        big.write_bytes(os.urandom(12 * MIB + 5))
        parts = TransferConfig(multipart_threshold=5 * MIB, multipart_chunksize=5 * MIB)
        small.upload_file(str(big), bucket, "models/m/big.safetensors", Config=parts)  # 3 parts
        small.put_object(Bucket=bucket, Key="store/index/k.json", Body=b"{}")
        setup = counter.take()
        puts = [r for r in setup if r.method == "PUT" and r.key.startswith(f"{bucket}/")]
        assert sum(r.bytes_in for r in puts) == 12 * MIB + 5 + 2
        assert {r.host for r in setup} == {"setup"}

        client("host-a").download_file(bucket, "models/m/big.safetensors", str(tmp_path / "a"), Config=parts)
        client("host-b").get_object(Bucket=bucket, Key="store/index/k.json")["Body"].read()
        gets = [r for r in counter.take() if r.method == "GET"]
        assert sum(r.bytes_out for r in gets if r.host == "host-a") == 12 * MIB + 5  # ranged GETs add up
        assert sum(r.bytes_out for r in gets if r.host == "host-b") == 2
        assert all(bench.is_checkpoint_key(r.key) for r in gets if r.host == "host-a")
        assert not any(bench.is_checkpoint_key(r.key) for r in gets if r.host == "host-b")
    finally:
        server.shutdown()
