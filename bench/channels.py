#!/usr/bin/env python
"""Release channels: what a rollback costs against an S3 endpoint, and whether 50 concurrent promoters
of one channel leave exactly one winner and a complete history. A benchmark, not a test: it prints
numbers, ratios against a baseline measured in the same run, and PASS/FAIL against the issue's goals.

Endpoint: moto's ThreadedMotoServer on 127.0.0.1, in a child process (its own core and GIL). Requests
are counted with botocore's `before-send` event on the store's client, per operation name (every HTTP
attempt, retries included). The builds are hand-made published artifacts laid out as `publish` lays
them out (payload files, `manifest.json` with the profile and a passed smoke test, `index/<key>.json`,
the farm index rebuilt once): the channel code under test is the real `neuronforge.artifacts.channels`,
called through `neuronforge.farm.releases.run`, the one dispatch the CLI, the catalog and the DAG use.

(a) Rollback. Builds A then B are approved and promoted to `stable`; `rollback --steps 1` points it back
at A, then at B, and so on (`--rollbacks` times: every 32nd move of the farm index's tail compacts it,
and the default run includes one so its amortised cost shows). Goals: one call, <= 9 S3 requests (5 until
issue 39 added the GET of the build's damage record; 6 until issue 51 made a rollback check its build as
a promote does — its index entry, manifest and folder listing — since a history entry is trusted for
nothing but the key it names), no data copied (no CopyObject/UploadPartCopy/multipart upload; PUTs only
of the channel record and the farm index's tail), < 5 s. Baseline, same endpoint, same run: what a
deployment without channels does to roll back, copying the previous build's artifact folder over a fixed
location (one listing, then a server-side copy of every file with boto3's managed copy, 10 at a time as
`aws s3 cp --recursive`).

(b) Concurrent promotes. `--threads` threads, each promoting one of `--builds` approved builds (never the
one the channel points to) to one `stable` channel, for `--rounds` rounds, in two ways:
- gated: every attempt's conditional PUT of the channel record is held until every attempt of the round
  has read the channel and passed its checks, then all are released at once. All read the same version:
  the strict test of the compare-and-swap. Goal: exactly one winner per round, every other attempt gets
  `ChannelMoved` naming the winner;
- free: the threads start together and run as they run; an attempt that reads after a win moves from the
  winner's state and may win too (serially, which is correct). Winners per round are shown.
Goal for both: no lost history entry — the final history holds every winner's move, in order, each
move's `previous` the build of the move before it.

    .venv/bin/python bench/channels.py [--artifact-mib 256] [--rollbacks 34] [--threads 50] [--rounds 10]
    .venv/bin/python bench/channels.py --quick     # small builds, few rounds: seconds, for the test
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import io
import logging
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from bench.farm_scale import start_moto  # noqa: E402  (moto's server in a child process)

BUCKET = "bench-channels"
PREFIX = "store"
LINE = "vllm-neuron"
PROFILE_REF = "vllm-neuron@2.26.1"
AT = "2025-01-01T00:00:00Z"
# 5; + the GET of `damaged/<key>.json` (issue 39: a damaged build is refused); + the build's index entry,
# manifest and folder listing (issue 51: a rollback checks its build as a promote does)
GOAL_REQUESTS = 9
GOAL_SECONDS = 5.0
MIB = 1024 * 1024
# A build's files (what a vllm-neuron artifact holds), with each one's share of `--artifact-mib`.
FILES = (
    ("model/model.safetensors", 0.80),
    ("compiled/model.neff", 0.12),
    ("compiled/graph-1.neff", 0.04),
    ("compiled/graph-2.neff", 0.04),
    ("model/config.json", 0.0),
    ("model/generation_config.json", 0.0),
    ("model/tokenizer.json", 0.0),
    ("model/tokenizer_config.json", 0.0),
    ("launch/serve.sh", 0.0),
    ("launch/sync.sh", 0.0),
    ("launch/k8s-init-container.yaml", 0.0),
    ("launch/README.md", 0.0),
    ("compile.json", 0.0),
)
SMALL = 2048  # bytes of each file with no share


# -- counting ----------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Request:
    op: str  # the S3 operation, as botocore names it (GetObject, PutObject, CopyObject, ...)
    key: str  # relative to the store (or to the bucket, outside it)
    bytes_up: int  # the request body (Content-Length)


class Requests:
    """Every request the store's client sends, in order (botocore `before-send`: each HTTP attempt)."""

    def __init__(self) -> None:
        self.log: list[Request] = []
        self._lock = threading.Lock()

    def __call__(self, request: Any, event_name: str, **_: Any) -> None:
        url = urlsplit(request.url)
        path = unquote(url.path).lstrip("/")
        listed = parse_qs(url.query).get("prefix")  # a listing: what it lists
        path = (f"{listed[0]}*" if listed else path).removeprefix(f"{BUCKET}/").removeprefix(f"{PREFIX}/")
        up = int(request.headers.get("Content-Length") or 0)
        with self._lock:
            self.log.append(Request(event_name.rsplit(".", 1)[-1], path, up))

    def mark(self) -> int:
        return len(self.log)

    def since(self, mark: int) -> list[Request]:
        with self._lock:
            return self.log[mark:]


# -- the endpoint and the builds ---------------------------------------------------------------------------
def publish(store: Any, model: str, n: int, artifact_bytes: int) -> str:
    """A published build of `model` as `publish` lays it out: payload files, the manifest (profile line
    vllm-neuron, smoke passed, every file's size and sha256), then `index/<key>.json`."""
    key = hashlib.sha256(f"{model}#{n}".encode()).hexdigest()
    revision = hashlib.sha1(model.encode()).hexdigest()
    slug = "inf2.xlarge-tp2-bs1-seq4096-bf16"
    prefix = f"artifacts/{model}/{revision}/{slug}/{key[:12]}"
    files = []
    for rel, share in FILES:
        size = int(artifact_bytes * share) or SMALL
        block = hashlib.sha256(f"{key}/{rel}".encode()).digest() * (min(size, MIB) // 32 + 1)
        data = (block * (size // len(block) + 1))[:size]
        store.put_bytes(data, f"{prefix}/{rel}")
        files.append({"path": rel, "size": size, "sha256": hashlib.sha256(data).hexdigest()})
    manifest = {
        "cache_key": key,
        "source": {"kind": "hf", "location": model, "revision": revision},
        "toolchain": {
            "backend": "vllm",
            "backend_version": "0.9.2",
            "compiler": "neuronxcc",
            "compiler_version": "2.21.33363.0+82129205",
        },
        "files": files,
        "target_slug": slug,
        "profile": {"name": LINE, "ref": PROFILE_REF},
        "smoke": {"passed": True, "reason": "bench: hand-made build", "time_to_first_token_s": 0.1},
        "hosts": {"stages": [{"stage": "smoke", "hostname": "bench-host"}]},
        "published_at": AT,
    }
    store.write_json(f"{prefix}/manifest.json", manifest)
    store.write_json(f"index/{key}.json", {"cache_key": key, "manifest": f"{prefix}/manifest.json", "prefix": prefix})
    return key


def approve(store: Any, key: str) -> None:
    from neuronforge.artifacts import reviews

    reviews.decide(store, key, "approved", "bench-reviewer", "bench", AT)


# -- (a) rollback ------------------------------------------------------------------------------------------
def label(r: Request, record_key: str) -> str:
    if r.op == "HeadBucket":
        return "bucket HEAD"  # a store probe (the release commands skip it)
    if r.key == record_key:
        return {"GetObject": "channel GET", "PutObject": "channel PUT"}.get(r.op, f"channel {r.op}")
    if r.key == "farm-index/tail.json":
        return {"GetObject": "farm-index tail GET", "PutObject": "farm-index tail PUT"}.get(r.op, f"tail {r.op}")
    if r.key.startswith("reviews/"):
        return f"review {r.op.removesuffix('Object').upper()}"
    if r.key.startswith("damaged/"):
        return f"damage record {r.op.removesuffix('Object').upper()}"
    if r.key.startswith("index/") and r.op == "GetObject":
        return "index entry GET"
    if r.op == "ListObjectsV2" and r.key.startswith("artifacts/"):
        return "build folder LIST"
    if r.key.endswith("/manifest.json"):
        return f"manifest {r.op.removesuffix('Object').upper()}"
    if r.key.startswith("farm-index/"):
        return f"farm-index compaction {r.op}"
    return f"{r.op} {r.key}"


@dataclass
class Rollback:
    requests: list[Request]
    seconds: float
    line: str


def copied(requests: list[Request]) -> list[Request]:
    """Requests that copy or upload artifact data: any copy or multipart upload, any PUT other than
    the channel record and the farm index (its tail, and pages and head when it compacts)."""
    data_ops = {"CopyObject", "UploadPartCopy", "UploadPart", "CreateMultipartUpload", "CompleteMultipartUpload"}
    return [
        r
        for r in requests
        if r.op in data_ops
        or (r.op == "PutObject" and not (r.key.endswith("/channel.json") or r.key.startswith("farm-index/")))
    ]


def bench_rollback(store: Any, requests: Requests, args: argparse.Namespace) -> tuple[list[Rollback], Any]:
    from neuronforge.artifacts import channels
    from neuronforge.farm.releases import ReleaseRequest, run

    model = "bench/llama"
    a, b = (publish(store, model, n, args.artifact_mib * MIB) for n in (1, 2))
    from neuronforge.artifacts import farm_index

    farm_index.rebuild(store)  # a live farm has its index: the notes below append to its tail
    for key in (a, b):
        approve(store, key)
        run(store, ReleaseRequest("promote", model, LINE, "stable", build=key), by="bench-setup")
    ref = channels.ChannelRef.parse(model, LINE, "stable")
    out = []
    for i in range(args.rollbacks):
        mark = requests.mark()
        start = time.perf_counter()
        outcome = run(store, ReleaseRequest("rollback", model, LINE, "stable", reason=f"bench {i}"), by="bench")
        seconds = time.perf_counter() - start
        out.append(Rollback(requests.since(mark), seconds, outcome.line))
    return out, (ref, a, b)


def baseline_copy(store: Any, requests: Requests, src: str, dest: str) -> tuple[list[Request], float, int]:
    """Roll back without channels: copy the previous build's folder over the fixed location the servers
    load from (server-side copies; boto3's managed copy: multipart above 8 MiB, 10 files at a time)."""
    client = store.client
    bucket = BUCKET
    mark = requests.mark()
    start = time.perf_counter()
    listing = client.list_objects_v2(Bucket=bucket, Prefix=f"{PREFIX}/{src}/")
    objects = [(o["Key"], o["Size"]) for o in listing.get("Contents", [])]

    def one(obj: tuple[str, int]) -> int:
        key, size = obj
        rel = key.removeprefix(f"{PREFIX}/{src}/")
        client.copy({"Bucket": bucket, "Key": key}, bucket, f"{PREFIX}/{dest}/{rel}")
        return size

    with ThreadPoolExecutor(max_workers=10) as pool:
        total = sum(pool.map(one, objects))
    return requests.since(mark), time.perf_counter() - start, total


def report_rollback(store: Any, requests: Requests, args: argparse.Namespace) -> list[tuple[bool, str]]:
    from neuronforge.artifacts import channels

    rollbacks, (ref, a, b) = bench_rollback(store, requests, args)
    first = rollbacks[0]
    counts = [len(r.requests) for r in rollbacks]
    typical = statistics.median(counts)
    seconds = [r.seconds for r in rollbacks]
    record_key = ref.record_key
    print(f"\n== (a) rollback of {ref} (builds {a[:12]} and {b[:12]}, {args.artifact_mib} MiB each)")
    print(f"one call: releases.run(rollback --steps 1) -> {first.line}")
    print(f"requests of the first rollback: {len(first.requests)}")
    for r in first.requests:
        print(f"    {label(r, record_key):<22} {r.op:<12} {r.key}  ({r.bytes_up} bytes up)")
    compactions = [i for i, r in enumerate(rollbacks) if any(q.key.startswith("farm-index/pages") for q in r.requests)]
    print(
        f"{len(rollbacks)} rollbacks: requests median {typical:g}, min {min(counts)}, max {max(counts)}, "
        f"mean {statistics.mean(counts):.2f} (the farm index compacted during rollback(s) {compactions or 'none'}); "
        f"seconds median {statistics.median(seconds):.3f}, max {max(seconds):.3f}"
    )
    for i in compactions:
        kinds: dict[str, int] = {}
        for q in rollbacks[i].requests:
            kinds[label(q, record_key)] = kinds.get(label(q, record_key), 0) + 1
        print(f"    rollback {i} (compacting): " + ", ".join(f"{n} {k}" for k, n in kinds.items()))
    data = [q for r in rollbacks for q in copied(r.requests)]
    up = sum(q.bytes_up for r in rollbacks for q in r.requests)
    puts = [q for r in rollbacks for q in r.requests if q.op == "PutObject"]
    largest = {
        what: max((q.bytes_up for q in puts if label(q, record_key) == what), default=0)
        for what in ("channel PUT", "farm-index tail PUT")
    }
    print(
        f"data copied by the rollbacks: {len(data)} request(s); bytes sent up in all: {up:,} (records only; "
        f"largest channel record {largest['channel PUT']:,}, largest tail {largest['farm-index tail PUT']:,})"
    )
    # the channel points where the last rollback left it; the history names both builds
    record = channels.get(store, ref)
    expect = a if len(rollbacks) % 2 else b
    assert record.current.build.key == expect, (record.current.build.key, expect)

    # the baseline: the servers' fixed location holds B; roll back by copying A's folder over it
    dest = "deployments/bench-llama/stable"
    a_prefix = record.moves[0 if expect == a else 1].build.artifact_prefix
    b_prefix = record.moves[1 if expect == a else 0].build.artifact_prefix
    baseline_copy(store, Requests(), b_prefix, dest)  # the deployment as it was (not counted)
    base_reqs, base_s, base_bytes = baseline_copy(store, requests, a_prefix, dest)
    by_op: dict[str, int] = {}
    for q in base_reqs:
        by_op[q.op] = by_op.get(q.op, 0) + 1
    print(
        f"baseline (no channels: copy the previous build's folder over the fixed location): {len(base_reqs)} "
        f"requests ({', '.join(f'{n} {op}' for op, n in sorted(by_op.items()))}), {base_s:.3f} s, "
        f"{base_bytes / MIB:,.1f} MiB copied server-side"
    )
    print(
        f"ratio baseline/channel: requests {len(base_reqs) / typical:.1f}x, seconds "
        f"{base_s / statistics.median(seconds):.1f}x, bytes copied {base_bytes:,} vs 0"
    )
    cli = rollback_command(store, requests, ref)
    print(f"the command: `neuronforge {' '.join(cli.argv)}` -> {cli.said}")
    print(
        f"    in this process: {len(cli.requests)} requests ({', '.join(label(q, record_key) for q in cli.requests)}), "
        f"{cli.seconds:.3f} s; as its own process (interpreter and imports included): {cli.process_s:.2f} s"
    )
    breakdown = ", ".join(label(r, record_key) for r in cli.requests)
    data += copied(cli.requests)
    return [
        (
            cli.code == 0
            and cli.said.startswith(f"{ref}: rollback to ")
            and all(r.line.startswith(f"{ref}: rollback to ") for r in rollbacks),
            "one command: `neuronforge rollback MODEL --profile P --channel C` (releases.run, also behind the "
            "catalog's button and the release DAG)",
        ),
        (
            len(cli.requests) <= GOAL_REQUESTS,
            f"the command makes {len(cli.requests)} S3 requests (goal <= {GOAL_REQUESTS}): {breakdown}; "
            f"releases.run alone {len(first.requests)}"
            + (
                f" (amortised with the farm index's compaction: {statistics.mean(counts):.2f} over {len(counts)})"
                if compactions
                else ""
            ),
        ),
        (
            not data,
            f"no data copied: {len(data)} copy/upload request(s) of artifact data in {len(rollbacks) + 1} rollbacks",
        ),
        (
            max(*seconds, cli.seconds, cli.process_s) < GOAL_SECONDS,
            f"slowest rollback {max(*seconds, cli.seconds):.3f} s, the command as a process {cli.process_s:.2f} s "
            f"(goal < {GOAL_SECONDS:g} s)",
        ),
    ]


@dataclass
class Command:
    argv: list[str]
    code: int
    said: str
    requests: list[Request]
    seconds: float
    process_s: float


def rollback_command(store: Any, requests: Requests, ref: Any) -> Command:
    """`neuronforge rollback` as a user runs it: once in this process (its requests counted: the store it
    opens shares the client of `store`), once as its own process (seconds only), back and forth."""
    from neuronforge.interfaces.cli import main as cli_main

    argv = ["rollback", ref.model, "--profile", LINE, "--channel", "stable", "--store", store.root_uri]
    argv += ["--by", "bench-cli"]
    mark = requests.mark()
    start = time.perf_counter()
    with contextlib.redirect_stdout(io.StringIO()) as said:
        code = cli_main(argv)
    seconds = time.perf_counter() - start
    counted = requests.since(mark)
    exe = Path(sys.executable).parent / "neuronforge"
    cmd = [str(exe)] if exe.exists() else [sys.executable, "-m", "neuronforge.interfaces.cli"]
    start = time.perf_counter()
    proc = subprocess.run([*cmd, *argv], capture_output=True, text=True, env=os.environ.copy())
    process_s = time.perf_counter() - start
    if proc.returncode != 0:
        code = proc.returncode
    return Command(argv, code, said.getvalue().strip(), counted, seconds, process_s)


# -- (b) concurrent promotes ---------------------------------------------------------------------------------
class Gate:
    """Holds each attempt's conditional PUT of the channel record until every attempt of the round has
    either reached its PUT or ended without one, then releases them all at once."""

    def __init__(self, record_path: str) -> None:
        self.record_path = record_path
        self.cond = threading.Condition()
        self.expected = 0
        self.arrived = 0
        self.ended = 0
        self.open = False
        self.timed_out = 0
        self.local = threading.local()

    def start_round(self, expected: int) -> None:
        with self.cond:
            self.expected, self.arrived, self.ended, self.open = expected, 0, 0, False

    def __call__(self, request: Any, **_: Any) -> None:  # before-send.s3.PutObject
        path = unquote(urlsplit(request.url).path)
        if not path.endswith(self.record_path) or "If-Match" not in request.headers:
            return
        if getattr(self.local, "passed", False):
            return  # one hold per attempt (a retry of the same PUT goes straight on)
        self.local.passed = True
        with self.cond:
            self.arrived += 1
            self._maybe_open()
            if not self.cond.wait_for(lambda: self.open, timeout=60):
                self.timed_out += 1
                self.open = True
                self.cond.notify_all()

    def attempt_ended(self) -> None:
        with self.cond:
            if not getattr(self.local, "passed", False):
                self.ended += 1
                self._maybe_open()
            self.local.passed = False

    def _maybe_open(self) -> None:
        if self.arrived + self.ended >= self.expected:
            self.open = True
            self.cond.notify_all()


@dataclass
class Round:
    winners: list[Any] = field(default_factory=list)  # the ChannelMove each winner wrote
    moved: list[str] = field(default_factory=list)  # ChannelMoved messages
    unchanged: int = 0
    errors: list[str] = field(default_factory=list)
    seconds: float = 0.0
    held: int = 0  # gated: conditional PUTs of the channel record held and released together


@dataclass
class Attempts:
    """One round's promoters: all start together (`start_line`), each promotes one of `builds`."""

    store: Any
    ref: Any
    builds: list[str]
    round: int
    start_line: threading.Barrier
    gate: Gate | None
    result: Round = field(default_factory=Round)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def __call__(self, i: int) -> None:
        from neuronforge.artifacts import channels
        from neuronforge.artifacts.channels import ChannelMoved

        self.start_line.wait()
        try:
            build = self.builds[i % len(self.builds)]
            moved = channels.promote(self.store, self.ref, build=build, by=f"r{self.round}-t{i}")
            with self.lock:
                if moved.changed:
                    self.result.winners.append(moved.record.current)
                else:
                    self.result.unchanged += 1
        except ChannelMoved as exc:
            with self.lock:
                self.result.moved.append(str(exc))
        except Exception as exc:  # a bench counts every other outcome
            with self.lock:
                self.result.errors.append(f"{type(exc).__name__}: {exc}")
        finally:
            if self.gate is not None:
                self.gate.attempt_ended()


def race(store: Any, model: str, args: argparse.Namespace, gate: Gate | None) -> tuple[list[Round], Any]:
    from neuronforge.artifacts import channels

    keys = [publish(store, model, n, 64 * 1024) for n in range(args.builds)]
    for key in keys:
        approve(store, key)
    ref = channels.ChannelRef.parse(model, LINE, "stable")
    channels.promote(store, ref, build=keys[0], by="setup")
    rounds: list[Round] = []
    with ThreadPoolExecutor(max_workers=args.threads) as pool:
        for n in range(args.rounds):
            current = channels.get(store, ref).current.build.key
            others = [k for k in keys if k != current]  # promoting the current build writes nothing
            attempts = Attempts(store, ref, others, n, threading.Barrier(args.threads), gate)
            if gate is not None:
                gate.start_round(args.threads)
            t0 = time.perf_counter()
            list(pool.map(attempts, range(args.threads)))
            attempts.result.seconds = time.perf_counter() - t0
            attempts.result.held = gate.arrived if gate is not None else 0
            rounds.append(attempts.result)
    return rounds, channels.get(store, ref)


def history_complete(record: Any, rounds: list[Round], ordered: bool) -> tuple[bool, str]:
    """Every winner's move is in the final history, the chain of `previous` holds, and (gated: one
    winner a round) in round order."""
    from neuronforge.records.channel import HISTORY_KEPT

    winners = [w for r in rounds for w in r.winners]
    moves = record.moves  # newest first
    if len(winners) + 1 > HISTORY_KEPT + 1:
        return False, f"{len(winners)} winners: more than the {HISTORY_KEPT} moves a channel keeps; lower --rounds"
    kept = moves[: len(winners)]
    missing = {w.by for w in winners} - {m.by for m in kept}
    chain = all(moves[i].previous == moves[i + 1].build.key for i in range(len(moves) - 1))
    extra = len(moves) != len(winners) + 1  # + the setup move
    in_order = [m.by for m in reversed(kept)] == [w.by for r in rounds for w in r.winners]
    ok = not missing and chain and not extra and (in_order or not ordered)
    what = (
        f"history: {len(moves)} moves = setup + {len(winners)} winners; missing {len(missing)}; "
        f"chain of previous keys {'holds' if chain else 'BROKEN'}"
    )
    if ordered:
        what += f"; in round order: {'yes' if in_order else 'NO'}"
    return ok, what


def report_race(store: Any, args: argparse.Namespace) -> list[tuple[bool, str]]:
    from neuronforge.artifacts import channels

    out: list[tuple[bool, str]] = []
    for mode in ("gated", "free"):
        model = f"bench/race-{mode}"
        ref = channels.ChannelRef.parse(model, LINE, "stable")
        gate = Gate(f"/{BUCKET}/{PREFIX}/{ref.record_key}") if mode == "gated" else None
        if gate is not None:
            store.client.meta.events.register("before-send.s3.PutObject", gate)
        try:
            rounds, record = race(store, model, args, gate)
        finally:
            if gate is not None:
                store.client.meta.events.unregister("before-send.s3.PutObject", gate)
        print(f"\n== (b) {args.threads} concurrent promotes of {ref}, {args.rounds} rounds, {mode}")
        print("round  winners  ChannelMoved  unchanged  errors  seconds" + ("  PUTs held together" if gate else ""))
        for n, r in enumerate(rounds):
            print(
                f"{n:>5}  {len(r.winners):>7}  {len(r.moved):>12}  {r.unchanged:>9}  {len(r.errors):>6}  "
                f"{r.seconds:7.2f}" + (f"  {r.held:>19}" if gate else "")
            )
        errors = [e for r in rounds for e in r.errors]
        for e in sorted(set(errors))[:3]:
            print(f"    error: {e}")
        if rounds and rounds[0].moved:
            print(f"    a loser was told: {rounds[0].moved[0]}")
        complete, what = history_complete(record, rounds, ordered=mode == "gated")
        print(f"    {what}")
        if gate is not None and gate.timed_out:
            print(f"    the gate timed out {gate.timed_out} time(s): some attempts neither wrote nor ended in 60 s")
        attempts = args.threads * args.rounds
        if mode == "gated":
            one = sum(len(r.winners) == 1 for r in rounds)
            named = sum(
                all(f"moved by {r.winners[0].by} " in m for m in r.moved) for r in rounds if len(r.winners) == 1
            )
            everyone = all(len(r.winners) + len(r.moved) == args.threads for r in rounds)
            together = all(r.held == args.threads for r in rounds)
            out.append(
                (
                    one == len(rounds) and everyone and together and not errors,
                    f"gated: exactly one winner in {one} of {len(rounds)} rounds; every other attempt ChannelMoved: "
                    f"{'yes' if everyone else 'NO'} ({attempts} attempts, {len(errors)} errors; all {args.threads} "
                    f"PUTs of each round released together: {'yes' if together else 'NO'}); "
                    f"the losers told the winner's name in {named} round(s)",
                )
            )
        else:
            wins = [len(r.winners) for r in rounds]
            out.append(
                (
                    not errors and all(w >= 1 for w in wins),
                    f"free: winners per round {wins} (each later winner moved from the one before), "
                    f"{attempts} attempts, {len(errors)} errors",
                )
            )
        out.append((complete, f"{mode}: no lost history entry — {what}"))
    return out


# -- main ------------------------------------------------------------------------------------------------------
def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--artifact-mib", type=int, default=256, help="size of each rollback build (default 256 MiB)")
    ap.add_argument("--rollbacks", type=int, default=34, help="rollbacks to time (34: one compacts the farm index)")
    ap.add_argument("--threads", type=int, default=50, help="concurrent promoters of one channel")
    ap.add_argument("--rounds", type=int, default=10, help="rounds of concurrent promotes, per mode")
    ap.add_argument("--builds", type=int, default=6, help="approved builds the promoters choose from")
    ap.add_argument("--quick", action="store_true", help="1 MiB builds, 3 rollbacks, 2 rounds (the smoke test)")
    args = ap.parse_args()
    if args.quick:
        args.artifact_mib, args.rollbacks, args.rounds = 1, 3, 2
    if args.builds < 2 or args.threads < 2 or args.rollbacks < 1 or args.rounds < 1:
        raise SystemExit("--builds and --threads must be at least 2, --rollbacks and --rounds at least 1")

    t_start = time.monotonic()
    scratch = Path(tempfile.mkdtemp(prefix="nf-bench-channels-"))
    os.environ["NEURONFORGE_HOME"] = str(scratch / "home")
    for var in ("AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_ENDPOINT_URL_S3", "NEURONFORGE_APPROVAL_CHANNELS"):
        os.environ.pop(var, None)
    os.environ.update(AWS_ACCESS_KEY_ID="bench", AWS_SECRET_ACCESS_KEY="bench", AWS_DEFAULT_REGION="us-east-1")
    logging.basicConfig(level=logging.ERROR)
    moto = None
    failed = False
    try:
        moto, endpoint = start_moto()
        os.environ["AWS_ENDPOINT_URL"] = endpoint
        import boto3

        boto3.client("s3", endpoint_url=endpoint).create_bucket(Bucket=BUCKET)
        from neuronforge.stores import open_store

        store = open_store(f"s3://{BUCKET}/{PREFIX}")
        requests = Requests()
        store.client.meta.events.register("before-send.s3", requests)
        print(f"endpoint: moto on {endpoint} (child process); store {store.root_uri}")
        goals = report_rollback(store, requests, args)
        goals += report_race(store, args)
        print("\nGoals")
        for ok, line in goals:
            print(f"  {'PASS' if ok else 'FAIL'} {line}")
            failed |= not ok
        print(f"wall {time.monotonic() - t_start:.0f} s")
    finally:
        if moto is not None:
            moto.kill()
            moto.wait()
        import shutil

        shutil.rmtree(scratch, ignore_errors=True)
    return 1 if failed and not args.quick else 0


if __name__ == "__main__":
    sys.exit(main())
