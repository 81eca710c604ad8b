"""The instrument of `bench/bytes_moved.py`: its endpoint counts exactly the bytes it serves (GET
response bodies, ranged and whole), receives (PUT bodies, multipart parts) and copies server-side
(CopyObject, UploadPartCopy ranges: counted apart, no body), per host; and the goals it checks."""

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

        # Server-side copies: a small one (CopyObject) and a multipart one (UploadPartCopy, 3 ranges).
        a = client("host-a")
        a.copy_object(Bucket=bucket, Key="store/artifacts/k/index.json", CopySource=f"{bucket}/store/index/k.json")
        src = {"Bucket": bucket, "Key": "models/m/big.safetensors"}
        a.copy(src, bucket, "store/builds/k/d/model/big.safetensors", Config=parts)
        reqs = counter.take()
        copies = [r for r in reqs if r.copy_source]
        assert {r.copy_source for r in copies} == {f"{bucket}/store/index/k.json", f"{bucket}/models/m/big.safetensors"}
        assert sum(r.bytes_in for r in reqs if r.method == "PUT") == 0  # no body went up
        per_area = {area: sum(r.bytes_copied for r in copies if r.area == area) for area in {r.area for r in copies}}
        assert per_area == {"store/artifacts/": 2, "store/builds/": 12 * MIB + 5}
        assert len([r for r in copies if r.area == "store/builds/"]) == 3  # the parts' ranges add up
    finally:
        server.shutdown()


def test_goals_count_uploads_outside_the_compile_cache_and_index_reads(bench) -> None:
    ckpt = 1000

    def req(method: str, key: str, bytes_in: int = 0, bytes_out: int = 0, source: str = "", copied: int = 0):
        return bench.Request(
            "host-a", method, f"{bench.BUCKET}/store/{key}", "", "200", bytes_out, bytes_in, source, copied
        )

    def cold(puts: list, copies: list) -> object:
        return bench.Row("cold", ckpt, [], puts, copies, 1.0, ["published"], ["host-a"], ["k"])

    within = cold(
        [req("PUT", "checkpoints/m/w", 1000), req("PUT", "builds/k/d/w", 1040), req("PUT", "neuron-cache/c/M/g", 900)],
        [req("PUT", "artifacts/m/w", source="b/store/builds/k/d/w", copied=1040)],
    )
    assert bench.check(within) == []  # 2.04x outside the compile cache; the cache and the copy reported apart
    over = cold([req("PUT", "checkpoints/m/w", 1000), req("PUT", "builds/k/d/w", 1060)], [])
    assert any("2.06" in f for f in bench.check(over))
    assert any(line.startswith("FAIL") for line in bench.goal_lines([over]))

    def hit(gets: list) -> object:
        return bench.Row("hit", ckpt * 100, gets, [], [], 1.0, ["cache-hit"], ["host-a"], ["k"])

    once = hit([req("GET", "index/k.json", bytes_out=300), req("GET", "artifacts/m/manifest.json", bytes_out=900)])
    assert bench.check(once) == [] and once.index_gets() == 1
    twice = hit([req("GET", "index/k.json", bytes_out=300)] * 2)
    assert any("index" in f for f in bench.check(twice))
    assert any(line.startswith("FAIL") and "index" in line for line in bench.goal_lines([twice]))
    big = hit([req("GET", "index/k.json", bytes_out=300), req("GET", "farm-index/p", bytes_out=65 * 1024)])
    assert any("bytes" in f for f in bench.check(big))
