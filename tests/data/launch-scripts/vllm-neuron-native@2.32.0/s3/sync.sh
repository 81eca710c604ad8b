#!/usr/bin/env bash
# Fill $MODEL_DIR with the model and $VLLM_CACHE_ROOT/neuron/compile_cache with every compiled graph of
# vllm-cache.json, each file verified against the artifact's manifest or vllm-cache.json (size, sha256)
# while it streams. s3:// is read with SYNC_TOOL: auto (the default: python3 with boto3, else aws, else
# s5cmd), boto3, aws or s5cmd, each honouring AWS_ENDPOINT_URL; with boto3, SYNC_CONCURRENCY parallel
# ranged reads of SYNC_PART_MB MiB (defaults sized to the host); a file:// store is read by python3. Needs
# bash and python3 (3.8+), and a transfer tool only for s3://; what is missing is named before anything
# is fetched. Re-running is cheap: what this script verified is kept without being read again
# (.neuronforge-sync.json in each folder), so a second start costs one read of the manifest.
# Every value from vllm.env, the manifests or the environment is data: quoted, or an argument of python3.
set -euo pipefail
me=sync.sh
artifact_manifest=manifest.json
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# -- reading the launch env file (neuronforge/artifacts/launch_templates/env.sh) ---------------------
# load_env FILE: export each KEY=VALUE line of FILE with VALUE as it is written, as `docker run --env-file`
# reads it — never run as shell text, so a value holding $( ) ` ; or quotes (a store's path can) is that
# text and nothing runs. A name that changes how this host runs commands (PATH, LD_*, BASH_ENV, ...) is
# refused: no launch env file sets one.
load_env() {
  local line name n=0
  [ -f "$1" ] || { printf '%s\n' "$me: $1 is missing: run the launch/ folder of the artifact as published" >&2; exit 2; }
  while IFS= read -r line || [ -n "$line" ]; do
    n=$((n + 1))
    case "$line" in ''|'#'*) continue ;; esac
    name="${line%%=*}"
    case "$name" in
      "$line"|''|[0-9]*|*[!A-Za-z0-9_]*)
        printf '%s\n' "$me: $1 line $n is not KEY=VALUE: run the launch/ folder of the artifact as published" >&2
        exit 2 ;;
      PATH|IFS|ENV|BASH_ENV|BASHOPTS|SHELLOPTS|CDPATH|GLOBIGNORE|PS4|PROMPT_COMMAND|LD_*|PYTHON*|BASH_FUNC_*)
        printf '%s\n' "$me: $1 line $n sets $name, which would change how this host runs commands: no launch env file sets it; run the launch/ folder of the artifact as published" >&2
        exit 2 ;;
    esac
    export "$name=${line#*=}"
  done < "$1"
}
# -- end of reading the launch env file ----------------------------------------------------------------
host_model_dir="${MODEL_DIR:-}"; host_cache_root="${VLLM_CACHE_ROOT:-}"
load_env "$here/vllm.env"
MODEL_DIR="${host_model_dir:-$MODEL_DIR}"; VLLM_CACHE_ROOT="${host_cache_root:-$VLLM_CACHE_ROOT}"
export NEURON_LIBTORCH_CACHE_ROOT="$VLLM_CACHE_ROOT"
die() { printf '%s\n' "$me: $*" >&2; exit 2; }
command -v python3 >/dev/null \
  || die "python3 is not on PATH (it reads $CACHE_MANIFEST and checks each file): use an image that has it"
# -- reading the store (neuronforge/artifacts/transfer_sh.py) ------------------------------------
transfer_tool_named() {  # SYNC_TOOL: auto (the default), boto3, aws or s5cmd
  tool="${SYNC_TOOL:-auto}"
  case "$tool" in auto|aws|s5cmd|boto3) ;; *) die "SYNC_TOOL=$tool: one of auto, aws, s5cmd, boto3" ;; esac
}
has_boto3() {  # without importing it (a second): botocore is what the fetcher uses, boto3 brings it; asked once
  [ -n "${_has_boto3:-}" ] \
    || { python3 -c 'import importlib.util as u, sys; sys.exit(u.find_spec("botocore") is None)' 2>/dev/null \
         && _has_boto3=yes || _has_boto3=no; }
  [ "$_has_boto3" = yes ]
}
plan_field() {  # plan_field TEXT: TEXT as one field of a plan line (launch_fetch.read_plan): \\ \t \n escaped
  local b=$'\\' text="$1"
  text="${text//"$b"/"$b$b"}"; text="${text//$'\t'/"$b"t}"; printf '%s' "${text//$'\n'/"$b"n}"
}
plan_line() {  # plan_line URI ROOT PATH: the plan line of one file no record names (size, sha256: -)
  printf '%s\t%s\t%s\t-\t-\t-\n' "$(plan_field "$1")" "$(plan_field "$2")" "$(plan_field "$3")"
}
transfer_ready() {  # transfer_ready PLAN: every tool PLAN's fetch needs is here, else one line, nothing fetched
  local other first_s3
  other="$(cut -f1 "$1" | grep -v -m1 -E '^(s3|file)://' || true)"
  [ -z "$other" ] || die "cannot download $other: only s3:// and file:// stores"
  first_s3="$(cut -f1 "$1" | grep -m1 '^s3://' || true)"
  [ -n "$first_s3" ] || return 0
  if [ "$tool" = auto ]; then
    if has_boto3; then tool=boto3
    elif command -v aws >/dev/null; then tool=aws
    elif command -v s5cmd >/dev/null; then tool=s5cmd
    else die "reading $first_s3 needs the AWS CLI (aws), s5cmd or python3 with boto3, and none is here:" \
      "use an image with awscli, or put s5cmd on PATH and set SYNC_TOOL=s5cmd"
    fi
  fi
  case "$tool" in
    aws) command -v aws >/dev/null || die "SYNC_TOOL=aws but aws (the AWS CLI) is not on PATH:" \
      "use an image with awscli, or set SYNC_TOOL=s5cmd or SYNC_TOOL=boto3" ;;
    s5cmd) command -v s5cmd >/dev/null || die "SYNC_TOOL=s5cmd but s5cmd is not on PATH:" \
      "install it, or set SYNC_TOOL=aws or SYNC_TOOL=boto3" ;;
    boto3) has_boto3 || die "SYNC_TOOL=boto3 but python3 cannot import boto3:" \
      "pip install boto3, or set SYNC_TOOL=aws or SYNC_TOOL=s5cmd" ;;
  esac
}
transfer_fetch() {  # transfer_fetch PLAN [REUSE]: every file of PLAN, verified (neuronforge/artifacts/launch_fetch.py)
  python3 - "$me" "$tool" "$@" <<'NF_LAUNCH_FETCH'
"""The launch scripts' fetcher: every file of a plan fetched with parallel ranged reads, hashed while it
streams, written once, and kept only when its size and sha256 are the manifest's.

It runs on the serving host, in the serving image's own python3 (3.8+, the standard library, and
botocore — which boto3 brings — for s3://), never importing neuronforge: `transfer_sh` embeds this
file's text in `launch/sync.sh` and a release channel's `resolve.sh`, and the tests import it as a
module. Usage (what `transfer_fetch` runs):

    python3 launch_fetch.py ME TOOL PLAN [REUSE] [--then NEXT_PLAN COMMAND...]

PLAN: one `uri<TAB>root<TAB>path<TAB>size<TAB>sha256<TAB>against` line per file, a backslash, tab or
newline in a field written `\\\\`, `\\t`, `\\n` (a folder's name may hold any of them). The file goes to
root/path (a path that leaves root is refused); `size`/`sha256` `-` fetch a file no record names
(channel.json, a manifest: one plain GET, not verified here); `against` names the record in the
failure line. TOOL reads s3://: `boto3` is this fetcher's own parallel client; `s5cmd` (one `s5cmd run`)
and `aws` (one `aws s3 cp --recursive --include ...` per store folder) fetch each file whole and it is
hashed afterwards; file:// is always read here.
REUSE: a folder whose verified files are hard-linked rather than fetched (resolve.sh's previous
resolution of the same build). --then: once PLAN is fetched, COMMAND's stdout becomes NEXT_PLAN, fetched
by the same process (sync.sh: the manifest, then the plan made from it).

- Already here: each root keeps `.neuronforge-sync.json` (path -> size, sha256, mtime_ns, inode as
  recorded when this fetcher verified the file). A file whose stat still matches its record is kept
  without being opened; one whose stat differs but whose size is right is hashed once (re-verified);
  anything else is fetched.
- Parallel: SYNC_CONCURRENCY requests at once (default 2 per core, 4 to 64) of SYNC_PART_MB MiB
  (default 32; a file under 1.5 parts is one request). Few large parts, because the Python side of a
  request and its threads' turns at the GIL are what a small host runs out of. Files are fetched biggest
  first, each file's parts taken in order by whichever thread is free, and written into `<dest>.part` at
  their offsets as they arrive, through one small buffer per thread that the socket is read into
  directly (no part is held in memory). The file is hashed in order: the chunk at the hash frontier
  from that buffer as it arrives, the parts ahead of it read back from the page cache once the frontier
  gets there. The part becomes the file (rename) only once its sha256 is the manifest's; a failure
  removes every `.part`. A read that drops is asked again from the byte where it stopped.
- One line at the end on stderr: files fetched and kept, bytes, seconds, MB/s (10^6 bytes). A failure
  is one line too (which URI, what differs, what to do), exit 1; a refused plan exits 2.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import IO

STATE = ".neuronforge-sync.json"
STATE_VERSION = 1
MIB = 1 << 20
UNKNOWN = "-"
AWS_PROCESSES = 4  # `aws s3 cp` at once: each is a Python process of its own (~0.5 s of CPU to start)
# What to do, by botocore's exception class (matched by name: botocore is imported only for s3://).
HINTS = {
    "NoCredentialsError": ": give this host credentials that read the store (an instance role, IRSA or EKS Pod "
    "Identity, or AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY)",
    "EndpointConnectionError": ": check AWS_ENDPOINT_URL (if set) and this host's route to the store",
    "ClientError": ": check that this host may read the store and that the artifact is still there",
}
# No command is suggested: this host has no neuronforge to run one with (see the module doc).
FIX = (
    "the store's copy is damaged or is not this build's: publish it again (where neuronforge is installed, "
    "`verify` with the build's cache key and store names every file that differs)"
)


class Failed(Exception):
    """One line for the user (without the script's name), and the exit code."""

    def __init__(self, line: str, code: int = 1) -> None:
        super().__init__(line)
        self.code = code


class Stopped(Failed):
    """Another thread's failure stops this one: the first failure is the one line."""


class Item:
    """One file of the plan."""

    def __init__(self, uri: str, root: str, path: str, size: int | None, sha256: str | None, against: str):
        self.uri, self.root, self.path, self.size, self.sha256, self.against = uri, root, path, size, sha256, against
        self.dest = inside(root, path)
        self.part = self.dest + ".part"

    @property
    def verified(self) -> bool:
        return self.size is not None and self.sha256 is not None


def inside(root: str, path: str) -> str:
    """root/path, refused (exit 2) when path is absolute, names `..` or resolves outside root."""
    words = path.split("/")
    if not path or path.startswith("/") or ".." in words or "" in words:
        raise Failed(f"refusing {path!r}: it leaves {root}", 2)
    real_root = os.path.realpath(root)
    dest = os.path.realpath(os.path.join(real_root, path))
    if not dest.startswith(real_root.rstrip("/") + "/"):
        raise Failed(f"refusing {path!r}: it leaves {root} (through a symbolic link)", 2)
    return os.path.join(root, path)


# A plan field's escapes: a path may hold a tab, a newline or a backslash and still be one field of one line
# (`plan_line` in launch_templates/transfer.sh and the scripts' plan makers write them).
_ESCAPES = {"\\": "\\", "t": "\t", "n": "\n"}


def _unescaped(field: str, n: int) -> str:
    out, i = [], 0
    while i < len(field):
        c = field[i]
        if c == "\\":
            c = _ESCAPES.get(field[i + 1 : i + 2], "")
            if not c:
                raise Failed(f"plan line {n}: a backslash that is not \\\\, \\t or \\n in {field!r}", 2)
            i += 1
        out.append(c)
        i += 1
    return "".join(out)


def read_plan(text: str) -> list[Item]:
    items = []
    for n, line in enumerate(text.split("\n"), 1):
        if not line:
            continue
        cols = line.split("\t")
        if len(cols) != 6:
            raise Failed(f"plan line {n} has {len(cols)} fields, not 6 (uri root path size sha256 against)", 2)
        uri, root, path, size, sha, against = (_unescaped(c, n) for c in cols)
        if not uri.startswith(("s3://", "file://")):
            raise Failed(f"cannot download {uri}: only s3:// and file:// stores", 2)
        known = size != UNKNOWN
        if known and not size.isdigit():
            raise Failed(f"plan line {n}: size {size!r} is not a number of bytes", 2)
        items.append(Item(uri, root, path, int(size) if known else None, None if sha == UNKNOWN else sha, against))
    return items


# -- the state file: what this fetcher verified, by stat ------------------------------------------------
def _stamp(st: os.stat_result) -> tuple[int, int, int]:
    return st.st_size, st.st_mtime_ns, st.st_ino


class State:
    """`<root>/.neuronforge-sync.json`: the files of root this fetcher verified, and their stat then."""

    def __init__(self, root: str) -> None:
        self.root = root
        self.records: dict[str, dict] = {}
        self.changed = False
        try:
            with open(os.path.join(root, STATE)) as f:
                data = json.load(f)
            if isinstance(data, dict) and data.get("version") == STATE_VERSION and isinstance(data.get("files"), dict):
                self.records = {p: r for p, r in data["files"].items() if isinstance(r, dict)}
        except (OSError, ValueError):
            pass  # no state (a fresh folder) or an unreadable one: every file is verified again

    def holds(self, path: str, size: int, sha256: str) -> os.stat_result | None:
        """The file's stat when its record says it was verified with these size and sha256 and its stat
        is unchanged since: then its bytes are not read again."""
        rec = self.records.get(path)
        if not rec or rec.get("size") != size or rec.get("sha256") != sha256:
            return None
        try:
            st = os.stat(os.path.join(self.root, path))
        except OSError:
            return None
        return st if [rec.get("size"), rec.get("mtime_ns"), rec.get("ino")] == list(_stamp(st)) else None

    def record(self, path: str, sha256: str, st: os.stat_result) -> None:
        size, mtime_ns, ino = _stamp(st)
        self.records[path] = {"size": size, "sha256": sha256, "mtime_ns": mtime_ns, "ino": ino}
        self.changed = True

    def save(self) -> None:
        if not self.changed:
            return
        tmp = os.path.join(self.root, f"{STATE}.{os.getpid()}")
        with open(tmp, "w") as f:
            json.dump({"version": STATE_VERSION, "files": self.records}, f, sort_keys=True)
        os.replace(tmp, os.path.join(self.root, STATE))


def sha256_of(path: str) -> tuple[str, int]:
    h, n = hashlib.sha256(), 0
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(4 * MIB), b""):
            h.update(block)
            n += len(block)
    return h.hexdigest(), n


# -- where bytes come from ---------------------------------------------------------------------------
def split_s3(uri: str) -> tuple[str, str]:
    bucket, _, key = uri[len("s3://") :].partition("/")
    return bucket, key


class Sources:
    """Ranged reads of s3:// (botocore, imported only when an s3:// file is fetched) and file://."""

    def __init__(self, concurrency: int) -> None:
        self.concurrency = concurrency
        self._client = None
        self._lock = threading.Lock()

    def client(self):
        with self._lock:
            if self._client is None:
                import botocore.config
                import botocore.session

                config = botocore.config.Config(
                    max_pool_connections=self.concurrency,
                    retries={"mode": "standard", "max_attempts": 5},
                    # every byte is checked against the manifest's sha256: no second checksum per part
                    response_checksum_validation="when_required",
                )
                self._client = botocore.session.get_session().create_client(
                    "s3", endpoint_url=os.environ.get("AWS_ENDPOINT_URL") or None, config=config
                )
            return self._client

    def read(self, item: Item, start: int, end: int | None) -> bytes:
        """Bytes [start, end) of the item's object (end None: all of it), at once (a record, a marker)."""
        chunks: list[bytes] = []
        self.stream(item, start, end, lambda view, _at: chunks.append(bytes(view)))
        return b"".join(chunks)

    def stream(self, item: Item, start: int, end: int | None, write: Callable[[memoryview, int], None]) -> int:
        """Bytes [start, end) of the item's object (end None: all of it), which must be as long as the
        record says (a longer object is not the recorded one, even when its first bytes are), handed to
        `write(bytes, offset)` as they arrive, through one READ_CHUNK buffer per thread; how many."""
        uri, size = item.uri, item.size
        buf = _buffer(_local_recv)
        if uri.startswith("file://"):
            with open(uri[len("file://") :], "rb") as f:
                total = os.fstat(f.fileno()).st_size
                if size is not None and total != size:
                    raise Failed(f"{uri} holds {total} bytes, not the {size} {item.against} records: {FIX}")
                stop, at = (total if end is None else end), start
                while at < stop:
                    n = os.preadv(f.fileno(), [buf[: min(len(buf), stop - at)]], at)
                    if not n:
                        break
                    write(buf[:n], at)
                    at += n
                return at - start
        bucket, key = split_s3(uri)
        args = {"Bucket": bucket, "Key": key}
        if end is not None:
            args["Range"] = f"bytes={start}-{end - 1}"
        response = self.client().get_object(**args)
        if size is not None:
            total = int(str(response.get("ContentRange", "")).rpartition("/")[2] or response["ContentLength"])
            if total != size:
                raise Failed(f"{uri} holds {total} bytes, not the {size} {item.against} records: {FIX}")
        body, stop, at = response["Body"], start + int(response["ContentLength"]), start
        # The socket's bytes straight into `buf` (http.client's readinto: one copy), where botocore's and
        # urllib3's readinto would read each chunk into a fresh bytes object and copy it over: the object's
        # own bytes, no decoding (what the manifest's sha256 is of). Any other body is read as botocore reads it.
        urllib3_response = getattr(body, "_raw_stream", None)
        raw = getattr(urllib3_response, "_fp", None)
        reader = raw if callable(getattr(raw, "readinto", None)) else body
        try:
            while at < stop:
                n = reader.readinto(buf[: min(len(buf), stop - at)])
                if not n:
                    break
                write(buf[:n], at)
                at += n
        finally:
            if reader is raw and at == stop and callable(getattr(urllib3_response, "release_conn", None)):
                urllib3_response.release_conn()  # read to its end: the connection goes back to the pool
            else:
                body.close()
        return at - start


# Bytes read from the socket (or a file) per call, into a buffer each thread reuses; and bytes read back
# from the page cache per call to be hashed, into another. CPU is what a sync on a small host runs out of
# first, and memory traffic is most of it: a chunk small enough to stay in the core's cache between the
# socket's copy into it, the write out of it and the hash over it costs least (2 cores, loopback, the
# bench's 3.6 GiB: 128 KiB chunks 5.9 s of CPU against 11.2 s for 1 MiB ones read through urllib3).
READ_CHUNK = 128 * 1024
_local_recv = threading.local()
_local_back = threading.local()


def _buffer(local: threading.local) -> memoryview:
    buf = getattr(local, "buf", None)
    if buf is None:
        buf = local.buf = memoryview(bytearray(READ_CHUNK))
    return buf


# -- one file being fetched ------------------------------------------------------------------------------
class Run:
    """A part of one file that one thread streams (one GET): [start, end), of which [start, written) is
    written."""

    __slots__ = ("end", "fetch", "start", "written")

    def __init__(self, fetch: Fetch, start: int, end: int) -> None:
        self.fetch, self.start, self.end, self.written = fetch, start, end, start


class Fetch:
    """A file's bytes, written at their offsets into `<dest>.part` as they arrive (nothing is held in
    memory) by the threads streaming its runs, and hashed in order: the chunk just written at the hash
    frontier is hashed from the buffer it came in (so a file one thread streams is hashed without being
    read again), anything written ahead of the frontier is read back from the page cache once the frontier
    gets there. os.pwrite, os.preadv and hashlib release the GIL, so the other threads keep reading.
    The file is not sized beforehand: with ftruncate every write is one into a hole, which cost S3Store's
    downloads 1.55 s of CPU per GiB against 0.58 (bench/transfer.py, same machine)."""

    def __init__(self, item: Item) -> None:
        self.item = item
        self.size = item.size or 0
        self.runs: list[Run] = []  # by start; together (once all are taken) they are [0, size)
        self.first = 0  # runs before it are hashed
        self.h = hashlib.sha256()
        self.hashed = 0  # the frontier: bytes [0, hashed) are in self.h
        self.hashing = False
        self.finished = False  # verified and renamed into place
        self.lock = threading.Lock()
        os.makedirs(os.path.dirname(item.dest), exist_ok=True)
        self.fd = os.open(item.part, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)

    def write(self, run: Run, view: memoryview, at: int) -> bool:
        """`view` belongs at `at`, in `run`: write it, then hash what is now written in order from the
        frontier. True when this call hashed the file's last byte."""
        data = view
        try:
            while data:
                n = os.pwrite(self.fd, data, at + len(view) - len(data))
                data = data[n:]
        except OSError as exc:  # a full disk, a quota: nothing to ask the store again for
            raise Failed(
                f"cannot write {self.item.part}: {exc.strerror or exc}: make room there and run again"
            ) from None
        with self.lock:
            run.written = at + len(view)
        return self._advance(view, at)

    def _extent(self) -> int:
        """How far the bytes from the frontier on are written without a gap (under the lock)."""
        runs, reach = self.runs, self.hashed
        while self.first < len(runs) and runs[self.first].end <= reach:
            self.first += 1  # runs wholly hashed are not looked at again
        for run in runs[self.first :]:
            if run.start > reach:
                break
            reach = max(reach, run.written)
            if run.written < run.end:
                break
        return reach

    def _advance(self, view: memoryview | None = None, at: int = 0) -> bool:
        finished = False
        while True:
            with self.lock:
                if self.hashing:
                    return finished
                lo, hi = self.hashed, self._extent()
                if hi <= lo:
                    return finished
                self.hashing = True
            try:
                tail = view is not None and lo <= at and at + len(view) == hi
                self._hash_back(lo, at if tail else hi)
                if tail and view is not None:
                    self.h.update(view)
                view = None
            except BaseException:
                with self.lock:
                    self.hashing = False
                raise
            with self.lock:
                self.hashed = hi
                self.hashing = False
            finished = hi == self.size

    def _hash_back(self, start: int, end: int) -> None:
        buf = _buffer(_local_back)
        while start < end:
            n = os.preadv(self.fd, [buf[: min(len(buf), end - start)]], start)
            if not n:
                raise Failed(f"{self.item.part} ended at byte {start} while it was being checked: fetch again")
            self.h.update(buf[:n])
            start += n

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1


class Runs:
    """Who streams what: files biggest first, each cut into parts taken in order, one GET each, by
    whichever thread is free — so every thread works on the same file until its last part is taken, the
    thread on the frontier's part hashes its chunks as they come, and the others' parts are read back
    once the frontier reaches them (while still in the page cache: at most `concurrency` parts ahead)."""

    def __init__(self, items: list[Item], part_size: int, opened: list[Fetch]) -> None:
        self.pending = sorted(items, key=lambda i: i.size or 0)  # popped from the end: the biggest first
        self.part_size = part_size
        self.opened = opened
        self.current: Fetch | None = None
        self.claimed = 0  # bytes of the current file taken
        self.lock = threading.Lock()

    def take(self) -> Run | None:
        with self.lock:
            fetch = self.current
            if fetch is None or self.claimed >= max(fetch.size, 1):
                if not self.pending:
                    return None
                fetch = self.current = Fetch(self.pending.pop())
                self.opened.append(fetch)
                self.claimed = 0
            start = self.claimed
            # a file under 1.5 parts is one GET; an empty one too (it must exist, and be empty)
            last = fetch.size - start <= self.part_size * 3 // 2
            stop = fetch.size if last else start + self.part_size
            self.claimed = max(stop, 1)
            run = Run(fetch, start, stop)
            with fetch.lock:
                fetch.runs.append(run)  # in order of start
            return run


class Fetcher:
    def __init__(
        self, me: str, tool: str, items: list[Item], reuse: str | None = None, sources: Sources | None = None
    ) -> None:
        self.me, self.tool, self.items, self.reuse = me, tool, items, reuse
        self.concurrency = _env_int("SYNC_CONCURRENCY", default_concurrency())
        self.part_size = _env_int("SYNC_PART_MB", DEFAULT_PART_MB) * MIB
        self.sources = sources or Sources(self.concurrency)  # a second plan reads with the first's client
        self.states: dict[str, State] = {}
        self.error: BaseException | None = None
        self.error_lock = threading.Lock()
        self.fetched = self.kept = self.bytes = 0
        self.open: list[Fetch] = []
        self.reuse_state: State | None = None
        self.seconds = 0.0

    def state(self, root: str) -> State:
        if root not in self.states:
            self.states[root] = State(root)
        return self.states[root]

    # -- what is already here ---------------------------------------------------------------------------
    def here(self, item: Item) -> bool:
        """True when item.dest holds the verified bytes: by its record, else by hashing a file of the
        right size once, else (REUSE) by a hard link to the previous resolution's verified copy."""
        assert item.size is not None and item.sha256 is not None
        state = self.state(item.root)
        if state.holds(item.path, item.size, item.sha256):
            return True
        if self._verify_in_place(item.dest, item.size, item.sha256):
            state.record(item.path, item.sha256, os.stat(item.dest))
            return True
        if self.reuse is None:
            return False
        if self.reuse_state is None:
            self.reuse_state = State(self.reuse)
        old = self.reuse_state
        source = os.path.join(self.reuse, item.path)
        if not (old.holds(item.path, item.size, item.sha256) or self._verify_in_place(source, item.size, item.sha256)):
            return False
        os.makedirs(os.path.dirname(item.dest), exist_ok=True)
        try:
            os.link(source, item.dest)
        except OSError:  # another file system, or one without hard links: fetch it
            return False
        state.record(item.path, item.sha256, os.stat(item.dest))
        return True

    @staticmethod
    def _verify_in_place(path: str, size: int, sha256: str) -> bool:
        try:
            if not os.path.isfile(path) or os.stat(path).st_size != size:
                return False
            return sha256_of(path)[0] == sha256
        except OSError:
            return False

    # -- fetching -----------------------------------------------------------------------------------------
    def run(self) -> None:
        start = time.perf_counter()
        todo: list[Item] = []
        try:
            for item in self.items:
                if item.verified and self.here(item):
                    self.kept += 1
                else:
                    todo.append(item)
            # big files first: their parts keep every connection busy while the small ones fill the gaps
            todo.sort(key=lambda i: -(i.size or 0))
            if todo:
                self._fetch(todo)
        finally:
            for fetch in self.open:
                fetch.close()
            for item in todo:  # a failure: no .part is left (one that became its file is gone already)
                if os.path.exists(item.part):
                    os.unlink(item.part)
            for state in self.states.values():
                state.save()
        self.seconds = time.perf_counter() - start

    def _fail(self, exc: BaseException) -> None:
        with self.error_lock:
            if self.error is None:
                self.error = exc

    def _fetch(self, todo: list[Item]) -> None:
        s3 = next((i.uri for i in todo if i.uri.startswith("s3://")), None)
        if s3 is not None and self.tool not in ("boto3", "aws", "s5cmd"):  # transfer_ready chooses it first
            raise Failed(f"no tool chosen to read {s3} (SYNC_TOOL={self.tool}): one of boto3, aws, s5cmd", 2)
        by_tool = {id(i) for i in todo if i.uri.startswith("s3://") and self.tool != "boto3"}
        whole = [i for i in todo if id(i) in by_tool]
        runs = Runs([i for i in todo if id(i) not in by_tool and i.verified], self.part_size, self.open)
        with ThreadPoolExecutor(self.concurrency, thread_name_prefix="fetch") as pool:
            if whole and self.tool == "s5cmd":
                self._s5cmd(whole)  # one process for all: s5cmd runs its own workers
            elif whole:
                self._aws(whole)
            for item in whole:
                pool.submit(self._guard, self._with_tool, item)
            for item in todo:
                if id(item) not in by_tool and not item.verified:
                    pool.submit(self._guard, self._plain, item)
            for _ in range(self.concurrency):
                pool.submit(self._guard, self._stream_runs, runs)
        if self.error is not None:
            raise self.error
        left = next((f.item.uri for f in self.open if not f.finished), None)
        if left is not None:  # a bug, not a store's fault: say so rather than keep a file unchecked
            raise Failed(f"{left} was not fetched to its end: fetch again (and report this)")

    def _guard(self, fn, *args) -> None:
        if self.error is not None:
            return
        try:
            fn(*args)
        except BaseException as exc:  # one line at the end, from the first failure
            self._fail(exc)

    def _stream_runs(self, runs: Runs) -> None:
        """One thread's share: parts taken one after another until none is left."""
        while self.error is None:
            run = runs.take()
            if run is None:
                return
            fetch = run.fetch
            if fetch.size == 0:
                self._read(fetch.item, 0, None)
                self._finish(fetch.item, fetch.h.hexdigest(), 0, fetch)
            else:
                self._read_range(run)

    def _read_range(self, run: Run) -> None:
        """The run's bytes, written and hashed as they arrive; a dropped connection or a short body is
        asked again from where it stopped (twice at most)."""
        fetch, start, stop = run.fetch, run.start, run.end
        at = start

        def write(view: memoryview, offset: int) -> None:
            nonlocal at
            if self.error is not None:
                raise Stopped("another file failed")
            if fetch.write(run, view, offset):
                self._finish(fetch.item, fetch.h.hexdigest(), fetch.size, fetch)
            at = offset + len(view)

        for attempt in range(3):
            try:
                self.sources.stream(fetch.item, at, stop, write)
            except Failed:
                raise
            except Exception as exc:
                self._retry_or_fail(fetch.item, exc, attempt)
            if at == stop:
                return
        raise Failed(f"{fetch.item.uri} sent {at - start} bytes for bytes {start}-{stop}: fetch again")

    def _finish(self, item: Item, sha256: str, size: int, fetch: Fetch | None = None) -> None:
        if fetch is not None:
            fetch.close()
        if size != item.size or sha256 != item.sha256:
            raise Failed(
                f"{item.uri} differs from {item.against} (size or sha256: {size} bytes, sha256 {sha256[:12]}, "
                f"recorded {item.size} bytes, {str(item.sha256)[:12]}); nothing of it kept: {FIX}"
            )
        os.replace(item.part, item.dest)
        self.state(item.root).record(item.path, sha256, os.stat(item.dest))
        if fetch is not None:
            fetch.finished = True
        with self.error_lock:
            self.fetched += 1
            self.bytes += size

    def _read(self, item: Item, start: int, end: int | None) -> bytes:
        """One read of bytes [start, end) (end None: all of it) at once, tried again on a dropped
        connection; anything else is one line naming the URI."""
        for attempt in range(3):
            try:
                return self.sources.read(item, start, end)
            except Failed:
                raise
            except Exception as exc:
                self._retry_or_fail(item, exc, attempt)
        raise AssertionError("unreachable")

    def _retry_or_fail(self, item: Item, exc: Exception, attempt: int) -> None:
        """Returns when `exc` is worth another attempt; raises its one line otherwise."""
        if isinstance(exc, FileNotFoundError):
            raise Failed(f"cannot read {item.uri}: no such file: {FIX}") from None
        # botocore: ClientError, EndpointConnectionError, a connection dropped...
        permanent = type(exc).__name__ in ("ClientError", "NoCredentialsError", "PermissionError")
        if permanent or item.uri.startswith("file://") or attempt == 2:
            said = " ".join(str(exc).split()) or type(exc).__name__
            hint = HINTS.get(type(exc).__name__, "")
            raise Failed(f"cannot download {item.uri} with {self._how(item)}: {said}{hint}") from None

    def _how(self, item: Item) -> str:
        return "python3" if item.uri.startswith("file://") else self.tool

    def _plain(self, item: Item) -> None:
        data = self._read(item, 0, None)
        os.makedirs(os.path.dirname(item.dest), exist_ok=True)
        with open(item.part, "wb") as f:
            f.write(data)
        os.replace(item.part, item.dest)
        with self.error_lock:
            self.fetched += 1
            self.bytes += len(data)

    def _s5cmd(self, items: list[Item]) -> None:
        """Every file whole into its .part with one `s5cmd run` (the files are hashed afterwards)."""
        for item in items:
            os.makedirs(os.path.dirname(item.dest), exist_ok=True)
        endpoint = os.environ.get("AWS_ENDPOINT_URL")
        with tempfile.NamedTemporaryFile("w", suffix=".s5cmd", delete=False) as f:
            f.writelines(f'cp "{i.uri}" "{i.part}"\n' for i in items)
        try:
            cmd = ["s5cmd", *(["--endpoint-url", endpoint] if endpoint else []), "run", f.name]
            done = subprocess.run(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        finally:
            os.unlink(f.name)
        if done.returncode != 0:
            said = " ".join(done.stderr.decode(errors="replace").splitlines()[:1])[:300]
            failed = next((i.uri for i in items if i.uri in said), "the store")
            raise Failed(f"cannot download {failed} with s5cmd: {said or f'exit {done.returncode}'}")

    def _aws(self, items: list[Item]) -> None:
        """Every file whole into its .part with the AWS CLI: one `aws s3 cp --recursive` per folder of the
        store (its files named by --include), AWS_PROCESSES at once — each is a Python process of its own."""
        groups: dict[tuple[str, str], list[Item]] = {}
        for item in items:
            base = item.uri[: -len(item.path) - 1] if item.uri.endswith("/" + item.path) else ""
            groups.setdefault((base, item.root), []).append(item)
        with ThreadPoolExecutor(AWS_PROCESSES) as pool:
            for failed in pool.map(lambda g: self._aws_group(*g), groups.items()):
                if failed:
                    raise Failed(failed)

    def _aws_group(self, where: tuple[str, str], items: list[Item]) -> str:
        base, root = where
        os.makedirs(root, exist_ok=True)
        landing = tempfile.mkdtemp(prefix=".aws-", dir=root)
        try:
            if base:
                includes = [w for i in items for w in ("--include", i.path)]
                cmd = ["aws", "s3", "cp", "--recursive", "--only-show-errors", base + "/", landing, "--exclude", "*"]
                cmd += includes
            else:
                cmd = ["aws", "s3", "cp", "--only-show-errors", items[0].uri, os.path.join(landing, items[0].path)]
            done = subprocess.run(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
            said = " ".join(done.stderr.decode(errors="replace").split())[:300]
            for item in items:
                got = os.path.join(landing, item.path)
                if not os.path.isfile(got):
                    return f"cannot download {item.uri} with aws: {said or 'the AWS CLI did not write it'}"
                os.makedirs(os.path.dirname(item.part), exist_ok=True)
                os.replace(got, item.part)
            return ""
        finally:
            shutil.rmtree(landing, ignore_errors=True)

    def _with_tool(self, item: Item) -> None:
        """aws or s5cmd fetched the file whole into its .part; it is hashed here (read once more)."""
        if not item.verified:
            os.replace(item.part, item.dest)
            with self.error_lock:
                self.fetched += 1
            return
        sha256, size = sha256_of(item.part)
        self._finish(item, sha256, size)

    def summary(self) -> str:
        rate = self.bytes / 1e6 / self.seconds if self.seconds > 0 else 0.0
        by_tool = any(i.uri.startswith("s3://") for i in self.items) and self.tool in ("aws", "s5cmd")
        parallel = f"up to {self.concurrency} reads of {self.part_size // MIB} MiB at once"
        how = f"with {self.tool}" if by_tool else parallel
        return (
            f"{self.me}: {self.fetched} files fetched, {self.bytes / 1e6:.1f} MB in {self.seconds:.2f} s, "
            f"{rate:.0f} MB/s ({how}); {self.kept} already here and verified"
        )


DEFAULT_PART_MB = 32


def default_concurrency() -> int:
    """Parallel reads by default: two per core, at least 4 (one flow to S3 stops near 5 Gbps), at most 64."""
    return min(64, max(4, 2 * (os.cpu_count() or 1)))


def _env_int(name: str, default: int) -> int:
    value = os.environ.get(name, "")
    if not value:
        return default
    if not value.isdigit() or int(value) < 1:
        raise Failed(f"{name}={value}: a whole number of at least 1 (or unset, for {default})", 2)
    return int(value)


USAGE = "usage: launch_fetch.py ME TOOL PLAN [REUSE] [--then NEXT_PLAN COMMAND...]"


def main(argv: list[str], out: IO[str] = sys.stderr) -> int:
    """Fetch PLAN; with `--then NEXT_PLAN COMMAND...`, then run COMMAND (its stdout becomes NEXT_PLAN: a
    plan made from what PLAN fetched, e.g. a manifest) and fetch that too, in this process: botocore
    starts once (~0.24 s of a start that has nothing else to do). COMMAND's failure is its own line on
    stderr and its exit code."""
    me = argv[0] if argv else "launch_fetch"
    then: list[str] = []
    if "--then" in argv:
        at = argv.index("--then")
        argv, then = argv[:at], argv[at + 1 :]
    try:
        if len(argv) not in (3, 4) or (then and len(then) < 2) or ("--then" in argv + then):
            raise Failed(USAGE, 2)
        tool, plan = argv[1], argv[2]
        reuse = argv[3] if len(argv) == 4 and argv[3] else None
        sources: Sources | None = None
        while True:
            with open(plan, encoding="utf-8", errors="surrogateescape") as f:  # a path's bytes, as they are
                items = read_plan(f.read())
            fetcher = Fetcher(me, tool, items, reuse, sources)
            fetcher.run()
            if any(i.verified for i in items):
                print(fetcher.summary(), file=out)
            with open(plan + ".result", "w") as f:
                f.write(f"{fetcher.fetched} {fetcher.kept} {fetcher.bytes}\n")
            if not then:
                return 0
            plan, command, then, sources = then[0], then[1:], [], fetcher.sources
            try:
                with open(plan, "w") as f:
                    made = subprocess.run(command, stdin=subprocess.DEVNULL, stdout=f)
            except OSError as exc:
                raise Failed(f"cannot run {command[0]}: {exc.strerror or exc}", 2) from None
            if made.returncode != 0:
                return made.returncode
    except Failed as exc:
        print(f"{me}: {exc}", file=out)
        return exc.code
    except Exception as exc:  # botocore's ClientError, EndpointConnectionError, NoCredentialsError, ...
        said = " ".join(str(exc).split()) or type(exc).__name__
        print(f"{me}: cannot download with {argv[1] if len(argv) > 1 else '?'}: {said}", file=out)
        return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
NF_LAUNCH_FETCH
}
# -- end of reading the store ----------------------------------------------------------------------
transfer_tool_named
cache="$VLLM_CACHE_ROOT/neuron/compile_cache"
work="$cache/.sync"
mkdir -p "$cache" "$MODEL_DIR"; rm -rf "$work"; mkdir -p "$work"; trap 'rm -rf "$work"' EXIT
# The artifact's manifest: every file of the model, with its size and sha256 (the one read of a warm start).
plan_line "$ARTIFACT_URI/$artifact_manifest" "$work" manifest.json > "$work/first"
# Every tool the fetch needs, named before anything is fetched: the plan's files are all in these two stores.
{ plan_line "$ARTIFACT_URI/$artifact_manifest" "$work" manifest.json; plan_line "$CACHE_URI/" "$work" -; } \
  > "$work/stores"
transfer_ready "$work/stores"
# The plan: every file this host must hold (uri, root, path, size, sha256, the record it is checked against);
# an entry complete here is skipped whole, the rest is staged in .<key>.sync. It is made once the manifest
# is here, by the fetcher that read it (`--then`: one python3 and one botocore for the whole start).
export MODEL_DIR ARTIFACT_URI MODEL_URI CACHE_URI
cat > "$work/plan.py" <<'PY'
import json, os, re, shutil, sys
cache_manifest, artifact_manifest, cache, keys, manifest_name = sys.argv[1:]
KEY = re.compile(r"[0-9a-f]{32}\Z")  # a cache entry's folder (neuronforge.compilation.vllm_cache.KEY)
FIX = "the store's copy is damaged or is not this build's (`neuronforge verify` names what): publish it again"
out = open(sys.stdout.fileno(), "w", encoding="utf-8", errors="surrogateescape", closefd=False)
def shown(text):  # one line, whatever the text holds
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)
def read(path, where, fix):
    try:
        with open(path, "rb") as f:
            data = json.loads(f.read().decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        sys.exit(f"sync.sh: {shown(where)}: not JSON ({exc}): {fix}")
    if not isinstance(data, dict):
        sys.exit(f"sync.sh: {shown(where)}: not a JSON object: {fix}")
    return data
def files(data, name, where, fix):
    listed = data.get(name, [])
    if not isinstance(listed, list):
        sys.exit(f"sync.sh: {shown(where)}: {name} is not a list: {fix}")
    for f in listed:
        ok = isinstance(f, dict) and isinstance(f.get("path"), str) and isinstance(f.get("sha256"), str)
        size = f.get("size") if ok else None
        if not (ok and isinstance(size, int) and not isinstance(size, bool) and size >= 0):
            sys.exit(f"sync.sh: {shown(where)}: {shown(json.dumps(f))} is not a file (path, size, sha256): {fix}")
    return listed
def field(text):  # a plan's field (launch_fetch.read_plan): backslash, tab and newline escaped
    return text.replace("\\", "\\\\").replace("\t", "\\t").replace("\n", "\\n")
def line(uri, root, path, f, against):
    out.write("\t".join(field(v) for v in (uri, root, path, str(f["size"]), f["sha256"], against)) + "\n")
artifact, model = os.environ["ARTIFACT_URI"].rstrip("/"), os.environ["MODEL_URI"].rstrip("/")
if not model.startswith(artifact + "/"):
    sys.exit(f"sync.sh: MODEL_URI {shown(model)} is not a folder of ARTIFACT_URI {shown(artifact)}: fix vllm.env")
folder = model[len(artifact) + 1:] + "/"
where = f"{artifact}/{manifest_name}"
listed = files(read(artifact_manifest, where, FIX), "files", where, FIX)
model_files = [f for f in listed if f["path"].startswith(folder)]
if not model_files:
    sys.exit(f"sync.sh: {shown(where)} lists no file of {shown(model)}: is ARTIFACT_URI this build's?")
for f in model_files:
    line(f"{artifact}/{f['path']}", os.environ["MODEL_DIR"], f["path"][len(folder):], f, "the artifact's manifest")
ours, local = os.path.basename(cache_manifest), "run the launch/ folder of the artifact as published"
m = read(cache_manifest, cache_manifest, local)
entries = m.get("entries")
if not isinstance(entries, list) or not all(isinstance(e, dict) and KEY.match(str(e.get("key"))) for e in entries):
    sys.exit(f"sync.sh: {shown(cache_manifest)}: entries is not a list of cache entries (32-hex keys): {local}")
staged = []
for e in entries:
    key = e["key"]
    listed = files(e, "files", cache_manifest, local)
    if os.path.isfile(f"{cache}/{key}/.compilation_complete") and os.path.isfile(f"{cache}/{key}/.synced"):
        continue
    shutil.rmtree(f"{cache}/.{key}.sync", ignore_errors=True)  # what an interrupted sync left
    staged.append(key)
    for f in listed:
        line(f"{os.environ['CACHE_URI']}/{key}/{f['path']}", f"{cache}/.{key}.sync", f["path"], f, ours)
for f in files(m, "nki", cache_manifest, local):  # NKI results: in place, each renamed in once verified
    line(f"{os.environ['CACHE_URI']}/{f['path']}", cache, f["path"], f, ours)
with open(keys, "w") as f:
    f.write("".join(f"{key}\n" for key in staged))
PY
# The manifest, then the plan, then every file of it, verified as it streams.
transfer_fetch "$work/first" "" --then "$work/fetch" python3 "$work/plan.py" "$here/$CACHE_MANIFEST" \
    "$work/manifest.json" "$cache" "$work/keys" "$artifact_manifest" || {
  status=$?
  if [ -f "$work/keys" ]; then
    while IFS= read -r key; do rm -rf "$cache/.$key.sync"; done < "$work/keys"
  fi
  exit "$status"
}
# Whole entries appear at once, marker included: one process for all of them (four per entry, forked one
# by one, cost a tenth of a second at 30 entries); none when every entry was here.
[ ! -s "$work/keys" ] || python3 - "$cache" "$work/keys" <<'PY'
import os, shutil, sys
cache = sys.argv[1]
for key in open(sys.argv[2]).read().split():
    staged = os.path.join(cache, f".{key}.sync")
    os.makedirs(staged, exist_ok=True)
    open(os.path.join(staged, ".synced"), "w").close()
    shutil.rmtree(os.path.join(cache, key), ignore_errors=True)
    os.rename(staged, os.path.join(cache, key))
PY
read -r fetched _ < "$work/fetch.result"
shopt -s nullglob
complete=("$cache"/*/.compilation_complete)
echo "sync.sh: $fetched fetched; ${#complete[@]} graphs in $cache"
