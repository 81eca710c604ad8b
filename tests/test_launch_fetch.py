"""The launch scripts' fetcher (`neuronforge.artifacts.launch_fetch`), run as the scripts run it — `main`
with a plan file — against a file:// store and a real S3 endpoint (moto's server on 127.0.0.1): parallel
ranged reads give the exact bytes, a file that differs from its record is one line and no file, a file
already verified is kept by its stat without being read, a changed one is verified again, and a path
that leaves the folder is refused."""

from __future__ import annotations

import hashlib
import io
import json
import os
from pathlib import Path

import pytest

from neuronforge.artifacts import launch_fetch
from neuronforge.artifacts.launch_fetch import STATE

MIB = 1 << 20


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _plan(tmp_path: Path, lines: list[tuple[str, Path, str, bytes | None]]) -> Path:
    """A plan file: (uri, root, path, the bytes the record says — None: no record) per file."""
    plan = tmp_path / f"plan-{len(list(tmp_path.glob('plan-*')))}"
    rows = []
    for uri, root, path, data in lines:
        size, sha = ("-", "-") if data is None else (str(len(data)), _sha(data))
        rows.append("\t".join((uri, str(root), path, size, sha, "the manifest")))
    plan.write_text("\n".join(rows) + "\n")
    return plan


def _run(plan: Path, tool: str = "boto3", reuse: str | None = None) -> tuple[int, str, list[int]]:
    """(exit code, what it said, [fetched, kept, bytes])."""
    out = io.StringIO()
    code = launch_fetch.main(["test.sh", tool, str(plan), *([reuse] if reuse else [])], out)
    result = Path(f"{plan}.result")
    counts = [int(w) for w in result.read_text().split()] if result.exists() else []
    return code, out.getvalue(), counts


@pytest.fixture
def small_parts(monkeypatch: pytest.MonkeyPatch) -> None:
    """1 MiB parts, 4 at once: a 5.5 MiB file is 6 ranged reads in parallel."""
    monkeypatch.setenv("SYNC_PART_MB", "1")
    monkeypatch.setenv("SYNC_CONCURRENCY", "4")


FILES = {
    "model/big.safetensors": os.urandom(5 * MIB + MIB // 2),
    "model/config.json": b'{"model_type": "llama"}\n',
    "model/empty.txt": b"",
    "graphs/a/graph.neff": os.urandom(3 * MIB + 7),
}


def _file_store(tmp_path: Path) -> Path:
    src = tmp_path / "store"
    for path, data in FILES.items():
        (src / path).parent.mkdir(parents=True, exist_ok=True)
        (src / path).write_bytes(data)
    return src


def test_ranged_parallel_reads_of_a_file_store_give_the_exact_bytes(tmp_path: Path, small_parts: None) -> None:
    src, host = _file_store(tmp_path), tmp_path / "host"
    code, said, counts = _run(_plan(tmp_path, [(f"file://{src}/{p}", host, p, d) for p, d in FILES.items()]))
    assert code == 0, said
    assert {p: (host / p).read_bytes() for p in FILES} == FILES
    assert counts == [4, 0, sum(len(d) for d in FILES.values())]
    total = sum(len(d) for d in FILES.values())
    assert said.count("\n") == 1 and said.startswith(f"test.sh: 4 files fetched, {total / 1e6:.1f} MB in "), said
    assert " MB/s (up to 4 reads of 1 MiB at once); 0 already here and verified" in said
    assert not list(host.rglob("*.part"))
    state = json.loads((host / STATE).read_text())["files"]
    assert set(state) == set(FILES) and state["model/big.safetensors"]["sha256"] == _sha(FILES["model/big.safetensors"])


def test_ranged_parallel_reads_of_s3_give_the_exact_bytes(tmp_path: Path, s3_bucket: str, small_parts: None) -> None:
    import boto3

    s3 = boto3.client("s3", endpoint_url=os.environ["AWS_ENDPOINT_URL"])
    for path, data in FILES.items():
        s3.put_object(Bucket=s3_bucket, Key=f"a/{path}", Body=data)
    host = tmp_path / "host"
    plan = _plan(tmp_path, [(f"s3://{s3_bucket}/a/{p}", host, p, d) for p, d in FILES.items()])
    code, said, counts = _run(plan)
    assert code == 0, said
    assert {p: (host / p).read_bytes() for p in FILES} == FILES and counts[:2] == [4, 0]
    # no record (channel.json, a manifest): one plain read, nothing verified, no MB/s line
    code, said, counts = _run(_plan(tmp_path, [(f"s3://{s3_bucket}/a/model/config.json", host, "c.json", None)]))
    assert (code, said, (host / "c.json").read_bytes()) == (0, "", FILES["model/config.json"])


def test_a_file_that_differs_from_its_record_is_one_line_and_no_file(tmp_path: Path, small_parts: None) -> None:
    src, host = _file_store(tmp_path), tmp_path / "host"
    (host / "model").mkdir(parents=True)
    wrong = bytearray(FILES["model/big.safetensors"])
    wrong[3 * MIB] ^= 1  # one bit, in the fourth of six parts
    (src / "model/big.safetensors").write_bytes(bytes(wrong))
    plan = _plan(tmp_path, [(f"file://{src}/{p}", host, p, d) for p, d in FILES.items()])
    code, said, _ = _run(plan)
    assert code == 1 and said.count("\n") == 1, said
    assert said.startswith(f"test.sh: file://{src}/model/big.safetensors differs from the manifest (size or sha256: ")
    assert "nothing of it kept" in said and "publish it again (where neuronforge is installed, `verify`" in said
    assert not (host / "model/big.safetensors").exists() and not list(host.rglob("*.part"))
    # a store object longer than the record is not the recorded one, even when it starts with its bytes
    (src / "model/big.safetensors").write_bytes(FILES["model/big.safetensors"] + b"x")
    code, said, _ = _run(plan)
    assert code == 1 and f"holds {len(FILES['model/big.safetensors']) + 1} bytes, not the" in said, said
    assert not (host / "model/big.safetensors").exists()


def test_parts_that_arrive_before_the_frontier_are_read_back_and_hashed_in_order(
    tmp_path: Path, small_parts: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The first part of the big file arrives last: the others wait in the .part file, and are hashed
    from there once the frontier reaches them (the first part's chunks are hashed as they come)."""
    import threading

    src, host = _file_store(tmp_path), tmp_path / "host"
    stream, later = launch_fetch.Sources.stream, threading.Event()
    starts: list[int] = []

    def slow_first(self, item, start, end, write):  # type: ignore[no-untyped-def]
        if item.path != "model/big.safetensors":
            return stream(self, item, start, end, write)
        starts.append(start)
        if start == 0:
            later.wait(10)  # until every other part of the file is written
        got = stream(self, item, start, end, write)
        if len(starts) == 5:  # 1 MiB parts, the last one 1.5 MiB
            later.set()
        return got

    monkeypatch.setattr(launch_fetch.Sources, "stream", slow_first)
    code, said, counts = _run(_plan(tmp_path, [(f"file://{src}/{p}", host, p, d) for p, d in FILES.items()]))
    assert code == 0 and later.is_set(), said
    assert starts[0] == 0 and sorted(starts) == [i * MIB for i in range(5)] and counts[0] == 4
    assert {p: (host / p).read_bytes() for p in FILES} == FILES


def test_a_read_that_drops_is_asked_again_from_where_it_stopped(
    tmp_path: Path, s3_bucket: str, small_parts: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    import boto3

    data = FILES["graphs/a/graph.neff"]
    boto3.client("s3", endpoint_url=os.environ["AWS_ENDPOINT_URL"]).put_object(Bucket=s3_bucket, Key="g", Body=data)
    stream, asked = launch_fetch.Sources.stream, []

    def drops_once(self, item, start, end, write):  # type: ignore[no-untyped-def]
        asked.append((start, end))
        if len(asked) > 1:
            return stream(self, item, start, end, write)

        def half(view, at):  # type: ignore[no-untyped-def]
            write(view, at)
            if at + len(view) >= MIB // 2:
                raise ConnectionResetError("Connection reset by peer")

        return stream(self, item, start, end, half)

    monkeypatch.setattr(launch_fetch.Sources, "stream", drops_once)
    monkeypatch.setattr(launch_fetch, "READ_CHUNK", 64 * 1024)
    host = tmp_path / "host"
    code, said, _ = _run(_plan(tmp_path, [(f"s3://{s3_bucket}/g", host, "g", data)]))
    assert code == 0, said
    assert (host / "g").read_bytes() == data
    # one GET dropped at 512 KiB of the first part; asked again from there, not from 0
    assert asked[0] == (0, MIB) and (MIB // 2, MIB) in asked and sorted(s for s, _ in asked).count(0) == 1


def test_a_full_disk_is_one_line_at_once_and_no_part_left(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import errno

    src, host = _file_store(tmp_path), tmp_path / "host"
    writes = []

    def full(fd: int, data: bytes, at: int) -> int:
        writes.append(at)
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(launch_fetch.os, "pwrite", full)
    path = "model/big.safetensors"
    code, said, _ = _run(_plan(tmp_path, [(f"file://{src}/{path}", host, path, FILES[path])]))
    assert code == 1 and said.count("\n") == 1, said
    assert said == f"test.sh: cannot write {host / path}.part: No space left on device: make room there and run again\n"
    assert len(writes) == 1  # not tried again
    assert not list(host.rglob("*.part")) and not (host / path).exists()


def test_then_fetches_the_plan_a_command_makes_from_the_first_in_the_same_process(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """sync.sh's start: the manifest (no record), then a plan made from it, with one reader (one botocore)."""
    import sys

    src, host = _file_store(tmp_path), tmp_path / "host"
    (src / "list.txt").write_text("\n".join(FILES) + "\n")
    first = _plan(tmp_path, [(f"file://{src}/list.txt", tmp_path / "work", "list.txt", None)])
    planner = tmp_path / "planner.py"
    records = {p: (len(d), _sha(d)) for p, d in FILES.items()}
    planner.write_text(
        "import json, sys\n"
        f"records = json.loads({json.dumps(json.dumps(records))})\n"
        "for p in open(sys.argv[1]).read().split():\n"
        f"    print(f'file://{src}/{{p}}', sys.argv[2], p, *records[p], 'the manifest', sep='\\t')\n"
    )
    made: list[object] = []
    monkeypatch.setattr(
        launch_fetch.Sources, "__init__", lambda self, n: made.append(self) or setattr(self, "_lock", None)
    )
    nxt = tmp_path / "next"
    command = [sys.executable, str(planner), str(tmp_path / "work/list.txt"), str(host)]
    out = io.StringIO()
    code = launch_fetch.main(["test.sh", "boto3", str(first), "", "--then", str(nxt), *command], out)
    assert code == 0, out.getvalue()
    assert {p: (host / p).read_bytes() for p in FILES} == FILES and len(made) == 1
    assert Path(f"{first}.result").read_text().split()[:2] == ["1", "0"]
    assert Path(f"{nxt}.result").read_text().split()[:2] == ["4", "0"]
    assert out.getvalue().count("\n") == 1 and out.getvalue().startswith("test.sh: 4 files fetched")
    # the command's failure is its own line (on its stderr) and its exit code; nothing more is fetched
    failing = [sys.executable, "-c", "import sys; sys.exit(3)"]
    code = launch_fetch.main(["test.sh", "boto3", str(first), "", "--then", str(tmp_path / "n2"), *failing], out)
    assert code == 3 and not Path(f"{tmp_path / 'n2'}.result").exists()
    # a store the fetcher does not read is refused before anything is fetched
    bad = tmp_path / "bad"
    bad.write_text(f"https://example.com/x\t{host}\tx\t1\t{'0' * 64}\tthe manifest\n")
    code, said, _ = _run(bad)
    assert (code, said) == (2, "test.sh: cannot download https://example.com/x: only s3:// and file:// stores\n")


def test_a_file_verified_before_is_kept_by_its_stat_without_being_read(tmp_path: Path) -> None:
    src, host = _file_store(tmp_path), tmp_path / "host"
    plan = _plan(tmp_path, [(f"file://{src}/{p}", host, p, d) for p, d in FILES.items()])
    assert _run(plan)[0] == 0
    # other bytes of the same size written in place, the mtime put back: same inode, size, mtime
    target = host / "model/big.safetensors"
    st = target.stat()
    with open(target, "r+b") as f:
        f.write(b"NOT READ")
    os.utime(target, ns=(st.st_atime_ns, st.st_mtime_ns))
    for path in FILES:
        (src / path).unlink()  # and the store is gone: nothing can be fetched either
    code, said, counts = _run(plan)
    assert code == 0 and counts == [0, 4, 0], said
    assert said.startswith("test.sh: 0 files fetched") and "4 already here and verified" in said
    assert target.read_bytes().startswith(b"NOT READ")  # had it been hashed, it would have been refetched


def test_a_file_whose_stat_changed_is_verified_again_and_fetched_when_it_differs(tmp_path: Path) -> None:
    src, host = _file_store(tmp_path), tmp_path / "host"
    plan = _plan(tmp_path, [(f"file://{src}/{p}", host, p, d) for p, d in FILES.items()])
    assert _run(plan)[0] == 0
    (host / "model/big.safetensors").write_bytes(os.urandom(len(FILES["model/big.safetensors"])))  # new mtime
    os.utime(host / "graphs/a/graph.neff", ns=(1, 1))  # only touched: its bytes are still right
    code, said, counts = _run(plan)
    assert code == 0 and counts[:2] == [1, 3], said
    assert (host / "model/big.safetensors").read_bytes() == FILES["model/big.safetensors"]
    # the touched file was hashed once and recorded again: the next run keeps it by its stat
    assert _run(plan)[2][:2] == [0, 4]


def test_files_another_folder_holds_verified_are_hard_linked_not_fetched(tmp_path: Path) -> None:
    src, old, new = _file_store(tmp_path), tmp_path / "old", tmp_path / "new"
    assert _run(_plan(tmp_path, [(f"file://{src}/{p}", old, p, d) for p, d in FILES.items()]))[0] == 0
    for path in FILES:
        (src / path).unlink()
    code, said, counts = _run(
        _plan(tmp_path, [(f"file://{src}/{p}", new, p, d) for p, d in FILES.items()]), reuse=str(old)
    )
    assert code == 0 and counts == [0, 4, 0], said
    assert all((new / p).stat().st_ino == (old / p).stat().st_ino for p in FILES)


@pytest.mark.parametrize("path", ["../outside", "a/../../outside", "/etc/passwd", "a//b", "link/x"])
def test_a_path_that_leaves_the_folder_is_refused_before_anything_is_fetched(tmp_path: Path, path: str) -> None:
    src, host = _file_store(tmp_path), tmp_path / "host"
    host.mkdir()
    (host / "link").symlink_to(tmp_path)
    plan = _plan(tmp_path, [(f"file://{src}/model/config.json", host, "ok.json", b'{"model_type": "llama"}\n'),
                            (f"file://{src}/model/config.json", host, path, b'{"model_type": "llama"}\n')])  # fmt: skip
    code, said, _ = _run(plan)
    assert code == 2 and said.count("\n") == 1 and said.startswith(f"test.sh: refusing {path!r}: it leaves"), said
    assert not (host / "ok.json").exists() and not (tmp_path / "outside").exists() and not (tmp_path / "x").exists()


def test_an_unreadable_source_and_a_bad_setting_are_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    host = tmp_path / "host"
    code, said, _ = _run(_plan(tmp_path, [(f"file://{tmp_path}/gone", host, "x", b"x")]))
    assert code == 1 and said == f"test.sh: cannot read file://{tmp_path}/gone: no such file: {launch_fetch.FIX}\n"
    monkeypatch.setenv("SYNC_CONCURRENCY", "many")
    code, said, _ = _run(_plan(tmp_path, [(f"file://{tmp_path}/gone", host, "x", b"x")]))
    default = min(64, max(4, 2 * (os.cpu_count() or 1)))
    assert (
        code == 2
        and said == f"test.sh: SYNC_CONCURRENCY=many: a whole number of at least 1 (or unset, for {default})\n"
    )


@pytest.mark.parametrize("tool", ["aws", "s5cmd"])
def test_the_aws_cli_and_s5cmd_fetch_whole_files_that_are_then_verified(
    tmp_path: Path, s3_bucket: str, tool: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    import sys

    import boto3

    monkeypatch.setenv("PATH", f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    s3 = boto3.client("s3", endpoint_url=os.environ["AWS_ENDPOINT_URL"])
    for path, data in FILES.items():
        s3.put_object(Bucket=s3_bucket, Key=f"a/{path}", Body=data)
    host = tmp_path / "host"
    code, said, counts = _run(
        _plan(tmp_path, [(f"s3://{s3_bucket}/a/{p}", host, p, d) for p, d in FILES.items()]), tool
    )
    assert code == 0 and f"(with {tool})" in said, said
    assert {p: (host / p).read_bytes() for p in FILES} == FILES and counts[:2] == [4, 0]
    assert [p.name for p in host.iterdir() if p.name.startswith(".")] == [STATE]  # no landing folder left
    s3.put_object(Bucket=s3_bucket, Key="a/model/config.json", Body=b"other bytes")
    code, said, _ = _run(_plan(tmp_path, [(f"s3://{s3_bucket}/a/model/config.json", tmp_path / "h2", "c", b"x")]), tool)
    assert code == 1 and said.count("\n") == 1 and "differs from the manifest" in said, said
    assert not list((tmp_path / "h2").rglob("*c*"))


def test_ranged_reads_of_s3_go_back_to_the_pool_and_reuse_one_connection(
    tmp_path: Path, s3_bucket: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Parts read straight from the socket are handed back to urllib3's pool once read to their end:
    one thread, five ranged GETs, one connection (closing each response would open five)."""
    import logging

    import boto3

    data = FILES["model/big.safetensors"]
    boto3.client("s3", endpoint_url=os.environ["AWS_ENDPOINT_URL"]).put_object(Bucket=s3_bucket, Key="b", Body=data)
    monkeypatch.setenv("SYNC_PART_MB", "1")
    monkeypatch.setenv("SYNC_CONCURRENCY", "1")
    host = tmp_path / "host"
    with caplog.at_level(logging.DEBUG, logger="urllib3.connectionpool"):
        code, said, _ = _run(_plan(tmp_path, [(f"s3://{s3_bucket}/b", host, "b", data)]))
    assert code == 0, said
    assert (host / "b").read_bytes() == data
    gets = [r for r in caplog.records if '"GET /' in r.getMessage()]
    opened = [r for r in caplog.records if "Starting new HTTP connection" in r.getMessage()]
    assert len(gets) == 5 and len(opened) == 1, [r.getMessage() for r in caplog.records]


def test_a_plan_field_may_hold_a_tab_a_newline_a_backslash_and_bytes_that_are_not_utf8(tmp_path: Path) -> None:
    """Plan fields escape backslash, tab and newline (`plan_line` in launch_templates/transfer.sh writes
    them so), and the plan is read with the bytes of the names as they are: a store and a folder whose
    names hold them are fetched from and into like any other."""
    name = os.fsdecode(b"a\\b\tc\nd \xff")
    src, dest = tmp_path / f"store {name}", tmp_path / f"dest {name}"
    src.mkdir()
    (src / "f.bin").write_bytes(b"bytes")

    def field(text: str) -> bytes:
        return os.fsencode(text.replace("\\", "\\\\").replace("\t", "\\t").replace("\n", "\\n"))

    plan = tmp_path / "plan"
    row = [field(f"file://{src}/f.bin"), field(str(dest)), b"f.bin", b"5", _sha(b"bytes").encode(), b"the manifest"]
    plan.write_bytes(b"\t".join(row) + b"\n")
    code, said, counts = _run(plan)
    assert (code, counts[:2]) == (0, [1, 0]), said
    assert (dest / "f.bin").read_bytes() == b"bytes"
    plan.write_bytes(b"file:///x\\q\t/r\tp\t-\t-\tthe manifest\n")
    code, said, _ = _run(plan)
    assert code == 2 and "a backslash that is not \\\\, \\t or \\n" in said, said
