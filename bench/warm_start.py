#!/usr/bin/env python
"""Warm-start benchmark: a serving host syncing a published vllm-neuron-native artifact with the build's
own launch/sync.sh, against `s5cmd sync` and `aws s3 sync` of the same bytes, same endpoint, same run.

The artifact has the shape of a real one: safetensors shards (default 3 x 1 GiB) and config files, the
artifact's manifest.json, and a vLLM compile cache of --entries entries of mixed sizes (from KiB to
hundreds of MiB: a few large NEFFs, many small graphs) with its vllm-cache.json; the launch files are
rendered by the profile itself (`VllmNativeProfile.launch_spec`), so sync.sh is the one a build publishes.
It lies in the data folder of a local `rclone serve s3` endpoint (why rclone, and the pre-warm read:
bench/transfer.py), then, over --rounds rounds in alternating order, each client fills a fresh host
folder: sync.sh (SYNC_TOOL=boto3: parallel ranged reads, each file hashed as it streams and checked
against the manifest), `s5cmd sync` (both prefixes in one `s5cmd run`) and `aws s3 sync` (one per
prefix) — the last two check nothing — and `s5cmd sync` followed by the sha256 of every file (hashlib,
one thread per core): the same checks sync.sh makes, done after. Then sync.sh runs again on the host it
filled (the second start) through a counting proxy: its seconds and its requests.

Prints MB/s per client (10^6 bytes), each client's CPU and the endpoint's per GB (they share the cores),
what sha256 alone costs here, our ratio to each, the second start, and the goals with met/NOT MET: first
sync >= 1.0x s5cmd, second start <= 1 s and <= 3 requests. --bwlimit caps the endpoint (rclone's
--bwlimit, MiB/s) so the network rather than the CPU is what every client waits on. A benchmark, not a
test: timings on a shared machine are noisy; compare within one run.

    .venv/bin/python bench/warm_start.py [--shards 3] [--shard-mib 1024] [--entries 30] [--cache-mib 600]
                                         [--rounds 2] [--bwlimit MIBS] [--dir DIR]
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import os
import random
import resource
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.transfer import BUCKET, KEY, SECRET, start_endpoint

MIB = 1 << 20
ARTIFACT = "farm/artifacts/org/model/rev/slug/abcdef012345"
CACHE = "farm/vllm-neuron-cache/2.32.0"
PROFILE = "vllm-neuron-native@2.32"


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(4 * MIB):
            h.update(block)
    return h.hexdigest()


# -- the artifact -------------------------------------------------------------------------------------------
def _write(path: Path, size: int, block: bytes, salt: int) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as f:
        left = size - 8
        while left > 0:
            n = min(left, len(block))
            f.write(block[:n])
            left -= n
        f.write(salt.to_bytes(8, "little"))  # each file distinct


def entry_sizes(n: int, total_mib: int) -> list[int]:
    """n cache entries' NEFF sizes: a few of hundreds of MiB, the rest from KiB to a few MiB (what a
    bucketed decoder's graphs look like), scaled to about total_mib."""
    rng = random.Random(41)
    big = max(1, n // 10)
    small = [rng.randint(4 * 1024, 4 * MIB) for _ in range(n - big)]
    room = max(total_mib * MIB - sum(small), big * MIB)
    weights = [rng.uniform(1, 3) for _ in range(big)]
    return [int(room * w / sum(weights)) for w in weights] + small


def make_artifact(data: Path, work: Path, shards: int, shard_mib: int, entries: int, cache_mib: int) -> Path:
    """The artifact and the cache in rclone's data folder; returns the launch folder (as a host gets it)."""
    from neuronforge.compilation.backends.vllm_native import CACHE_MANIFEST
    from neuronforge.compilation.vllm_cache import MARKER, CacheManifest, entry_record
    from neuronforge.profiles import get_profile
    from neuronforge.profiles.base import LaunchContext
    from neuronforge.records.artifact_manifest import ArtifactManifest, SourceRef, ToolchainRef
    from neuronforge.records.local import write_local
    from neuronforge.records.parts import FileEntry
    from neuronforge.spec.target import TargetSpec
    from neuronforge.spec.toolchain import Toolchain

    block = os.urandom(16 * MIB)
    root = data / BUCKET / ARTIFACT
    model = root / "model"
    for i in range(shards):
        _write(model / f"model-{i + 1:05d}-of-{shards:05d}.safetensors", shard_mib * MIB, block, i)
    for name in ("config.json", "generation_config.json", "tokenizer.json", "model.safetensors.index.json"):
        (model / name).write_text('{"bench": true}\n' * 64)
    cache = data / BUCKET / CACHE
    records = []
    for i, size in enumerate(entry_sizes(entries, cache_mib)):
        key = f"{i + 1:032x}"
        entry = cache / key
        _write(entry / f"graph_{key}.neff", size, block, 1000 + i)
        (entry / "graph.hlo").write_bytes(os.urandom(16 * 1024))
        (entry / MARKER).write_text("")
        records.append(entry_record(entry))
    files = [
        FileEntry(path=p.relative_to(root).as_posix(), size=p.stat().st_size, sha256=_sha256(p))
        for p in sorted(model.iterdir())
    ]
    manifest = ArtifactManifest(cache_key="0" * 64, source=SourceRef(), toolchain=ToolchainRef(), files=files)
    (root / "manifest.json").write_bytes(manifest.to_bytes())

    p = get_profile(PROFILE)
    t = TargetSpec.parse({"instance_type": "trn2.3xlarge", "tp_degree": 4, "batch_size": 2, "sequence_length": 256})
    t = TargetSpec.parse({**t.model_dump(), "profile": PROFILE})
    command = p.serve_command(t)
    cache_manifest = CacheManifest(
        profile=p.ref,
        store_prefix=f"s3://{BUCKET}/{CACHE}",
        versions={"neuronx-cc": p.release.compiler, **p.release.packages()},
        target="trn2",
        route=p.release.route,
        image=p.release.image,
        argv=list(command.argv),
        env=dict(command.env),
        entries=records,
        nki=[],
    )
    build = work / "build"
    build.mkdir(parents=True)
    write_local(cache_manifest, build / CACHE_MANIFEST)
    toolchain = Toolchain("vllm-neuron-native", "0.24.0", "neuronxcc", p.release.compiler)
    ctx = LaunchContext(
        t.normalized(), toolchain, f"s3://{BUCKET}/{ARTIFACT}", f"s3://{BUCKET}/farm/neuron-cache", "llama", None, build
    )
    launch = work / "launch"
    launch.mkdir()
    for name, text in p.launch_spec(ctx).items():
        (launch / name).write_text(text)
    return launch


# -- counting requests -----------------------------------------------------------------------------------
class CountingProxy:
    """A TCP proxy in front of the endpoint that counts HTTP requests (each request head, its body
    skipped by Content-Length), so a client's requests are counted without trusting the client."""

    def __init__(self, upstream_port: int) -> None:
        self.upstream = upstream_port
        self.requests = 0
        self.lock = threading.Lock()
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.port = self.sock.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.sock.accept()
            except OSError:
                return
            server = socket.create_connection(("127.0.0.1", self.upstream))
            threading.Thread(target=self._up, args=(client, server), daemon=True).start()
            threading.Thread(target=self._pipe, args=(server, client), daemon=True).start()

    def _up(self, src: socket.socket, dst: socket.socket) -> None:
        buf, body = b"", 0
        try:
            while data := src.recv(1 << 16):
                dst.sendall(data)
                buf += data
                while True:
                    if body:
                        skip = min(body, len(buf))
                        buf, body = buf[skip:], body - skip
                        if body:
                            break
                    end = buf.find(b"\r\n\r\n")
                    if end < 0:
                        break
                    head, buf = buf[:end].lower(), buf[end + 4 :]
                    with self.lock:
                        self.requests += 1
                    for line in head.split(b"\r\n"):
                        if line.startswith(b"content-length:"):
                            body = int(line.split(b":", 1)[1])
        except OSError:
            pass
        finally:
            _close(dst)

    @staticmethod
    def _pipe(src: socket.socket, dst: socket.socket) -> None:
        try:
            while data := src.recv(1 << 20):
                dst.sendall(data)
        except OSError:
            pass
        finally:
            _close(dst)

    def close(self) -> None:
        self.sock.close()


def _close(s: socket.socket) -> None:
    with contextlib.suppress(OSError):
        s.shutdown(socket.SHUT_RDWR)
    s.close()


# -- the clients -------------------------------------------------------------------------------------------
def run(cmd: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"{cmd[0]} failed ({done.returncode}): {done.stderr.strip()[-500:]}")
    return done


def children_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


# The equal-work baseline's checks: every file's sha256 with hashlib (OpenSSL's, as sync.sh's), one thread per
# core (hashlib lets go of the GIL), each reading into a buffer it reuses. coreutils' sha256sum is no fair
# stand-in: it does not use the CPU's SHA instructions here (~4x the CPU per GB).
HASH_ALL = """
import hashlib, os, sys
from concurrent.futures import ThreadPoolExecutor
def sha(path):
    h, buf = hashlib.sha256(), memoryview(bytearray(1 << 20))
    with open(path, "rb", buffering=0) as f:
        while n := f.readinto(buf):
            h.update(buf[:n])
    return h.hexdigest()
with ThreadPoolExecutor(os.cpu_count() or 1) as pool:
    list(pool.map(sha, sys.argv[1].splitlines()))
"""


def process_cpu(pid: int) -> float:
    """A running process's CPU seconds so far (the endpoint's: it is not a finished child)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def sha256_cpu_per_gb() -> float:
    """What hashlib's sha256 costs on this machine, CPU seconds per 10^9 bytes (256 MiB hashed)."""
    block, start = os.urandom(16 * MIB), time.process_time()
    h = hashlib.sha256()
    for _ in range(16):
        h.update(block)
    return (time.process_time() - start) / (256 * MIB / 1e9)


def host_bytes(host: Path) -> int:
    return sum(p.stat().st_size for p in host.rglob("*") if p.is_file() and not p.name.startswith("."))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shards", type=int, default=3)
    ap.add_argument("--shard-mib", type=int, default=1024)
    ap.add_argument("--entries", type=int, default=30)
    ap.add_argument("--cache-mib", type=int, default=600, help="the cache entries' total, about")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--second-starts", type=int, default=3)
    ap.add_argument("--bwlimit", type=int, default=0, help="cap the endpoint at this many MiB/s (0: no cap)")
    ap.add_argument("--dir", default=None, help="scratch folder (default: a temp dir)")
    args = ap.parse_args()

    scratch = Path(tempfile.mkdtemp(prefix="nf-warm-", dir=args.dir))
    bindir = Path(sys.executable).parent
    creds = {"AWS_ACCESS_KEY_ID": KEY, "AWS_SECRET_ACCESS_KEY": SECRET, "AWS_DEFAULT_REGION": "us-east-1"}
    proc = proxy = None
    try:
        cap = ["--bwlimit", f"{args.bwlimit}M"] if args.bwlimit else []
        proc, url = start_endpoint("rclone", scratch / "s3data", *cap)  # it serves the files written below
        launch = make_artifact(scratch / "s3data", scratch, args.shards, args.shard_mib, args.entries, args.cache_mib)
        port = int(url.rsplit(":", 1)[1])
        env = {**os.environ, **creds, "PATH": f"{bindir}{os.pathsep}{os.environ['PATH']}", "AWS_ENDPOINT_URL": url}
        s5 = [str(bindir / "s5cmd"), "--endpoint-url", url]
        prefixes = [f"s3://{BUCKET}/{ARTIFACT}/model/", f"s3://{BUCKET}/{CACHE}/"]

        def host(name: str) -> Path:
            d = scratch / "hosts" / name
            shutil.rmtree(d, ignore_errors=True)
            d.mkdir(parents=True)
            return d

        def ours(h: Path, via: str = url) -> subprocess.CompletedProcess[str]:
            e = {**env, "AWS_ENDPOINT_URL": via, "SYNC_TOOL": "boto3", "MODEL_DIR": str(h / "model"),
                 "VLLM_CACHE_ROOT": str(h / "vllm")}  # fmt: skip
            return run(["bash", str(launch / "sync.sh")], e)

        def s5cmd_sync(h: Path) -> None:
            cmds = h.parent / "s5cmd-run.txt"
            cmds.write_text(f"sync '{prefixes[0]}*' {h}/model/\nsync '{prefixes[1]}*' {h}/cache/\n")
            run([*s5, "run", str(cmds)], env)

        def s5cmd_sha256(h: Path) -> None:
            s5cmd_sync(h)
            files = "\n".join(str(p) for p in h.rglob("*") if p.is_file())
            run([sys.executable, "-c", HASH_ALL, files], env)

        def aws_sync(h: Path) -> None:
            for prefix, folder in zip(prefixes, ("model", "cache"), strict=True):
                run([str(bindir / "aws"), "s3", "sync", "--only-show-errors", prefix, str(h / folder)], env)

        total = host_bytes(scratch / "s3data" / BUCKET / ARTIFACT / "model") + host_bytes(
            scratch / "s3data" / BUCKET / CACHE
        )
        files = sum(1 for p in (scratch / "s3data").rglob("*") if p.is_file()) - 1  # minus manifest.json
        print(
            f"artifact: {args.shards} shards of {args.shard_mib} MiB + {args.entries} cache entries "
            f"(~{args.cache_mib} MiB, KiB to hundreds of MiB): {total / MIB:.0f} MiB in {files} files; "
            f"rclone at {url}{f' capped at {args.bwlimit} MiB/s' if args.bwlimit else ''}; {os.cpu_count()} cores"
        )
        s5cmd_sync(host("warm"))  # rclone hashes an object when first served: read everything once first
        shutil.rmtree(scratch / "hosts" / "warm")

        clients = {"sync.sh": lambda h: ours(h), "s5cmd sync": s5cmd_sync, "s5cmd+sha256": s5cmd_sha256,
                   "aws s3 sync": aws_sync}  # fmt: skip
        rates: dict[str, list[float]] = {c: [] for c in clients}
        cpu: dict[str, list[float]] = {c: [] for c in clients}  # the client's own CPU seconds (not rclone's)
        endpoint_cpu: dict[str, list[float]] = {c: [] for c in clients}
        said = ""
        order = list(clients)
        for r in range(args.rounds):
            for name in order if r % 2 == 0 else reversed(order):
                h = host(name.split()[0])
                os.sync()
                start, cpu0, served0 = time.perf_counter(), children_cpu(), process_cpu(proc.pid)
                done = clients[name](h)
                seconds = time.perf_counter() - start
                cpu[name].append(children_cpu() - cpu0)
                endpoint_cpu[name].append(process_cpu(proc.pid) - served0)
                if isinstance(done, subprocess.CompletedProcess):
                    said = done.stderr.strip().splitlines()[-1]
                got = host_bytes(h)
                if got != total:
                    print(f"warning: {name} left {got} of {total} bytes")
                rates[name].append(total / 1e6 / seconds)
                if name != "sync.sh" or r < args.rounds - 1:
                    shutil.rmtree(h)
        # the second start: the host sync.sh filled in the last round, everything present
        proxy = CountingProxy(port)
        warm = scratch / "hosts" / "sync.sh"
        seconds, counts, second_cpu = [], [], []
        for _ in range(args.second_starts):
            before = proxy.requests
            start, cpu0 = time.perf_counter(), children_cpu()
            again = ours(warm, f"http://127.0.0.1:{proxy.port}")
            seconds.append(time.perf_counter() - start)
            second_cpu.append(children_cpu() - cpu0)
            time.sleep(0.2)  # the proxy's threads count what they forwarded
            counts.append(proxy.requests - before)
            if not again.stdout.startswith("sync.sh: 0 fetched"):
                print(f"warning: the second start fetched: {again.stdout.strip()}")

        gb = total / 1e9
        for c, v in rates.items():
            per_gb, served = statistics.median(cpu[c]) / gb, statistics.median(endpoint_cpu[c]) / gb
            print(f"{c:<12} MB/s per round {[round(x) for x in v]}; client CPU {per_gb:.2f} s per GB, "
                  f"endpoint {served:.2f}")  # fmt: skip
        print(f"sha256 alone: {sha256_cpu_per_gb():.2f} s of CPU per GB here (hashlib)")
        med = {c: statistics.median(v) for c, v in rates.items()}
        print(f"\n{'client':<14}{'first sync MB/s':>16}   (median of {args.rounds} rounds, 10^6 bytes)")
        for c, m in med.items():
            print(f"{c:<14}{m:>16.0f}")
        print(f"\nsync.sh said: {said}")
        for other in ("s5cmd sync", "s5cmd+sha256", "aws s3 sync"):
            print(f"sync.sh / {other:<12} {med['sync.sh'] / med[other]:.2f}x")
        second, requests = statistics.median(seconds), max(counts)
        print(f"second start: {second:.2f} s (median of {len(seconds)}: {[round(s, 2) for s in seconds]}; CPU "
              f"{statistics.median(second_cpu):.2f} s), {requests} requests (each run: {counts})")  # fmt: skip
        print("\ngoals:")
        capped = f", endpoint capped at {args.bwlimit} MiB/s" if args.bwlimit else ""
        goals = [
            (f"first sync >= 1.0x s5cmd sync ({med['sync.sh'] / med['s5cmd sync']:.2f}x{capped})",
             med["sync.sh"] >= med["s5cmd sync"]),
            (f"second start <= 1 s ({second:.2f} s)", second <= 1.0),
            (f"second start <= 3 requests ({requests})", requests <= 3),
        ]  # fmt: skip
        for what, met in goals:
            print(f"  {'met    ' if met else 'NOT MET'}  {what}")
    finally:
        if proxy:
            proxy.close()
        if proc:
            proc.terminate()
            proc.wait(timeout=10)
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
