"""Which format the farm index's pages use: JSON lines + gzip (what `neuronforge.artifacts.farm_index`
writes) against one SQLite database file, for the same rows — bytes a reader downloads, and the
time to encode (a compaction) and decode every row (a reader). Parquet (pyarrow) is not in this
environment's pins; rows with nested, optional fields (formats, launch files, failures) suit it less.

    .venv/bin/python bench/farm_index_format.py [--rows 5000]

Prints ratios against JSON lines + gzip measured in the same run.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import sqlite3
import tempfile
import time
from pathlib import Path

from neuronforge.artifacts.farm_index.entry import Entry


def rows(n: int) -> list[Entry]:
    """Rows shaped like a farm's: many models, a few profiles and instances, per-target summaries."""
    out = []
    for i in range(n):
        key = hashlib.sha256(str(i).encode()).hexdigest()
        model = f"org-{i % 37}/model-{i % 211}"
        profile = ("vllm-neuron@2.26.1", "optimum-neuron@2.26.1", "lmi-neuronx@2.21.1", "cpu@local")[i % 4]
        target = f"{profile.split('@')[0]}-inf2.48xlarge-tp{2 ** (i % 4)}-b{1 + i % 8}-s{4096 >> (i % 3)}-bf16"
        prefix = f"artifacts/{model}/{key[:40]}/{target}/{key[:12]}"
        e = Entry(key, model, profile, target, "inf2.48xlarge")
        e.published = {
            "revision": key[:40],
            "compiler": "neuronxcc",
            "compiler_version": "2.21.33363.0+82129205",
            "files": 14,
            "size_bytes": 16_000_000_000 + i,
            "ttft_ms": 41.5,
            "per_token_ms": 12.25,
            "cpu_seconds": 812.4,
            "neuron_seconds": 40.1,
            "at": "2026-11-25T06:00:00Z",
            "run_id": f"scheduled__2026-11-25T06:00:00+00:00__{i:05d}",
            "prefix": prefix,
            "manifest": f"{prefix}/manifest.json",
            "formats": {"nxdi": "nxdi", "launch": "launch"},
            "launch": ["serve.sh", "vllm.env"],
            "variant": key[40:56],
        }
        out.append(e)
    return out


def jsonl_gzip(entries: list[Entry]) -> tuple[bytes, float, float]:
    t = time.perf_counter()
    text = "".join(json.dumps(e.to_json(), sort_keys=True, separators=(",", ":")) + "\n" for e in entries)
    data = gzip.compress(text.encode(), mtime=0)
    encode = time.perf_counter() - t
    t = time.perf_counter()
    back = [Entry.from_json(json.loads(line)) for line in gzip.decompress(data).splitlines() if line]
    decode = time.perf_counter() - t
    assert [e.key for e in back] == [e.key for e in entries]
    return data, encode, decode


def sqlite_file(entries: list[Entry], work: Path) -> tuple[bytes, float, float]:
    path = work / "page.sqlite"
    t = time.perf_counter()
    db = sqlite3.connect(path)
    db.execute(
        "create table rows (key text primary key, model text, profile text, target text, instance text, "
        "published text, failure text, building text)"
    )
    db.executemany(
        "insert into rows values (?,?,?,?,?,?,?,?)",
        [(e.key, e.model, e.profile, e.target, e.instance, json.dumps(e.published), None, None) for e in entries],
    )
    db.commit()
    db.execute("vacuum")
    db.close()
    data = path.read_bytes()
    encode = time.perf_counter() - t
    t = time.perf_counter()
    back_path = work / "read.sqlite"
    back_path.write_bytes(data)  # a reader downloads the file first
    db = sqlite3.connect(back_path)
    back = [
        Entry(k, m, p, tg, ins, json.loads(pub) if pub else None)
        for k, m, p, tg, ins, pub in db.execute("select key, model, profile, target, instance, published from rows")
    ]
    db.close()
    decode = time.perf_counter() - t
    assert sorted(e.key for e in back) == sorted(e.key for e in entries)
    return data, encode, decode


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=5000)
    args = parser.parse_args()
    entries = rows(args.rows)
    with tempfile.TemporaryDirectory() as tmp:
        base = jsonl_gzip(entries)
        other = sqlite_file(entries, Path(tmp))
    print(f"{args.rows} rows        bytes  encode s  decode s   bytes ×  decode ×")
    for name, (data, enc, dec) in (("jsonl+gzip", base), ("sqlite", other)):
        print(
            f"{name:<12} {len(data):>9} {enc:>9.3f} {dec:>9.3f} {len(data) / len(base[0]):>8.2f} {dec / base[2]:>9.2f}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
