#!/usr/bin/env python
"""Bytes moved: what an S3 endpoint actually serves to the pipeline per scenario, against the checkpoint.

Starts moto's S3 server on 127.0.0.1 inside this process, behind a WSGI layer that counts, per
request, the response body bytes of every GET, the request body bytes of every PUT (what a host
sends: "client PUT bytes") and the bytes of every server-side copy (a PUT carrying
`x-amz-copy-source`, CopyObject or UploadPartCopy: the copy range, else the source object's size; no
byte of it passes through a host), and which simulated host sent it (each host signs with its own
access key id). Uploads a generated Llama-shaped checkpoint (default ~50 MB in three safetensors
shards, plus config, index and a tiny tokenizer) to `s3://<bucket>/models/<name>`, then runs
`neuronforge run` (the CLI, in a subprocess, as a user would) in these scenarios:

- cold:        one host (one NEURONFORGE_HOME), store `s3://<bucket>/store`.
               goals: GET <= 1.05x checkpoint; client PUT bytes outside the compile cache
               (`neuron-cache/`, `neuron-cache-sets/`, `vllm-neuron-cache/`) <= 2.05x checkpoint:
               the checkpoint's mirror once and the artifact once (the compile cache's PUT bytes and
               the server-side copies are printed beside it, with their ratios)
- hit:         the same again.   goals: 0 checkpoint bytes, GET bytes <= 64 KB, `index/<key>.json` read once
- two targets: a new host builds two sequence lengths, one after the other,
               into a new store.                                    goal: GET <= 1.05x checkpoint
- two workers: two new hosts (two NEURONFORGE_HOME) build two other targets
               into a new store (`--concurrent`: at the same time). goal: GET <= 1.05x checkpoint per host

Every scenario but the hit compiles (AOTInductor, cpu profile): about 4-5 minutes on 2 cores.

"checkpoint bytes" are GETs of the model's files: under the source prefix, or the store's
`checkpoints/` / `quantized/` copies. Prints a table, the cold run's uploads and copies per store
area, one line per goal and PASS/FAIL (exit 1 on FAIL); `--log` (or a FAIL) lists every GET (host,
key, bytes) and the PUT and copied bytes per store area of every scenario.

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
GOAL_COLD_PUT = 2.05  # a cold build's client PUT bytes outside the compile cache / checkpoint bytes
GOAL_HIT_GET = 64 * 1024  # a hit reads manifests and indexes only: at most this many bytes
GOAL_HIT_INDEX = 1  # GETs of index/<key>.json on a hit: the key is looked up once
COMPILE_CACHE_AREAS = ("neuron-cache/", "neuron-cache-sets/", "vllm-neuron-cache/")
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
    bytes_in: int  # request body (PUT: the object or part; 0 for a copy)
    copy_source: str = ""  # "<bucket>/<key>" of a server-side copy (CopyObject, UploadPartCopy)
    bytes_copied: int = 0  # what that copy moves inside the endpoint: its range, else the source's size

    @property
    def area(self) -> str:
        return area_of(self.key)


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
        if source := environ.get("HTTP_X_AMZ_COPY_SOURCE"):  # a server-side copy: no body
            req.copy_source = unquote(source.split("?", 1)[0]).lstrip("/")
            req.bytes_in = 0
            req.bytes_copied = copied_bytes(req.copy_source, environ.get("HTTP_X_AMZ_COPY_SOURCE_RANGE", ""))
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


def copied_bytes(source: str, byte_range: str) -> int:
    """The bytes a copy of `source` ("<bucket>/<key>") moves: its `bytes=first-last` range (an
    UploadPartCopy part), else the whole source object, as moto holds it (asked before the copy runs)."""
    if m := re.fullmatch(r"bytes=(\d+)-(\d+)", byte_range.strip()):
        return int(m.group(2)) - int(m.group(1)) + 1
    from moto.s3.models import s3_backends

    bucket, _, key = source.partition("/")
    for account in list(s3_backends.keys()):
        try:
            obj = s3_backends[account]["global"].get_object(bucket, key)
        except Exception:  # another account's backend, without that bucket
            continue
        if obj is not None:
            return int(obj.size)
    return 0


def area_of(key: str) -> str:
    """`<store>/<area>/` of "<bucket>/<store>/<area>/…" (checkpoints/, builds/, artifacts/, neuron-cache/, …);
    `<store>/(top level)` for an object right under the store (the write probe)."""
    parts = key.split("/")
    return "/".join(parts[1:3]) + "/" if len(parts) > 3 else f"{parts[1] if len(parts) > 1 else ''}/(top level)"


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

    from neuronforge.spec.tinymodel import make_tiny_tokenizer

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
    cmd = [sys.executable, "-m", "neuronforge.interfaces.cli", "run", "--model", f"s3://{BUCKET}/models/{MODEL}",
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
    puts: list[Request]  # PUTs with a body (objects, parts, conditional writes)
    copies: list[Request]  # server-side copies (PUT with x-amz-copy-source)
    seconds: float
    statuses: list[str]
    hosts: list[str]
    keys: list[str] = field(default_factory=list)  # the cache keys the runs printed

    def get_bytes(self, host: str | None = None) -> int:
        return sum(r.bytes_out for r in self.gets if host is None or r.host == host)

    def ckpt_get_bytes(self, host: str | None = None) -> int:
        return sum(r.bytes_out for r in self.gets if is_checkpoint_key(r.key) and (host is None or r.host == host))

    def put_bytes(self, *, compile_cache: bool = True) -> int:
        return sum(r.bytes_in for r in self.puts if compile_cache or not is_compile_cache(r.area))

    def copied_bytes(self) -> int:
        return sum(r.bytes_copied for r in self.copies)

    def index_gets(self) -> int:
        """GETs of `index/<key>.json` (the published-artifact lookup) for the runs' keys."""
        wanted = {f"/index/{k}.json" for k in self.keys}
        return sum(1 for r in self.gets if any(r.key.endswith(w) for w in wanted))


def is_compile_cache(area: str) -> bool:
    return area.split("/", 1)[-1] in COMPILE_CACHE_AREAS


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
        name, ckpt, [r for r in reqs if r.method == "GET"],
        [r for r in reqs if r.method == "PUT" and not r.copy_source], [r for r in reqs if r.copy_source],
        seconds, [o.get("status", "?") for o in outs], sorted({h.name for h, _, _ in runs}),
        [str(o["cache_key"]) for o in outs if o.get("cache_key")],
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
    print_areas(row)


def print_areas(row: Row) -> None:
    """Client PUT bytes and server-side copied bytes per store area (the copy's destination), with
    where the copies came from."""
    put: dict[str, int] = defaultdict(int)
    copied: dict[str, int] = defaultdict(int)
    sources: dict[str, set[str]] = defaultdict(set)
    for r in row.puts:
        put[r.area] += r.bytes_in
    for r in row.copies:
        copied[r.area] += r.bytes_copied
        sources[r.area].add(area_of(r.copy_source))
    print(f"  {row.scenario}: bytes into the store per area (client PUT bodies | server-side copies):")
    if not put and not copied:
        print("    (none)")
    for area in sorted({*put, *copied}, key=lambda a: -(put[a] + copied[a])):
        src = f"  from {', '.join(sorted(sources[area]))}" if sources[area] else ""
        cache = "  (compile cache)" if is_compile_cache(area) else ""
        print(
            f"    {area:<26} PUT {put[area]:>11} B {put[area] / row.ckpt:>6.3f}x"
            f"   copied {copied[area]:>11} B {copied[area] / row.ckpt:>6.3f}x{src}{cache}"
        )


def check(row: Row) -> list[str]:
    """The goals this row misses (empty: met)."""
    fails = []
    if row.scenario == "hit":
        if row.ckpt_get_bytes():
            fails.append(f"hit read {row.ckpt_get_bytes()} checkpoint bytes (goal 0)")
        if row.get_bytes() > GOAL_HIT_GET:
            fails.append(f"hit read {row.get_bytes()} bytes (goal <= {GOAL_HIT_GET})")
        if row.index_gets() != GOAL_HIT_INDEX:
            fails.append(f"hit read index/<key>.json {row.index_gets()} times (goal {GOAL_HIT_INDEX})")
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
        if row.scenario == "cold" and row.put_bytes(compile_cache=False) > GOAL_COLD_PUT * row.ckpt:
            fails.append(
                f"cold uploaded {row.put_bytes(compile_cache=False) / row.ckpt:.3f}x the checkpoint outside the "
                f"compile cache (goal <= {GOAL_COLD_PUT}x)"
            )
    return fails


def goal_lines(rows: list[Row]) -> list[str]:
    """One line per goal of the issue, PASS/FAIL, with the measured numbers."""
    out = []
    by = {r.scenario: r for r in rows}
    if cold := by.get("cold"):
        put = cold.put_bytes(compile_cache=False)
        cache = cold.put_bytes() - put
        copied = cold.copied_bytes()
        out.append(
            f"{'PASS' if put <= GOAL_COLD_PUT * cold.ckpt else 'FAIL'}  cold client PUT bytes outside the compile "
            f"cache {put} B = {put / cold.ckpt:.3f}x the checkpoint (goal <= {GOAL_COLD_PUT}x); compile cache "
            f"PUT {cache} B = {cache / cold.ckpt:.3f}x, server-side copies {copied} B = {copied / cold.ckpt:.3f}x "
            "(reported, not counted)"
        )
    if hit := by.get("hit"):
        got = hit.get_bytes()
        out.append(f"{'PASS' if got <= GOAL_HIT_GET else 'FAIL'}  hit GET bytes {got} B (goal <= {GOAL_HIT_GET} B)")
        n = hit.index_gets()
        out.append(
            f"{'PASS' if n == GOAL_HIT_INDEX else 'FAIL'}  hit GETs of index/<key>.json: {n} (goal {GOAL_HIT_INDEX})"
        )
    return out


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
            f"{'GETs':>6}{'PUT bytes':>12}{'copied':>12}{'seconds':>9}"
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
                    + (f"{row.put_bytes():>12}{row.copied_bytes():>12}{row.seconds:>9.1f}" if h is None else "")
                )
        if not args.log:  # (--log prints it for every scenario)
            print()
            print_areas(rows[0])
        if args.log:
            print()
            for row in rows:
                print_gets(row)
        fails = [f for row in rows for f in check(row)]
        print()
        for line in goal_lines(rows):
            print(line)
        for f in fails:
            print(f"FAIL: {f}")
        print(
            "PASS" if not fails else "FAIL",
            f"(goals: cold, two targets, two workers GET <= {GOAL_COLD}x the checkpoint per host; cold client PUT "
            f"outside the compile cache <= {GOAL_COLD_PUT}x; hit 0 checkpoint bytes, <= {GOAL_HIT_GET} B, index "
            f"read {GOAL_HIT_INDEX}x)",
        )
        if fails and not args.log:
            for row in rows:
                print_gets(row)
        return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
