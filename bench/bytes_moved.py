#!/usr/bin/env python
"""Bytes moved: what an S3 endpoint actually serves to the pipeline per scenario, against the checkpoint.

Starts moto's S3 server on 127.0.0.1 inside this process, behind a WSGI layer that counts, per
request, the response body bytes of every GET and the request body bytes of every PUT (and which
simulated host sent it: each host signs with its own access key id). Uploads a generated
Llama-shaped checkpoint (default ~50 MB in three safetensors shards, plus config, index and a
tiny tokenizer) to `s3://<bucket>/models/<name>`, then runs `neuronforge run` (the CLI, in a
subprocess, as a user would) in these scenarios:

- cold:        one host (one NEURONFORGE_HOME), store `s3://<bucket>/store`.  goal: GET <= 1.05x checkpoint
- hit:         the same again.                                      goal: 0 checkpoint bytes, only small reads
- two targets: a new host builds two sequence lengths, one after the other,
               into a new store.                                    goal: GET <= 1.05x checkpoint
- two workers: two new hosts (two NEURONFORGE_HOME) build two other targets
               into a new store (`--concurrent`: at the same time). goal: GET <= 1.05x checkpoint per host

Every scenario but the hit compiles (AOTInductor, cpu profile): about 3 minutes on 2 cores.

"checkpoint bytes" are GETs of the model's files: under the source prefix, or the store's
`checkpoints/` / `quantized/` copies. Prints a table and PASS/FAIL (exit 1 on FAIL); `--log` (or
a FAIL) lists every GET (host, key, bytes) and the PUT bytes per store area.

    .venv/bin/python bench/bytes_moved.py [--hidden 512] [--layers 2] [--vocab 8192] [--concurrent] [--log]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import threading
import time
from collections import defaultdict
from collections.abc import Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import unquote

ROOT = Path(__file__).resolve().parents[1]
BUCKET = "nf-bytes"
MODEL = "llama-wide"
SECRET = "benchsecret"
REGION = "us-east-1"
GOAL_COLD = 1.05  # GET bytes / checkpoint bytes, per host
HIT_SMALL = 0.01  # a hit may read manifests and indexes: at most this fraction of the checkpoint
TARGET = {"instance": "inf2.xlarge", "tp": 1, "batch": 1, "ctx": 32, "dtype": "fp32"}  # DEFAULT_TARGET's shape
_CRED = re.compile(r"Credential=([^/,\s]+)/")


# -- the counting endpoint ---------------------------------------------------------------------------
@dataclass
class Request:
    host: str
    method: str
    key: str  # "<bucket>/<key>", or "<bucket>" for a listing
    query: str
    status: str
    bytes_out: int  # response body
    bytes_in: int  # request body (PUT: the object or part)


@dataclass
class Counter:
    """WSGI middleware around moto's app: one `Request` per call, kept until `take()`."""

    app: Any
    requests: list[Request] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def __call__(self, environ: dict, start_response: Any) -> Iterable[bytes]:
        method = environ["REQUEST_METHOD"]
        auth = environ.get("HTTP_AUTHORIZATION", "")
        host = m.group(1) if (m := _CRED.search(auth)) else "?"
        # aws-chunked uploads carry framing and trailers: the object's own size is the decoded length
        bytes_in = int(environ.get("HTTP_X_AMZ_DECODED_CONTENT_LENGTH") or environ.get("CONTENT_LENGTH") or 0)
        key = unquote(environ.get("PATH_INFO", "")).lstrip("/")
        req = Request(host, method, key, environ.get("QUERY_STRING", ""), "?", 0, bytes_in)
        with self.lock:  # recorded before it is answered: a client never sees a reply `take()` misses
            self.requests.append(req)

        def sr(status: str, headers: list, exc_info: Any = None) -> Any:
            req.status = status.split()[0]
            return start_response(status, headers, exc_info)

        return self._count(self.app(environ, sr), req)

    @staticmethod
    def _count(body: Iterable[bytes], req: Request) -> Iterator[bytes]:
        try:
            for chunk in body:
                req.bytes_out += len(chunk)  # counted before the client can have it
                yield chunk
        finally:
            if hasattr(body, "close"):
                body.close()

    def take(self) -> list[Request]:
        with self.lock:
            out, self.requests = self.requests, []
        return out


def start_endpoint() -> tuple[Counter, Any, str]:
    import logging

    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # no line per request
    from moto.moto_server.werkzeug_app import DomainDispatcherApplication, MotoRequestHandler, create_backend_app
    from werkzeug.serving import make_server

    counter = Counter(DomainDispatcherApplication(create_backend_app))
    server = make_server("127.0.0.1", 0, counter, threaded=True, request_handler=MotoRequestHandler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return counter, server, f"http://127.0.0.1:{server.server_address[1]}"


# -- the checkpoint ------------------------------------------------------------------------------------
def make_checkpoint(dest: Path, hidden: int, layers: int, vocab: int) -> int:
    """A Llama-shaped fp32 checkpoint in two shards with an index, config and a tiny tokenizer."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    from neuronforge.tinymodel import make_tiny_tokenizer

    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=vocab,
        hidden_size=hidden,
        intermediate_size=2 * hidden,
        num_hidden_layers=layers,
        num_attention_heads=8,
        num_key_value_heads=4,
        max_position_embeddings=256,
        tie_word_embeddings=False,
    )
    model = LlamaForCausalLM(config).to(torch.float32).eval()
    total = sum(p.numel() * p.element_size() for p in model.parameters())
    model.save_pretrained(dest, safe_serialization=True, max_shard_size=f"{total // 2 // 1000 + 1}KB")
    make_tiny_tokenizer(dest)
    return sum(p.stat().st_size for p in dest.iterdir() if p.is_file())


def upload(client: Any, folder: Path, prefix: str) -> None:
    for p in sorted(folder.iterdir()):
        if p.is_file():
            client.upload_file(str(p), BUCKET, f"{prefix}/{p.name}")


# -- running the CLI as hosts ------------------------------------------------------------------------------
@dataclass
class Host:
    name: str  # also its access key id: how the endpoint tells hosts apart
    home: Path


def run_cli(host: Host, endpoint: str, store: str, seq_len: int, logs: Path) -> dict:
    env = {
        **os.environ,
        "NEURONFORGE_HOME": str(host.home),
        "AWS_ENDPOINT_URL": endpoint,
        "AWS_ACCESS_KEY_ID": host.name,
        "AWS_SECRET_ACCESS_KEY": SECRET,
        "AWS_DEFAULT_REGION": REGION,
        "HF_HUB_OFFLINE": "1",
    }
    for var in ("NEURONFORGE_STORE", "AWS_PROFILE", "AWS_SESSION_TOKEN"):
        env.pop(var, None)
    cmd = [sys.executable, "-m", "neuronforge.cli", "run", "--model", f"s3://{BUCKET}/models/{MODEL}",
           "--store", store, "--instance", TARGET["instance"], "--tp", str(TARGET["tp"]),
           "--batch-size", str(TARGET["batch"]), "--seq-len", str(seq_len),
           "--max-context-length", str(TARGET["ctx"]), "--dtype", TARGET["dtype"], "--profile", "cpu"]  # fmt: skip
    log = logs / f"{host.name}-seq{seq_len}-{time.monotonic_ns()}.log"
    with open(log, "wb") as f:
        proc = subprocess.run(cmd, env=env, cwd=ROOT, stdout=subprocess.PIPE, stderr=f)
    if proc.returncode != 0:
        raise SystemExit(f"neuronforge run failed on {host.name} (exit {proc.returncode}); log: {log}")
    return json.loads(proc.stdout)


# -- accounting ------------------------------------------------------------------------------------------
def is_checkpoint_key(key: str) -> bool:
    return key.startswith(f"{BUCKET}/models/") or "/checkpoints/" in key or "/quantized/" in key


@dataclass
class Row:
    scenario: str
    ckpt: int
    gets: list[Request]
    puts: list[Request]
    seconds: float
    statuses: list[str]
    hosts: list[str]

    def get_bytes(self, host: str | None = None) -> int:
        return sum(r.bytes_out for r in self.gets if host is None or r.host == host)

    def ckpt_get_bytes(self, host: str | None = None) -> int:
        return sum(r.bytes_out for r in self.gets if is_checkpoint_key(r.key) and (host is None or r.host == host))

    def put_bytes(self) -> int:
        return sum(r.bytes_in for r in self.puts)


def scenario(name: str, counter: Counter, ckpt: int, runs: list[tuple[Host, str, int]], endpoint: str,
             logs: Path, parallel: bool = False) -> Row:  # fmt: skip
    counter.take()
    started = time.perf_counter()
    if parallel:
        with ThreadPoolExecutor(len(runs)) as pool:
            outs = list(pool.map(lambda r: run_cli(r[0], endpoint, r[1], r[2], logs), runs))
    else:
        outs = [run_cli(h, endpoint, store, seq, logs) for h, store, seq in runs]
    seconds = time.perf_counter() - started
    reqs = [r for r in counter.take() if r.host != "setup"]
    return Row(
        name, ckpt, [r for r in reqs if r.method == "GET"], [r for r in reqs if r.method == "PUT"], seconds,
        [o.get("status", "?") for o in outs], sorted({h.name for h, _, _ in runs}),
    )  # fmt: skip


def mib(n: int) -> str:
    return f"{n / 2**20:.2f} MiB"


def print_gets(row: Row) -> None:
    per: dict[tuple[str, str], list[int]] = defaultdict(lambda: [0, 0])
    for r in row.gets:
        acc = per[(r.host, r.key + ("?" + r.query if r.query and r.key.count("/") == 0 else ""))]
        acc[0] += 1
        acc[1] += r.bytes_out
    print(f"  GETs of {row.scenario}:")
    for (host, key), (n, b) in sorted(per.items(), key=lambda kv: -kv[1][1]):
        print(f"    {host:<10} {b:>12} B  x{n:<3} {key}")
    areas: dict[str, int] = defaultdict(int)
    for r in row.puts:
        parts = r.key.split("/")
        areas["/".join(parts[1:3]) + "/"] += r.bytes_in  # <store>/<area>/ (checkpoints, builds, artifacts, ...)
    print(f"  PUT bytes of {row.scenario} per store area:")
    for area, b in sorted(areas.items(), key=lambda kv: -kv[1]):
        print(f"    {b:>12} B  {area:<28} {b / row.ckpt:.2f}x checkpoint")


def check(row: Row) -> list[str]:
    """The goals this row misses (empty: met)."""
    fails = []
    if row.scenario == "hit":
        if row.ckpt_get_bytes():
            fails.append(f"hit read {row.ckpt_get_bytes()} checkpoint bytes (goal 0)")
        if row.get_bytes() > HIT_SMALL * row.ckpt:
            fails.append(f"hit read {row.get_bytes()} bytes (goal: small reads only, <= {HIT_SMALL:.0%} of checkpoint)")
        if any(s != "cache-hit" for s in row.statuses):
            fails.append(f"hit run was not a cache hit: {row.statuses}")
    else:
        for host in row.hosts:
            ratio = row.get_bytes(host) / row.ckpt
            if ratio > GOAL_COLD:
                fails.append(
                    f"{row.scenario}: host {host} was served {ratio:.3f}x the checkpoint (goal <= {GOAL_COLD})"
                )
        if any(s == "cache-hit" for s in row.statuses):
            fails.append(f"{row.scenario}: expected builds, got {row.statuses}")
    return fails


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--hidden", type=int, default=512)
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--vocab", type=int, default=8192)
    ap.add_argument("--concurrent", action="store_true", help="run the two workers at the same time")
    ap.add_argument("--log", action="store_true", help="list every GET and the PUT bytes per store area")
    ap.add_argument("--dir", default=None, help="scratch folder (default: a temp dir, removed at the end)")
    args = ap.parse_args()

    sys.path.insert(0, str(ROOT))
    os.environ.update({"AWS_ACCESS_KEY_ID": "setup", "AWS_SECRET_ACCESS_KEY": SECRET, "AWS_DEFAULT_REGION": REGION})
    with tempfile.TemporaryDirectory(prefix="nf-bytes-", dir=args.dir) as tmp:
        scratch = Path(tmp)
        logs = scratch / "logs"
        logs.mkdir()
        ckpt = make_checkpoint(scratch / "ckpt", args.hidden, args.layers, args.vocab)
        counter, server, endpoint = start_endpoint()
        try:
            import boto3

            s3 = boto3.client("s3", endpoint_url=endpoint)
            s3.create_bucket(Bucket=BUCKET)
            upload(s3, scratch / "ckpt", f"models/{MODEL}")
            print(f"checkpoint s3://{BUCKET}/models/{MODEL}: {ckpt} bytes ({mib(ckpt)}), endpoint {endpoint}")

            def host(name: str) -> Host:
                return Host(name, scratch / name)

            store = f"s3://{BUCKET}"
            a, b, c, d = host("host-a"), host("host-b"), host("host-c"), host("host-d")
            rows = [
                scenario("cold", counter, ckpt, [(a, f"{store}/store", 64)], endpoint, logs),
                scenario("hit", counter, ckpt, [(a, f"{store}/store", 64)], endpoint, logs),
                scenario("two targets", counter, ckpt,
                         [(b, f"{store}/store-2t", 64), (b, f"{store}/store-2t", 128)], endpoint, logs),
                scenario("two workers", counter, ckpt,
                         [(c, f"{store}/store-2w", 96), (d, f"{store}/store-2w", 128)], endpoint, logs,
                         parallel=args.concurrent),
            ]  # fmt: skip
        finally:
            server.shutdown()

        print()
        head = (
            f"{'scenario':<13}{'host':<9}{'ckpt bytes':>12}{'GET bytes':>12}{'ratio':>8}{'of ckpt files':>14}"
            f"{'GETs':>6}{'PUT bytes':>12}{'seconds':>9}"
        )
        print(head)
        print("-" * len(head))
        for row in rows:
            hosts = [None] + (row.hosts if len(row.hosts) > 1 else [])
            for h in hosts:
                gets = [r for r in row.gets if h is None or r.host == h]
                print(
                    f"{row.scenario if h is None else '':<13}{h or ('all' if len(row.hosts) > 1 else row.hosts[0]):<9}"
                    f"{row.ckpt:>12}{row.get_bytes(h):>12}{row.get_bytes(h) / row.ckpt:>7.3f}x"
                    f"{row.ckpt_get_bytes(h):>14}{len(gets):>6}"
                    + (f"{row.put_bytes():>12}{row.seconds:>9.1f}" if h is None else "")
                )
        if args.log:
            print()
            for row in rows:
                print_gets(row)
        fails = [f for row in rows for f in check(row)]
        print()
        for f in fails:
            print(f"FAIL: {f}")
        print(
            "PASS" if not fails else "FAIL",
            f"(goals: cold, two targets, two workers <= {GOAL_COLD}x the checkpoint per host; hit 0 checkpoint bytes)",
        )
        if fails and not args.log:
            for row in rows:
                print_gets(row)
        return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
