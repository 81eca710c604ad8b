"""A serving host's second start (issue 41): with everything present, a vllm-neuron-native build's
sync.sh reads the artifact's manifest and nothing else, and a channel's resolve.sh reads channel.json
and the build's manifest and nothing else — counted at a real S3 endpoint (moto's server, recording
every request) — and neither reads the files it holds: a file whose bytes changed under an unchanged
stat stays as it is (had it been hashed, it would have been fetched again). The host's PATH has bash,
coreutils and a python3 with boto3: no sha256sum, no AWS CLI."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.deployment.services import CountingS3


@pytest.fixture(scope="module")
def counting_s3() -> Iterator[CountingS3]:
    s3 = CountingS3()
    s3.start()
    try:
        yield s3
    finally:
        s3.stop()


def _bucket(s3: CountingS3) -> str:
    import boto3

    name = f"nf-{uuid.uuid4().hex[:12]}"
    boto3.client("s3", endpoint_url=s3.endpoint).create_bucket(Bucket=name)
    return name


def _host(tmp_path: Path, s3: CountingS3, **extra: str) -> dict[str, str]:
    bindir = tmp_path / "host-bin"
    bindir.mkdir(exist_ok=True)
    for tool in ("bash", "cat", "cut", "dirname", "grep", "ls", "mkdir", "mktemp", "mv", "rm", "touch", "wc", "cp"):
        found = shutil.which(tool, path="/usr/bin:/bin")
        assert found, tool
        if not (bindir / tool).exists():
            (bindir / tool).symlink_to(found)
    (bindir / "python3").write_text(f'#!/bin/sh\nexec "{sys.executable}" "$@"\n')
    (bindir / "python3").chmod(0o755)
    assert not any((bindir / t).exists() for t in ("sha256sum", "aws", "s5cmd"))
    return {
        "PATH": str(bindir),
        "HOME": str(tmp_path),
        "AWS_ENDPOINT_URL": s3.endpoint,
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",
        **extra,
    }


def _run(cmd: list[str], env: dict[str, str], s3: CountingS3) -> tuple[subprocess.CompletedProcess[str], list]:
    import time

    time.sleep(0.1)  # what the test itself read is recorded before
    start = time.time()
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120, check=False)
    time.sleep(0.1)  # the server records a request once its response is sent
    return done, [(r.method, r.key) for r in s3.between(start, time.time())]


def _tamper_keeping_stat(path: Path) -> bytes:
    """Other bytes of the same size, written in place, the mtime put back: only reading tells."""
    st = path.stat()
    with open(path, "r+b") as f:
        f.write(b"#")
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    return path.read_bytes()


def test_a_second_start_of_sync_sh_reads_the_manifest_and_no_file(tmp_path: Path, counting_s3: CountingS3) -> None:
    import boto3

    from tests.profiles.test_vllm_native_k8s import _artifact

    store, files = _artifact(tmp_path)  # a file:// store: copied into the bucket as it is
    bucket = _bucket(counting_s3)
    s3 = boto3.client("s3", endpoint_url=counting_s3.endpoint)
    for path in (p for p in store.rglob("*") if p.is_file()):
        s3.upload_file(str(path), bucket, f"farm/{path.relative_to(store).as_posix()}")
    launch = tmp_path / "launch"
    launch.mkdir()
    for name, text in files.items():
        (launch / name).write_text(text.replace(f"file://{store}", f"s3://{bucket}/farm"))
    host = tmp_path / "host"
    env = _host(tmp_path, counting_s3, MODEL_DIR=str(host / "model"), VLLM_CACHE_ROOT=str(host / "cache"))

    first, requests = _run(["bash", str(launch / "sync.sh")], env, counting_s3)
    assert first.returncode == 0, first.stderr
    assert first.stdout.startswith("sync.sh: 8 fetched; 2 graphs"), first.stdout  # 1 model file, 2 entries x 3, 1 NKI
    assert "sync.sh: 8 files fetched, " in first.stderr and " MB/s (up to " in first.stderr
    assert ("GET", "farm/artifacts/m/abcdef012345/model/config.json") in requests
    tampered = _tamper_keeping_stat(host / "model" / "config.json")
    nki = _tamper_keeping_stat(host / "cache" / "neuron" / "compile_cache" / "nki" / "k1.json")

    again, requests = _run(["bash", str(launch / "sync.sh")], env, counting_s3)
    assert again.returncode == 0, again.stderr
    assert again.stdout.startswith("sync.sh: 0 fetched; 2 graphs"), again.stdout
    assert requests == [("GET", "farm/artifacts/m/abcdef012345/manifest.json")]
    # complete entries are skipped by their markers, the model file and the NKI file by their records
    assert "sync.sh: 0 files fetched" in again.stderr and "2 already here and verified" in again.stderr
    assert (host / "model" / "config.json").read_bytes() == tampered  # kept by its stat: never read
    assert (host / "cache" / "neuron" / "compile_cache" / "nki" / "k1.json").read_bytes() == nki


def test_a_second_start_of_resolve_sh_reads_two_records_and_no_file(
    tmp_path: Path, counting_s3: CountingS3, monkeypatch: pytest.MonkeyPatch
) -> None:
    from neuronforge.artifacts import channels
    from neuronforge.stores import open_store
    from tests.releases.builds import MODEL, publish

    monkeypatch.setenv("AWS_ENDPOINT_URL", counting_s3.endpoint)
    bucket = _bucket(counting_s3)
    store = open_store(f"s3://{bucket}/farm")
    ref = channels.ChannelRef.parse(MODEL, "cpu", "candidate")
    channels.promote(store, ref, build=publish(store, 1))
    launch = tmp_path / "launch"
    launch.mkdir()
    (launch / "resolve.sh").write_bytes(store.get_bytes(f"{ref.prefix}/launch/resolve.sh"))
    dest, env = tmp_path / "host", _host(tmp_path, counting_s3)

    first, requests = _run(["bash", str(launch / "resolve.sh"), "--all", str(dest)], env, counting_s3)
    assert first.returncode == 0, first.stderr
    assert len(requests) == 4  # channel.json, the manifest, 2 files
    tampered = _tamper_keeping_stat(dest / "model" / "weights.bin")

    again, requests = _run(["bash", str(launch / "resolve.sh"), "--all", str(dest)], env, counting_s3)
    assert again.returncode == 0, again.stderr
    assert [method for method, _ in requests] == ["GET", "GET"], requests
    assert requests[0][1].endswith("/channel.json") and requests[1][1].endswith("/manifest.json")
    assert "resolve.sh: 0 files fetched" in again.stderr and "2 already here and verified" in again.stderr
    assert (dest / "model" / "weights.bin").read_bytes() == tampered  # linked into the new folder, not read
