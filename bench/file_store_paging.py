#!/usr/bin/env python
"""File-store paging benchmark: one page of `store ls` and one key's lookup on a `file://` farm of N
artifacts, with the folder walk that stops (`FileStore.list_page`) against the listing it replaced
(every object under the prefix, sorted, then sliced: `ArtifactStore.list_page`), same farm, same run.

The farm is laid out as publishing lays it out: `artifacts/<org>/<name>/<rev>/<target>/<key12>/` with a
manifest and a few files, and `index/<key>.json`. For each N it prints the seconds of both and their
ratio, and whether the goals of issue 41 hold (one page <= 0.5 s, one artifact <= 0.1 s, independent
of N). A benchmark, not a test: it asserts nothing and is never timed in CI.

    .venv/bin/python bench/file_store_paging.py [--sizes 1000 5000] [--rounds 3]
"""

from __future__ import annotations

import argparse
import hashlib
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from neuronforge.artifacts.published import find_key
from neuronforge.stores.base import ArtifactStore, ObjectInfo, clean_key
from neuronforge.stores.file import FileStore

GOAL_PAGE_S, GOAL_KEY_S = 0.5, 0.1
FILES = ("manifest.json", "smoke.json", "launch/serve.sh", "model/config.json")


class Baseline(FileStore):
    """The file store as it listed before (ported): the whole prefix walked (pathlib's rglob) and sorted,
    then a page sliced from it."""

    list_page = ArtifactStore.list_page

    def list(self, prefix: str = "") -> list[ObjectInfo]:
        base = self._path(prefix) if prefix.strip("/") else self.root
        if base.is_file():
            return [ObjectInfo(clean_key(prefix), base.stat().st_size)]
        if not base.is_dir():
            return []
        out = []
        for path in base.rglob("*"):
            if path.is_file() and not path.name.startswith(".nf-tmp-") and path.resolve().is_relative_to(self.root):
                out.append(ObjectInfo(path.relative_to(self.root).as_posix(), path.stat().st_size))
        return sorted(out, key=lambda o: o.key)


def farm(root: Path, n: int) -> list[str]:
    keys = [hashlib.sha256(f"artifact {i}".encode()).hexdigest() for i in range(n)]
    for i, key in enumerate(keys):
        base = root / "artifacts" / f"org{i % 20:02d}" / f"model-{i:05d}" / "rev0" / "cpu-b1-s64" / key[:12]
        for rel in FILES:
            (base / rel).parent.mkdir(parents=True, exist_ok=True)
            (base / rel).write_text("{}")
        (root / "index").mkdir(exist_ok=True)
        (root / "index" / f"{key}.json").write_text("{}")
    return keys


def timed(fn, rounds: int) -> float:
    runs = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        fn()
        runs.append(time.perf_counter() - t0)
    return statistics.median(runs)


def cases(probe: str) -> list[tuple[str, Callable[[FileStore], object], float]]:
    return [
        ("store ls artifacts (a 1000-object page)", lambda s: s.list_page("artifacts", limit=1000), GOAL_PAGE_S),
        ("one artifact's key lookup (find_key)", lambda s: find_key(s, probe), GOAL_KEY_S),
    ]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[1000, 5000])
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    print(f"{'N':>6}  {'operation':<40} {'walk (s)':>9} {'baseline (s)':>13} {'ratio':>7}  goal")
    for n in args.sizes:
        with tempfile.TemporaryDirectory(prefix="nf-bench-paging-") as tmp:
            root = Path(tmp) / "store"
            keys = farm(root, n)
            ours, base = FileStore(root), Baseline(root)
            probe = keys[n // 2][:12]
            for what, op, goal in cases(probe):
                assert op(ours) == op(base), what  # the same answer
                t_ours, t_base = timed(partial(op, ours), args.rounds), timed(partial(op, base), args.rounds)
                met = "met" if t_ours <= goal else "MISSED"
                print(f"{n:>6}  {what:<40} {t_ours:>9.4f} {t_base:>13.4f} {t_base / t_ours:>6.1f}x  <= {goal} s {met}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
