"""A channel's resolve.sh treats the store, the channel and its destination as data (issue 51).

- Paths: a store and destinations whose names hold every shell metacharacter, a space, a tab, a newline
  and a byte that is not UTF-8 resolve like any other — the right files arrive, verified; no command an
  injected `$(...)` or backquote would run runs (no INJECTED file anywhere), and nothing outside the
  destination changes (the whole tree, compared byte for byte before and after). Also from an s3://
  store whose prefix holds the metacharacters S3 keys may.
- The destination: one that holds files resolve.sh did not put there (another model's weights), a
  regular file, a link to such a folder are refused in one line, exit 2, left as they were; an empty
  folder and one resolve.sh made (its `.neuronforge-resolve`) are resolved into.
- Damaged records: channel.json or the build's manifest cut, `{}`, not JSON, of the wrong shape, with
  fields of the wrong type or paths that leave the store: one line naming the file and the problem, exit 2,
  never a Python traceback; the manifest's line names the rollback that moves the channel away, and it
  works as printed.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from neuronforge.artifacts import channels
from neuronforge.stores import ArtifactStore, open_store
from tests.releases.builds import MODEL, publish

REPO = Path(__file__).resolve().parents[2]
MARKER = ".neuronforge-resolve"
# Every shell metacharacter, a space, a tab, a newline and a byte that is not UTF-8 (as Python keeps it).
HOSTILE = "$(touch INJECTED) `touch INJECTED`; & | < > * ? [ ] { } ' \" \\ \t\n" + os.fsdecode(b"\xff") + "x"
# What S3 keys may hold of them (UTF-8, no control characters).
HOSTILE_S3 = "$(touch INJECTED) `touch INJECTED`; & | < > * ? [ ] { } ' \" \\ x"
FOREIGN = b"another model's weights"


def _resolve(launch: Path, *args: str | Path, cwd: Path, env: dict[str, str] | None = None):
    return subprocess.run(
        ["bash", str(launch / "resolve.sh"), *map(str, args)],
        cwd=cwd,
        capture_output=True,
        timeout=120,
        env={**os.environ, **(env or {})},
    )


def _tree(root: Path) -> dict[str, tuple[str, bytes]]:
    """Every path under root -> its kind and, for a file, its bytes; a link, what it points to."""
    out: dict[str, tuple[str, bytes]] = {}
    for folder, dirs, files in os.walk(os.fsencode(root)):
        for name in dirs + files:
            path = os.path.join(folder, name)
            rel = os.fsdecode(os.path.relpath(path, os.fsencode(root)))
            if os.path.islink(path):
                out[rel] = ("link", os.readlink(path))
            elif os.path.isdir(path):
                out[rel] = ("dir", b"")
            else:
                with open(path, "rb") as f:
                    out[rel] = ("file", f.read())
    return out


def _injected(root: Path) -> list[Path]:
    """Files an injected `touch INJECTED` would have made (it runs in the script's folder, under root)."""
    return list(root.rglob("INJECTED"))


def _outside(tree: dict[str, tuple[str, bytes]], dest: str) -> dict[str, tuple[str, bytes]]:
    return {rel: v for rel, v in tree.items() if rel != dest and not rel.startswith(dest + "/")}


def _shown(text: str) -> str:
    """How resolve.sh names a path in its one line: every character that is not printable escaped."""
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


def _one_line(done: subprocess.CompletedProcess) -> str:
    said = done.stderr.decode(errors="backslashreplace")
    assert said.count("\n") == 1 and said.startswith("resolve.sh: "), said
    assert "Traceback" not in said, said
    return said


@pytest.fixture
def hostile(tmp_path: Path):
    """A file:// store at a hostile path holding two builds, a channel at the first; (store, ref, keys,
    the channel's launch folder, the folder everything runs in, the root the tree is compared under)."""
    root = tmp_path / "root"
    cwd = root / "cwd"
    cwd.mkdir(parents=True)
    store = open_store(f"file://{root / f'store {HOSTILE}'}")
    ref = channels.ChannelRef.parse(MODEL, "cpu", "candidate")
    keys = [publish(store, 1), publish(store, 2)]
    channels.promote(store, ref, build=keys[0])
    return store, ref, keys, root / f"store {HOSTILE}" / ref.prefix / "launch", cwd, root


def test_a_hostile_store_and_destination_resolve_as_data(hostile) -> None:
    store, ref, keys, launch, cwd, root = hostile
    dest = root / f"dest {HOSTILE}"
    before = _tree(root)
    done = _resolve(launch, "--all", dest, cwd=cwd)
    assert done.returncode == 0, done.stderr
    assert done.stdout == os.fsencode(dest) + b"\n"
    assert (dest / "model/weights.bin").read_bytes() == b"weights of build 1"
    assert (dest / "launch/serve.sh").read_bytes() == b"#!/usr/bin/env bash\necho serving\n"
    assert (dest / MARKER).is_file()
    after = _tree(root)
    assert not _injected(root)
    assert _outside(after, dest.name) == _outside(before, dest.name)  # nothing outside DEST changed
    # the channel moves: the folder resolve.sh made is resolved again, in place
    channels.promote(store, ref, build=keys[1])
    before = _tree(root)
    assert _resolve(launch, "--all", dest, cwd=cwd).returncode == 0
    assert (dest / "model/weights.bin").read_bytes() == b"weights of build 2"
    assert _outside(_tree(root), dest.name) == _outside(before, dest.name)
    # the shim resolves into NEURONFORGE_CHANNEL_DIR (hostile too), then runs the build's serve.sh
    channel_dir = root / f"channels {HOSTILE}"
    served = subprocess.run(
        ["bash", str(launch / "serve.sh")],
        cwd=cwd,
        capture_output=True,
        timeout=120,
        env={**os.environ, "NEURONFORGE_CHANNEL_DIR": str(channel_dir)},
    )
    assert (served.returncode, served.stdout) == (0, b"serving\n"), served.stderr
    assert not _injected(root)


def test_a_store_named_by_neuronforge_store_uri_is_data_too(hostile) -> None:
    """NEURONFORGE_STORE_URI (a replica) reaches the script from the environment: data as well."""
    _, ref, _, _, cwd, root = hostile
    replica = root / f"replica {HOSTILE}"
    (root / f"store {HOSTILE}").rename(replica)
    launch = replica / ref.prefix / "launch"
    done = _resolve(launch, "--all", root / "host", cwd=cwd, env={"NEURONFORGE_STORE_URI": f"file://{replica}"})
    assert done.returncode == 0, done.stderr
    assert (root / "host/model/weights.bin").read_bytes() == b"weights of build 1"
    assert not _injected(root)


def test_an_s3_prefix_holding_shell_metacharacters_resolves_as_data(s3_bucket: str, tmp_path: Path) -> None:
    store = open_store(f"s3://{s3_bucket}/farm {HOSTILE_S3}")
    ref = channels.ChannelRef.parse(MODEL, "cpu", "candidate")
    channels.promote(store, ref, build=publish(store, 1))
    launch = tmp_path / "launch"
    launch.mkdir()
    (launch / "resolve.sh").write_bytes(store.get_bytes(f"{ref.prefix}/launch/resolve.sh"))
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    dest = tmp_path / f"dest {HOSTILE}"
    done = _resolve(launch, "--all", dest, cwd=cwd, env={"SYNC_TOOL": "boto3"})
    assert done.returncode == 0, done.stderr
    assert (dest / "model/weights.bin").read_bytes() == b"weights of build 1"
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["launch", "cwd", dest.name])
    assert not _injected(tmp_path)


# -- the destination ------------------------------------------------------------------------------------
def test_a_folder_holding_what_resolve_sh_did_not_put_there_is_refused_untouched(hostile) -> None:
    _, _, _, launch, cwd, root = hostile
    dest = root / f"models {HOSTILE}"
    dest.mkdir()
    (dest / "weights.bin").write_bytes(FOREIGN)
    before = _tree(root)
    done = _resolve(launch, "--all", dest, cwd=cwd)
    assert done.returncode == 2
    said = _one_line(done)
    assert said.endswith(
        f"it holds files this script did not put there (no {MARKER}): use an empty folder or one this script made\n"
    ), said
    assert _tree(root) == before  # DEST as it was, and no staging folder beside it


def test_a_regular_file_is_never_replaced_by_a_folder(hostile) -> None:
    _, _, _, launch, cwd, root = hostile
    dest = root / f"weights {HOSTILE}.bin"
    dest.write_bytes(FOREIGN)
    before = _tree(root)
    done = _resolve(launch, "--all", dest, cwd=cwd)
    assert done.returncode == 2
    assert _one_line(done).endswith(": not a folder: use an empty folder or one this script made\n")
    assert _tree(root) == before


def test_a_link_is_followed_only_to_a_folder_resolve_sh_made(hostile) -> None:
    _, _, _, launch, cwd, root = hostile
    foreign = root / "foreign"
    foreign.mkdir()
    (foreign / "weights.bin").write_bytes(FOREIGN)
    link = root / "link"
    link.symlink_to(foreign)
    before = _tree(root)
    done = _resolve(launch, "--all", link, cwd=cwd)
    assert done.returncode == 2
    assert "a symbolic link to " in _one_line(done)
    assert _tree(root) == before
    # a link to a folder resolve.sh made: that folder is resolved again, the link still points to it
    ours = root / "ours"
    assert _resolve(launch, "--all", ours, cwd=cwd).returncode == 0
    link.unlink()
    link.symlink_to(ours)
    done = _resolve(launch, "--all", link, cwd=cwd)
    assert done.returncode == 0, done.stderr
    assert link.is_symlink() and (link / "model/weights.bin").read_bytes() == b"weights of build 1"


def test_an_empty_folder_is_resolved_into(hostile) -> None:
    _, _, _, launch, cwd, root = hostile
    dest = root / "empty"
    dest.mkdir()
    done = _resolve(launch, dest, cwd=cwd)
    assert done.returncode == 0, done.stderr
    assert sorted(p.name for p in dest.iterdir()) == [
        MARKER,
        ".neuronforge-sync.json",
        "channel.json",
        "launch",
        "manifest.json",
    ]


# -- damaged records ------------------------------------------------------------------------------------
def _channel(store: ArtifactStore, ref) -> dict:
    return json.loads(store.get_bytes(f"{ref.prefix}/channel.json"))


def _with_build(record: dict, **fields: object) -> bytes:
    record["current"]["build"].update(fields)
    return json.dumps(record).encode()


CHANNEL_DAMAGE = {
    "cut": (lambda raw, _: raw[: len(raw) // 2], "not JSON (Unterminated string"),
    "empty object": (lambda raw, _: b"{}", "current is missing"),
    "not JSON": (lambda raw, _: b"\x00\xffnot json", "not UTF-8 text"),
    "a list": (lambda raw, _: b"[1, 2]", "the record is not an object"),
    "build a list": (lambda raw, r: json.dumps({**r, "current": {"build": []}}).encode(), "current.build is not"),
    "key a number": (lambda raw, r: _with_build(r, key=5), "current.build.key is 5, not a string"),
    "key not hex": (lambda raw, r: _with_build(r, key="$(touch INJECTED)"), "is not a cache key (64 hex digits)"),
    "prefix leaves": (lambda raw, r: _with_build(r, artifact_prefix="../../etc"), "is not a key inside the store"),
    "manifest absolute": (lambda raw, r: _with_build(r, manifest="/etc/passwd"), "is not a key inside the store"),
    "manifest newline": (lambda raw, r: _with_build(r, manifest="a\nb"), "'a\\\\nb' is not a key inside the store"),
}


@pytest.mark.parametrize("damage", sorted(CHANNEL_DAMAGE))
def test_a_damaged_channel_json_is_one_line_and_nothing_fetched(hostile, damage: str) -> None:
    store, ref, _, launch, cwd, root = hostile
    raw = store.get_bytes(f"{ref.prefix}/channel.json")
    make, problem = CHANNEL_DAMAGE[damage]
    store.put_bytes(make(raw, json.loads(raw)), f"{ref.prefix}/channel.json")
    before = _tree(root)
    done = _resolve(launch, "--all", root / "host", cwd=cwd)
    assert done.returncode == 2, done.stderr
    said = _one_line(done)
    assert said.startswith(_shown(f"resolve.sh: file://{root / f'store {HOSTILE}'}/{ref.prefix}/channel.json: ")), said
    assert problem in said, said
    assert _tree(root) == before


MANIFEST_DAMAGE = {
    "cut": (lambda raw: raw[: len(raw) // 2], "not JSON ("),
    "empty object": (lambda raw: b"{}", "files is not a list of the build's files"),
    "not JSON": (lambda raw: b"<html>", "not JSON (Expecting value"),
    "files an object": (lambda raw: _manifest(raw, files={}), "files is not a list of the build's files"),
    "path a number": (lambda raw: _manifest(raw, path=7), "files[0].path 7 is not a path inside the build"),
    "path leaves": (lambda raw: _manifest(raw, path="../../../x"), 'files[0].path "../../../x" is not a path'),
    "size a string": (lambda raw: _manifest(raw, size="18"), 'files[0].size "18" is not a number of bytes'),
    "sha256 a list": (lambda raw: _manifest(raw, sha256=[]), "files[0].sha256 [] is not a sha256"),
    "tp a string": (lambda raw: _manifest(raw, tp="4"), 'request.target.tp_degree "4" is not a whole number'),
}


def _manifest(raw: bytes, files: object = None, tp: object = None, **first: object) -> bytes:
    m = json.loads(raw)
    if files is not None:
        m["files"] = files
    if tp is not None:
        m["request"]["target"]["tp_degree"] = tp
    if first:
        m["files"][0].update(first)
    return json.dumps(m).encode()


@pytest.mark.parametrize("damage", sorted(MANIFEST_DAMAGE))
def test_a_damaged_manifest_is_one_line_and_nothing_fetched(hostile, damage: str) -> None:
    """The channel records the damaged manifest's digest (a store written by hand): its bytes are
    the recorded ones, so only reading them can tell."""
    store, ref, keys, launch, cwd, root = hostile
    channels.promote(store, ref, build=keys[1])
    record = _channel(store, ref)
    manifest = record["current"]["build"]["manifest"]
    make, problem = MANIFEST_DAMAGE[damage]
    damaged = make(store.get_bytes(manifest))
    store.put_bytes(damaged, manifest)
    digest = hashlib.sha256(damaged).hexdigest()
    store.put_bytes(_with_build(record, manifest_sha256=digest), f"{ref.prefix}/channel.json")
    before = _tree(root)
    done = _resolve(launch, "--all", root / "host", cwd=cwd)
    assert done.returncode == 2, done.stderr
    said = _one_line(done)
    assert f"/{manifest}: " in said and problem in said, said
    assert _tree(root) == before


def test_the_rollback_a_damaged_manifest_names_moves_the_channel_back_as_printed(hostile) -> None:
    """Run as printed (the hostile store's path a bash `$'...'` word), the command moves the channel to
    the build before, which resolves."""
    store, ref, keys, launch, cwd, root = hostile
    channels.promote(store, ref, build=keys[1])
    record = _channel(store, ref)
    store.put_bytes(b"{}", record["current"]["build"]["manifest"])
    store.put_bytes(
        _with_build(record, manifest_sha256=hashlib.sha256(b"{}").hexdigest()), f"{ref.prefix}/channel.json"
    )
    said = _one_line(_resolve(launch, "--all", root / "host", cwd=cwd))
    rollback = said.rsplit("move the channel to another build: ", 1)[1].removesuffix(")\n")
    assert rollback.startswith(
        "neuronforge rollback builtin:tiny-llama --profile cpu --channel candidate --store $'file://"
    ), said
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}", "PYTHONPATH": str(REPO)}
    moved = subprocess.run(["bash", "-c", rollback], cwd=cwd, capture_output=True, text=True, timeout=120, env=env)
    assert moved.returncode == 0, moved.stderr
    assert f"rollback to {keys[0][:12]}" in moved.stdout
    done = _resolve(launch, "--all", root / "host", cwd=cwd)
    assert done.returncode == 0, done.stderr
    assert (root / "host/model/weights.bin").read_bytes() == b"weights of build 1"
