"""Pre-seeding the local Neuron compile cache from the store vs the compiler reading S3 directly.

Two ways a worker can reuse graphs another worker compiled:
  (a) pre-seed: before compiling, copy every complete `neuronxcc-<ver>/MODULE_*` entry of the
      store's `neuron-cache/` into the local cache (`CompileCache.preseed`, parallel transfers),
      then the compiler finds its graphs on local disk;
  (b) direct: `NEURON_COMPILE_CACHE_URL=s3://…/neuron-cache`; the compiler looks each graph up in
      S3 when it reaches it — one existence check of `model.done` and one download of
      `model.neff` per graph, one after the other, as libneuronxla's cache does;
  (c) scoped pre-seed (what neuronforge does): pull only the entries recorded for the request's
      graph set (`neuron-cache-sets/…/<graph set>.json`), in parallel, before compiling.
Measured here for a compile that needs `--needed` graphs while the store holds N entries of the
same compiler version (other models, other shapes), against a local S3 endpoint, median of
`--rounds`. With `--rtt-ms` every S3 request of (b) and every listing page of (a) also waits that
long, to model an in-region S3 round trip that a loopback endpoint does not have.

    .venv/bin/python bench/cache_seed.py [--entries 8 64 256] [--neff-mib 8] [--needed 2] [--rtt-ms 0 20]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.transfer import BUCKET, KEY, SECRET, start_endpoint
from neuronforge.artifacts import layout
from neuronforge.compilation.compile_cache import CompileCache
from neuronforge.stores.s3 import S3Store

VERSION = "2.21.33363.0+82129205"  # neuronx-cc of SDK 2.26.1 as it names its cache folder (local label kept)
MIB = 1024**2


def make_entry(root: Path, i: int, neff_bytes: int) -> str:
    name = f"MODULE_{i:020d}+d41d8cd9"
    entry = root / layout.compiler_dir("neuronxcc", VERSION) / name
    entry.mkdir(parents=True)
    (entry / "model.hlo_module.pb").write_bytes(os.urandom(64 * 1024))
    (entry / "compile_flags.json").write_text("[]")
    (entry / "model.neff").write_bytes(os.urandom(neff_bytes))
    (entry / "model.done").write_text("")
    return name


def direct(store: S3Store, names: list[str], dest: Path, rtt: float) -> None:
    """What the compiler does against an s3:// cache URL: per graph, check then fetch, serially."""
    prefix = layout.neuron_cache_prefix("neuronxcc", VERSION)  # neuron-cache/neuronxcc-2.21.33363.0+82129205
    for name in names:
        time.sleep(rtt)
        assert store.exists(f"{prefix}/{name}/model.done")
        time.sleep(rtt)
        store.get_file(f"{prefix}/{name}/model.neff", dest / name / "model.neff")


def preseed(store: S3Store, root: Path, count: int, rtt: float) -> None:
    time.sleep(rtt * max(1, count * 4 // 1000))  # listing pages of 1000 keys
    CompileCache(root, "neuronxcc", VERSION, store).preseed()


def scoped(store: S3Store, root: Path, names: list[str], rtt: float) -> None:
    time.sleep(rtt)  # reading the graph-set record
    time.sleep(rtt * 2 * len(names) / 4)  # per entry: a listing and the downloads, 4 threads
    CompileCache(root, "neuronxcc", VERSION, store).preseed(names)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--entries", type=int, nargs="+", default=[8, 64, 256])
    ap.add_argument("--neff-mib", type=float, default=8)
    ap.add_argument("--needed", type=int, default=2)
    ap.add_argument("--rtt-ms", type=float, nargs="+", default=[0, 20])
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    os.environ.update({"AWS_ACCESS_KEY_ID": KEY, "AWS_SECRET_ACCESS_KEY": SECRET, "AWS_DEFAULT_REGION": "us-east-1"})
    scratch = Path(tempfile.mkdtemp(prefix="nf-bench-cache-"))
    proc, url = start_endpoint("rclone", scratch / "s3data")
    try:
        print(f"endpoint rclone at {url}; neff {args.neff_mib} MiB; compile needs {args.needed} graphs")
        print(
            f"{'entries':>8} {'rtt ms':>7} {'pre-seed all s':>15} {'direct s':>9} {'scoped s':>9} "
            f"{'all/direct':>11} {'scoped/direct':>14}"
        )
        for n in args.entries:
            store = S3Store(BUCKET, f"n{n}", endpoint_url=url)
            src = scratch / f"src{n}"
            names = [make_entry(src, i, int(args.neff_mib * MIB)) for i in range(n)]
            store.put_tree(src, "neuron-cache")
            needed = names[: args.needed]
            for rtt_ms in args.rtt_ms:
                rtt = rtt_ms / 1000
                a, b, c = [], [], []
                for r in range(args.rounds):
                    local = scratch / f"local-{n}-{rtt_ms}-{r}"
                    t0 = time.perf_counter()
                    preseed(store, local, n, rtt)
                    a.append(time.perf_counter() - t0)
                    t0 = time.perf_counter()
                    direct(store, needed, scratch / f"direct-{n}-{rtt_ms}-{r}", rtt)
                    b.append(time.perf_counter() - t0)
                    t0 = time.perf_counter()
                    scoped(store, scratch / f"scoped-{n}-{rtt_ms}-{r}", needed, rtt)
                    c.append(time.perf_counter() - t0)
                    shutil.rmtree(local, ignore_errors=True)
                ma, mb, mc = (statistics.median(x) for x in (a, b, c))
                print(f"{n:>8} {rtt_ms:>7.0f} {ma:>15.3f} {mb:>9.3f} {mc:>9.3f} {ma / mb:>10.1f}x {mc / mb:>13.2f}x")
            shutil.rmtree(src, ignore_errors=True)
    finally:
        proc.kill()
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
