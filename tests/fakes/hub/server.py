"""The fake Hub's HTTP server and its on-disk state (see the package docstring for what it claims).

Client code is cited as `HH/<file>:<line>`, HH = `huggingface_hub` 0.36.2's package folder
(`.venv/lib/python3.11/site-packages/huggingface_hub/`).

State under `root`:
- `<root>/<org>/<name>/`: the files of the repo's `main` branch, as plain files;
- `<root>/.repos/<org>/<name>.json`: `{"id", "sha", "private", "lfs": {path: sha256}}` (which files are LFS);
- `<root>/.lfs/<org>/<name>/<sha256>`: LFS objects uploaded to (or seeded in) the repo;
- `<root>/.staging/`: a commit's new tree before it replaces the old one.
No org or repo name can start with "." (`_NAME`), so the bookkeeping folders are never a repo.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import re
import secrets
import shutil
import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, unquote, urlencode, urlsplit

BRANCH = "main"
LFS_MIN_SIZE = 10 * 1024 * 1024  # at or above: LFS whatever the content
SAMPLE_SIZE = 512  # the client's preupload sample (HH/lfs.py:71-83 UploadInfo: the first 512 bytes)
# the Hub's rule for an org or repo name (HH/utils/_validators.py:119-162): no leading/trailing - or ., <= 96
_NAME = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9._-]{0,94}[A-Za-z0-9])?")
_SHA256 = re.compile(r"[0-9a-f]{64}")
# The URLs the Hub answers name the Hub itself; the client swaps in its own endpoint
# (HH/utils/_http.py:336-346 fix_hf_endpoint_in_url), and CommitInfo parses `commitUrl` against the
# process-wide endpoint only (HH/hf_api.py:446, RepoUrl without endpoint): any other host is refused there.
HUB_URL = "https://huggingface.co"
INVALID_TOKEN = "Invalid credentials in Authorization header"  # the message HH/utils/_http.py:434 tells apart


class HubError(Exception):
    """An error answer: status, message (JSON `error` and `X-Error-Message`), optional `X-Error-Code`."""

    def __init__(
        self,
        status: int,
        message: str,
        code: str | None = None,
        headers: Mapping[str, str] | None = None,
        body: Mapping[str, Any] | None = None,
    ):
        super().__init__(message)
        self.status, self.message, self.code, self.headers = status, message, code, dict(headers or {})
        self.body = dict(body or {})


@dataclass(frozen=True)
class LoggedRequest:
    method: str
    path: str  # as sent, query included; headers are never logged
    status: int


@dataclass(frozen=True)
class User:
    name: str
    orgs: frozenset[str]

    def owns(self, namespace: str) -> bool:
        """Reads (private repos) and writes the namespace: its own name or one of its orgs."""
        return namespace == self.name or namespace in self.orgs


def upload_mode(sample: bytes, size: int) -> str:
    """What the fake's preupload answers: "lfs" for binary content (a NUL byte in the sample) or a large file."""
    return "lfs" if size >= LFS_MIN_SIZE or b"\0" in sample[:SAMPLE_SIZE] else "regular"


def git_blob_sha1(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def lfs_pointer(sha256: str, size: int) -> bytes:
    return f"version https://git-lfs.github.com/spec/v1\noid sha256:{sha256}\nsize {size}\n".encode()


def clean_path(path: str, *, folder: bool = False) -> str:
    """A repo-relative path, or HubError 400: no absolute path, no `.`/`..`/empty segment, no NUL.
    `folder`: a trailing "/" is allowed (and dropped), "" is the root."""
    if folder:
        path = path[:-1] if path.endswith("/") else path
        if path == "":
            return ""
    parts = path.split("/")
    if "\0" in path or "\\" in path or any(p in ("", ".", "..") for p in parts):
        raise HubError(400, f"Invalid path in repo: {path!r} (absolute, empty, '.' or '..' segment)")
    return path


def _split_repo_id(repo_id: str) -> tuple[str, str]:
    org, _, name = repo_id.partition("/")
    if not (_NAME.fullmatch(org) and _NAME.fullmatch(name)) or ".." in repo_id or "--" in repo_id:
        raise ValueError(f"not a repo id the Hub accepts: {repo_id!r} (want '<org>/<name>')")
    return org, name


class HubState:
    """The repositories on disk; every read and write holds `lock`, so a reader never sees half a commit."""

    def __init__(self, root: Path):
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)
        self.lock = threading.RLock()
        self.tickets: dict[str, tuple[str, str, int]] = {}  # LFS upload ticket -> (repo id, sha256, size)

    # -- layout
    def files(self, repo_id: str) -> Path:
        return self.root.joinpath(*_split_repo_id(repo_id))

    def _meta_path(self, repo_id: str) -> Path:
        org, name = _split_repo_id(repo_id)
        return self.root / ".repos" / org / f"{name}.json"

    def lfs_object(self, repo_id: str, sha256: str) -> Path:
        return self.root / ".lfs" / repo_id / sha256

    def meta(self, repo_id: str) -> dict[str, Any] | None:
        try:
            path = self._meta_path(repo_id)
        except ValueError:
            return None
        return json.loads(path.read_text()) if path.is_file() else None

    def _write_meta(self, repo_id: str, meta: dict[str, Any]) -> None:
        _atomic_write(self._meta_path(repo_id), json.dumps(meta, indent=2, sort_keys=True).encode())

    # -- repos
    def create(self, repo_id: str, private: bool) -> None:
        with self.lock:
            self.files(repo_id).mkdir(parents=True, exist_ok=False)
            sha = hashlib.sha1(f"create {repo_id}".encode()).hexdigest()
            self._write_meta(repo_id, {"id": repo_id, "sha": sha, "private": private, "lfs": {}})

    def locate(self, repo_id: str, path: str) -> Path | None:
        """The file or folder at `path` (clean) in the repo, None if absent or reached through a symlink
        (the Hub has no symlinks: a planted one is never followed out of, or inside, the repo)."""
        base = self.files(repo_id)
        here = base
        for part in path.split("/") if path else []:
            here = here / part
            if here.is_symlink() or not here.exists():
                return None
        real, top = os.path.realpath(here), os.path.realpath(base)
        return here if real == top or real.startswith(top + os.sep) else None

    def entries(self, repo_id: str, folder: str, recursive: bool) -> list[dict[str, Any]]:
        """list_repo_tree's items under `folder`: per level folders then files, by name; recursive = pre-order."""
        lfs = self.meta(repo_id)["lfs"]
        start = self.locate(repo_id, folder)
        if start is None or not start.is_dir():
            raise HubError(404, f"Entry not found: {folder!r}", "EntryNotFound")
        out: list[dict[str, Any]] = []

        def walk(directory: Path, prefix: str) -> None:
            children = sorted(c for c in directory.iterdir() if not c.is_symlink())
            for child in [c for c in children if c.is_dir()] + [c for c in children if not c.is_dir()]:
                path = f"{prefix}{child.name}"
                if child.is_dir():
                    out.append({"type": "directory", "path": path, "oid": _tree_oid(child, path, lfs)})
                    if recursive:
                        walk(child, f"{path}/")
                else:
                    out.append(_file_item(child, path, lfs))

        walk(start, f"{folder}/" if folder else "")
        return out

    def all_files(self, repo_id: str) -> list[dict[str, Any]]:
        return [e for e in self.entries(repo_id, "", recursive=True) if e["type"] == "file"]

    def commit(self, repo_id: str, operations: list[dict[str, Any]], parent: str | None) -> str:
        """Apply `operations` (the NDJSON lines after the header) all or nothing; return the new commit id."""
        with self.lock:
            meta = self.meta(repo_id)
            if parent is not None and parent != meta["sha"]:
                raise HubError(412, "A commit has happened since. Please refresh and try again.")
            files = self.files(repo_id)
            staging = self.root / ".staging" / secrets.token_hex(8)
            staging.parent.mkdir(parents=True, exist_ok=True)
            # hard links: a commit writes new files (temp + rename), so the served tree is never touched
            shutil.copytree(files, staging, symlinks=True, copy_function=os.link)
            lfs = dict(meta["lfs"])
            try:
                for op in operations:
                    self._apply(repo_id, staging, lfs, op)
            except BaseException:
                shutil.rmtree(staging)
                raise
            old = staging.with_name(staging.name + ".old")
            os.rename(files, old)
            os.rename(staging, files)
            shutil.rmtree(old)
            digest = hashlib.sha1(json.dumps(operations, sort_keys=True).encode()).hexdigest()
            meta["sha"] = hashlib.sha1(f"{meta['sha']} {digest}".encode()).hexdigest()
            meta["lfs"] = {p: oid for p, oid in lfs.items() if (files / p).is_file()}
            self._write_meta(repo_id, meta)
            return meta["sha"]

    def _apply(self, repo_id: str, tree: Path, lfs: dict[str, str], op: dict[str, Any]) -> None:
        key, value = op.get("key"), op.get("value")
        if not isinstance(value, dict) or not isinstance(value.get("path"), str):
            raise HubError(400, f"Malformed commit line: {op!r}")
        if key == "file":
            path = clean_path(value["path"])
            if value.get("encoding") != "base64":
                raise HubError(400, f"{path}: only base64 file content is supported, got {value.get('encoding')!r}")
            try:
                content = base64.b64decode(value.get("content", ""), validate=True)
            except (ValueError, TypeError) as e:
                raise HubError(400, f"{path}: content is not base64: {e}") from None
            _write_in(tree, path, content)
            lfs.pop(path, None)
        elif key == "lfsFile":
            path, oid = clean_path(value["path"]), value.get("oid")
            stored = self.lfs_object(repo_id, oid) if isinstance(oid, str) and _SHA256.fullmatch(oid) else None
            if value.get("algo", "sha256") != "sha256" or stored is None or not stored.is_file():
                raise HubError(400, f"{path}: LFS object {oid} was never uploaded to {repo_id}")
            if "size" in value and value["size"] != stored.stat().st_size:
                raise HubError(400, f"{path}: LFS object {oid} has {stored.stat().st_size} bytes, not {value['size']}")
            _write_in(tree, path, stored.read_bytes())
            lfs[path] = oid
        elif key == "deletedFile":
            path = clean_path(value["path"])
            target = _no_symlink(tree, path)
            if target is None or not target.is_file():
                raise HubError(404, f"A file with this name doesn't exist: {path}", "EntryNotFound")
            target.unlink()
            lfs.pop(path, None)
        elif key == "deletedFolder":
            path = clean_path(value["path"], folder=True)
            target = _no_symlink(tree, path)
            if path == "" or target is None or not target.is_dir():
                raise HubError(404, f"A folder with this name doesn't exist: {path}", "EntryNotFound")
            shutil.rmtree(target)
        else:
            raise HubError(
                400, f"Unsupported commit operation {key!r} (the fake knows file, lfsFile, deletedFile, deletedFolder)"
            )

    def store_lfs(self, repo_id: str, data: bytes) -> str:
        oid = hashlib.sha256(data).hexdigest()
        _atomic_write(self.lfs_object(repo_id, oid), data)
        return oid


def _no_symlink(tree: Path, path: str) -> Path | None:
    """`tree / path` if no component of `path` is a symlink (a commit never acts through one), else None."""
    here = tree
    for part in path.split("/") if path else []:
        here = here / part
        if here.is_symlink():
            return None
    return here


def _write_in(tree: Path, path: str, data: bytes) -> None:
    here = tree
    for part in path.split("/")[:-1]:
        here = here / part
        if here.is_symlink() or (here.exists() and not here.is_dir()):
            raise HubError(400, f"Cannot write {path}: {here.relative_to(tree)} is a file")
    target = tree / path
    if target.is_dir() and not target.is_symlink():
        raise HubError(400, f"Cannot write {path}: it is a folder")
    _atomic_write(target, data)


def _atomic_write(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{secrets.token_hex(4)}.tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)


def _file_item(file: Path, path: str, lfs: Mapping[str, str]) -> dict[str, Any]:
    """A tree item as RepoFile(**item) reads it (HH/hf_api.py:656-663): for an LFS file `oid` is the git
    blob id of its pointer and `lfs` carries the sha256 (as on the Hub)."""
    data = file.read_bytes()
    if path in lfs:
        pointer = lfs_pointer(lfs[path], len(data))
        return {
            "type": "file",
            "path": path,
            "size": len(data),
            "oid": git_blob_sha1(pointer),
            "lfs": {"oid": lfs[path], "size": len(data), "pointerSize": len(pointer)},
        }
    return {"type": "file", "path": path, "size": len(data), "oid": git_blob_sha1(data)}


def _tree_oid(directory: Path, path: str, lfs: Mapping[str, str]) -> str:
    """A stable id of a folder's content (not git's exact tree hash: the client only carries it)."""
    lines = []
    for child in sorted(c for c in directory.iterdir() if not c.is_symlink()):
        sub = f"{path}/{child.name}"
        oid = _tree_oid(child, sub, lfs) if child.is_dir() else _file_item(child, sub, lfs)["oid"]
        lines.append(f"{child.name} {oid}")
    return hashlib.sha1(("tree\n" + "\n".join(lines)).encode()).hexdigest()


class FakeHub:
    """The Hub API as huggingface_hub 0.36.2 calls it, on 127.0.0.1 (see tests/fakes/hub/__init__.py)."""

    def __init__(
        self,
        root: Path,
        tokens: Mapping[str, str | tuple[str, Iterable[str]]] | None = None,
        page_size: int = 1000,
    ):
        self.state = HubState(root)
        self.users = {
            token: User(who, frozenset()) if isinstance(who, str) else User(who[0], frozenset(who[1]))
            for token, who in (tokens or {}).items()
        }
        self.page_size = page_size
        self._log: list[LoggedRequest] = []
        self._log_lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def root(self) -> Path:
        return self.state.root

    @property
    def endpoint(self) -> str:
        assert self._server is not None, "FakeHub.start() first"
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    @property
    def requests(self) -> list[LoggedRequest]:
        """Every request so far (method, path as sent, status), oldest first; never a header."""
        with self._log_lock:
            return list(self._log)

    def _record(self, entry: LoggedRequest) -> None:
        with self._log_lock:
            self._log.append(entry)

    def start(self) -> FakeHub:
        handler = type("Handler", (_Handler,), {"hub": self})
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, name="fake-hub", daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            assert self._thread is not None
            self._thread.join(timeout=10)
            self._server = None

    def __enter__(self) -> FakeHub:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def add_model(
        self, repo_id: str, folder_or_files: Path | str | Mapping[str, bytes | str], private: bool = False
    ) -> str:
        """Seed a model repo (created if missing) with a folder's files (symlinks followed, as upload_folder
        does) or `{path: content}`, as one commit; returns the commit id. Files `upload_mode` calls "lfs"
        are stored as LFS files, as an upload through the client would."""
        if isinstance(folder_or_files, Mapping):
            files = {p: c.encode() if isinstance(c, str) else c for p, c in folder_or_files.items()}
        else:
            folder = Path(folder_or_files)
            files = {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}
        with self.state.lock:
            if self.state.meta(repo_id) is None:
                self.state.create(repo_id, private)
            operations: list[dict[str, Any]] = []
            for path, data in files.items():
                if upload_mode(data[:SAMPLE_SIZE], len(data)) == "lfs":
                    oid = self.state.store_lfs(repo_id, data)
                    operations.append({"key": "lfsFile", "value": {"path": path, "algo": "sha256", "oid": oid}})
                else:
                    content = base64.b64encode(data).decode()
                    operations.append(
                        {"key": "file", "value": {"path": path, "content": content, "encoding": "base64"}}
                    )
            sha = self.state.commit(repo_id, operations, None)
            meta = self.state.meta(repo_id)
            meta["private"] = private
            self.state._write_meta(repo_id, meta)
            return sha


class _Handler(BaseHTTPRequestHandler):
    hub: FakeHub
    server_version = "FakeHub/0.36.2"

    def log_message(self, format: str, *args: Any) -> None:  # the hub keeps its own log, without headers
        pass

    # -- plumbing
    def do_GET(self) -> None:
        self._dispatch()

    def do_HEAD(self) -> None:
        self._dispatch()

    def do_POST(self) -> None:
        self._dispatch()

    def do_PUT(self) -> None:
        self._dispatch()

    def _dispatch(self) -> None:
        self.status = 0
        try:
            self.body = self._read_body() if self.command in ("POST", "PUT") else b""
            self._route()
        except HubError as e:
            self._error(e)
        except Exception as e:  # a fake's bug: loud, never a hang
            self._error(HubError(500, f"FakeHub crashed on {self.command} {self.path}: {e!r}"))
        finally:
            if not self.status:  # no answer was sent
                self.hub._record(LoggedRequest(self.command, self.path, 0))

    def _read_body(self) -> bytes:
        if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
            chunks = []
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    return b"".join(chunks)
                chunks.append(self.rfile.read(size))
                self.rfile.readline()
        return self.rfile.read(int(self.headers.get("Content-Length") or 0))

    def _send(self, status: int, body: bytes = b"", headers: Mapping[str, str] | None = None) -> None:
        self.status = status
        # logged before the answer leaves: a client never sees its answer before the log does
        self.hub._record(LoggedRequest(self.command, self.path, status))
        self.send_response(status)
        headers = dict(headers or {})
        headers.setdefault("Content-Length", str(len(body)))
        for key, value in headers.items():
            self.send_header(key, value)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def _json(self, status: int, data: Any, headers: Mapping[str, str] | None = None) -> None:
        self._send(status, json.dumps(data).encode(), {"Content-Type": "application/json", **(headers or {})})

    def _error(self, e: HubError) -> None:
        # a header is latin-1 on the wire: a path with other characters is escaped there, kept in the JSON
        first_line = e.message.splitlines()[0].encode("ascii", "backslashreplace").decode()
        headers = {"X-Error-Message": first_line, **e.headers}
        if e.code:
            headers["X-Error-Code"] = e.code
        self._json(e.status, {"error": e.message, **e.body}, headers)

    def _payload(self) -> Any:
        try:
            return json.loads(self.body or b"null")
        except ValueError as e:
            raise HubError(400, f"Request body is not JSON: {e}") from e

    # -- auth
    def _user(self) -> User | None:
        """The token's user; None without a token; an unknown token is refused on every route, as the Hub does."""
        auth = self.headers.get("Authorization")
        if not auth:
            return None
        scheme, _, token = auth.partition(" ")
        user = self.hub.users.get(token.strip()) if scheme.lower() == "bearer" else None
        if user is None:
            raise HubError(401, INVALID_TOKEN)
        return user

    def _readable(self, repo_id: str, user: User | None) -> dict[str, Any]:
        """The repo's metadata, or what the Hub answers for a missing repo: 401 without a token, 404 with
        one, both `X-Error-Code: RepoNotFound` (the same for a private repo the caller may not read)."""
        meta = self.hub.state.meta(repo_id)
        if meta is None or (meta["private"] and not (user and user.owns(repo_id.split("/")[0]))):
            raise HubError(404 if user else 401, f"Repository not found: {repo_id}", "RepoNotFound")
        return meta

    def _writable(self, repo_id: str, user: User | None) -> dict[str, Any]:
        if user is None:
            raise HubError(401, f"You must be authenticated (Authorization: Bearer <token>) to write to {repo_id}")
        meta = self._readable(repo_id, user)
        if not user.owns(repo_id.split("/")[0]):
            raise HubError(403, f"You don't have the rights to write to {repo_id} (user {user.name!r})")
        return meta

    def _revision(self, meta: dict[str, Any], rev: str) -> None:
        if unquote(rev) not in (BRANCH, meta["sha"]):
            raise HubError(404, f"Invalid rev id: {unquote(rev)} (the fake has only '{BRANCH}')", "RevisionNotFound")

    # -- routes
    def _route(self) -> None:
        url = urlsplit(self.path)
        parts = url.path.split("/")[1:]
        query = {k: v[-1] for k, v in parse_qs(url.query, keep_blank_values=True).items()}
        method = self.command
        if method == "PUT" and len(parts) == 2 and parts[0] == ".lfs-upload":
            return self._lfs_put(parts[1])
        user = self._user()
        if method == "GET" and parts == ["api", "whoami-v2"]:
            return self._whoami(user)
        if method == "POST" and parts == ["api", "repos", "create"]:
            return self._create_repo(user)
        if method == "POST" and parts == ["api", "validate-yaml"]:
            return self._validate_yaml()
        if parts[:2] == ["api", "models"] and len(parts) >= 4:
            repo_id = f"{unquote(parts[2])}/{unquote(parts[3])}"
            rest = parts[4:]
            if method == "GET" and rest == []:
                return self._model_info(repo_id, user, BRANCH, query)
            if method == "GET" and len(rest) == 2 and rest[0] == "revision":
                return self._model_info(repo_id, user, rest[1], query)
            if method == "GET" and len(rest) >= 2 and rest[0] == "tree":
                return self._tree(repo_id, user, rest[1], unquote("/".join(rest[2:])), query)
            if method == "POST" and len(rest) == 2 and rest[0] == "preupload":
                return self._preupload(repo_id, user, rest[1], query)
            if method == "POST" and len(rest) == 2 and rest[0] == "commit":
                return self._commit(repo_id, user, rest[1], query)
        if len(parts) >= 4 and parts[2] == "resolve" and method in ("GET", "HEAD"):
            repo_id = f"{unquote(parts[0])}/{unquote(parts[1])}"
            return self._resolve(repo_id, user, parts[3], unquote("/".join(parts[4:])))
        if (
            method == "POST"
            and len(parts) == 6
            and parts[1].endswith(".git")
            and parts[2:5] == ["info", "lfs", "objects"]
        ):
            repo_id = f"{unquote(parts[0])}/{unquote(parts[1][: -len('.git')])}"
            if parts[5] == "batch":
                return self._lfs_batch(repo_id, user)
            if parts[5] == "verify":
                return self._lfs_verify(repo_id, user)
        raise HubError(404, f"FakeHub has no route for {method} {url.path} (huggingface_hub 0.36.2 API subset)")

    def _whoami(self, user: User | None) -> None:
        """HfApi.whoami: GET /api/whoami-v2 (HH/hf_api.py:1795-1798); 401 without a valid token."""
        if user is None:
            raise HubError(401, "Invalid username or password.")
        orgs = [{"type": "org", "name": org, "roleInOrg": "write"} for org in sorted(user.orgs)]
        auth = {"type": "access_token", "accessToken": {"displayName": "fake-hub", "role": "write"}}
        self._json(200, {"type": "user", "name": user.name, "fullname": user.name, "orgs": orgs, "auth": auth})

    def _validate_yaml(self) -> None:
        """HfApi._validate_yaml: create_commit posts a committed README.md here first (HH/hf_api.py:4217-4224,
        9650-9670: `warnings` and, on 400, `errors` are read). Only a README without metadata is accepted."""
        payload = self._payload()
        content = payload.get("content") if isinstance(payload, dict) else None
        if not isinstance(content, str):
            raise HubError(400, f"validate-yaml: {{'content': str}} expected, got {payload!r}")
        if content.lstrip().startswith("---"):
            message = "FakeHub does not validate model card metadata (a README.md with a YAML block)"
            raise HubError(400, message, body={"errors": [{"message": message}], "warnings": []})
        self._json(200, {"errors": [], "warnings": []})

    def _model_info(self, repo_id: str, user: User | None, rev: str, query: Mapping[str, str]) -> None:
        """model_info / repo_info / repo_exists: GET /api/models/{id}[/revision/{rev}] (HH/hf_api.py:2646-2663),
        read by ModelInfo(**data) (HH/hf_api.py:844-910); `blobs=True` (files_metadata) adds size, blobId, lfs."""
        unsupported = set(query) - {"blobs", "securityStatus"}
        if unsupported:
            raise HubError(400, f"FakeHub model_info does not implement {sorted(unsupported)}")
        with self.hub.state.lock:
            meta = self._readable(repo_id, user)
            self._revision(meta, rev)
            files = self.hub.state.all_files(repo_id)
        siblings = []
        for f in files:
            sibling: dict[str, Any] = {"rfilename": f["path"]}
            if query.get("blobs", "").lower() == "true":
                sibling.update(size=f["size"], blobId=f["oid"])
                if "lfs" in f:  # siblings carry "sha256", tree items "oid" (HH/hf_api.py:904-908 vs :662)
                    sibling["lfs"] = {
                        "sha256": f["lfs"]["oid"],
                        "size": f["size"],
                        "pointerSize": f["lfs"]["pointerSize"],
                    }
            siblings.append(sibling)
        org = repo_id.split("/")[0]
        info = {
            "id": repo_id,
            "modelId": repo_id,
            "author": org,
            "sha": meta["sha"],
            "private": meta["private"],
            "disabled": False,
            "gated": False,
            "siblings": siblings,
        }
        self._json(200, info)

    def _tree(self, repo_id: str, user: User | None, rev: str, path: str, query: Mapping[str, str]) -> None:
        """list_repo_tree: GET /api/models/{id}/tree/{rev}[/{quote(path, safe="")}]?recursive=&expand=
        (HH/hf_api.py:3188-3191), paginated with `Link: <next>; rel="next"` (HH/utils/_pagination.py:27-52)."""
        if query.get("expand", "false").lower() == "true":
            raise HubError(400, "FakeHub list_repo_tree does not implement expand=True (lastCommit, security)")
        recursive = query.get("recursive", "false").lower() == "true"
        folder = clean_path(path, folder=True)
        with self.hub.state.lock:
            meta = self._readable(repo_id, user)
            self._revision(meta, rev)
            items = self.hub.state.entries(repo_id, folder, recursive)
        try:
            start = int(query.get("cursor") or 0)
        except ValueError:
            raise HubError(400, f"Invalid cursor {query['cursor']!r}") from None
        page = items[start : start + self.hub.page_size]
        headers = {}
        if start + self.hub.page_size < len(items):
            # the Hub's next link names huggingface.co and paginate() does not rewrite it
            # (HH/utils/_pagination.py:42-46): a fake, like any mirror, must name itself
            rest = urlencode({**query, "cursor": start + self.hub.page_size})
            nxt = f"{self.hub.endpoint}{urlsplit(self.path).path}?{rest}"
            headers["Link"] = f'<{nxt}>; rel="next"'
        self._json(200, page, headers)

    def _resolve(self, repo_id: str, user: User | None, rev: str, path: str) -> None:
        """file_exists / hf_hub_download / get_hf_file_metadata: HEAD then GET /{id}/resolve/{rev}/{quote(path)}
        (HH/file_download.py:253; HEAD HH/file_download.py:1467-1488, needs X-Repo-Commit, ETag, size at
        :1571-1589; GET with an optional Range to resume, :410)."""
        state = self.hub.state
        with state.lock:
            meta = self._readable(repo_id, user)
            self._revision(meta, rev)
            commit = {"X-Repo-Commit": meta["sha"]}
            try:
                path = clean_path(path)
            except HubError as e:
                raise HubError(400, e.message, headers=commit) from None
            file = state.locate(repo_id, path)
            if file is None or not file.is_file():
                raise HubError(404, f"Entry not found: {path}", "EntryNotFound", headers=commit)
            data = file.read_bytes()
            lfs = meta["lfs"].get(path)
        headers = {
            **commit,
            "ETag": f'"{lfs or git_blob_sha1(data)}"',  # the Hub's: sha256 for LFS files, git blob id otherwise
            "Accept-Ranges": "bytes",
            "Content-Type": "application/octet-stream",
        }
        wanted = _byte_range(self.headers.get("Range"), len(data))
        if wanted is None:
            return self._send(200, data, headers)
        if wanted == ():
            raise HubError(
                416,
                f"Range not satisfiable: {self.headers.get('Range')}",
                headers={"Content-Range": f"bytes */{len(data)}"},
            )
        first, last = wanted
        headers["Content-Range"] = f"bytes {first}-{last}/{len(data)}"
        self._send(206, data[first : last + 1], headers)

    def _create_repo(self, user: User | None) -> None:
        """HfApi.create_repo: POST /api/repos/create {"name", "organization", "private", "type"}
        (HH/hf_api.py:3696-3778); 409 when it exists, which create_repo(exist_ok=True) accepts (:3762)."""
        if user is None:
            raise HubError(401, "You must be authenticated (Authorization: Bearer <token>) to create a repo")
        payload = self._payload()
        if not isinstance(payload, dict) or not isinstance(payload.get("name"), str):
            raise HubError(400, f"create_repo: a JSON object with 'name' is required, got {payload!r}")
        if payload.get("type", "model") not in ("model", None):
            raise HubError(400, f"FakeHub has model repos only, not {payload['type']!r}")
        namespace = payload.get("organization") or user.name
        repo_id = f"{namespace}/{payload['name']}"
        try:
            _split_repo_id(repo_id)
        except ValueError as e:
            raise HubError(400, str(e)) from None
        if not user.owns(namespace):
            raise HubError(403, f"You don't have the rights to create a model under the namespace {namespace!r}")
        url = f"{HUB_URL}/{repo_id}"
        with self.hub.state.lock:
            if self.hub.state.meta(repo_id) is not None:
                # create_repo(exist_ok=True) reads the url of this answer (HH/hf_api.py:3762, 3777-3778)
                raise HubError(409, "You already created this model repo", body={"url": url})
            self.hub.state.create(repo_id, bool(payload.get("private")))
        self._json(200, {"url": url, "name": repo_id, "id": repo_id})

    def _preupload(self, repo_id: str, user: User | None, rev: str, query: Mapping[str, str]) -> None:
        """_fetch_upload_modes: POST /api/models/{id}/preupload/{rev} {"files": [{path, sample, size}]}
        (HH/_commit_api.py:731-762, checked by :671-684); the `oid` of a file already there lets the client
        drop an unchanged one from the commit (HH/hf_api.py:4249-4258)."""
        if query.get("create_pr"):
            raise HubError(400, "FakeHub does not implement pull requests (create_pr)")
        payload = self._payload()
        files = payload.get("files") if isinstance(payload, dict) else None
        if not isinstance(files, list):
            raise HubError(400, f"preupload: {{'files': [...]}} expected, got {payload!r}")
        answer = []
        with self.hub.state.lock:
            meta = self._writable(repo_id, user)
            self._revision(meta, rev)
            for f in files:
                path = clean_path(f["path"])
                mode = upload_mode(base64.b64decode(f.get("sample", "")), int(f["size"]))
                found = self.hub.state.locate(repo_id, path)
                oid = None
                if found is not None and found.is_file():
                    oid = meta["lfs"].get(path) or git_blob_sha1(found.read_bytes())
                answer.append({"path": path, "uploadMode": mode, "shouldIgnore": False, "oid": oid})
        self._json(200, {"files": answer})

    def _lfs_batch(self, repo_id: str, user: User | None) -> None:
        """post_lfs_batch_info: POST /{id}.git/info/lfs/objects/batch (HH/lfs.py:150-186). The client offers
        "xet" when hf_xet is installed (HH/_commit_api.py:380-382); the fake answers "basic": one PUT per object
        (HH/lfs.py:309-328, no auth header: the href is the credential, like the Hub's presigned URL), then
        the verify action (HH/lfs.py:258-267). An object already stored gets no actions: the client skips
        it (HH/_commit_api.py:488-495)."""
        payload = self._payload()
        if not isinstance(payload, dict) or payload.get("operation") != "upload":
            raise HubError(400, f"FakeHub LFS batch supports operation 'upload' only, got {payload!r}")
        if "basic" not in payload.get("transfers", ["basic"]):
            raise HubError(400, f"FakeHub LFS supports the basic transfer only, offered {payload['transfers']}")
        if payload.get("hash_algo", "sha256") != "sha256":
            raise HubError(400, f"FakeHub LFS supports sha256 only, got {payload['hash_algo']!r}")
        objects = []
        with self.hub.state.lock:
            self._writable(repo_id, user)
            for obj in payload.get("objects", []):
                oid, size = obj.get("oid"), obj.get("size")
                if not (isinstance(oid, str) and _SHA256.fullmatch(oid) and isinstance(size, int) and size >= 0):
                    error = {"code": 422, "message": f"Invalid object oid {oid!r} / size {size!r}"}
                    objects.append({"oid": str(oid), "size": int(size or 0), "error": error})
                    continue
                stored = self.hub.state.lfs_object(repo_id, oid)
                if stored.is_file() and stored.stat().st_size == size:
                    objects.append({"oid": oid, "size": size})
                    continue
                ticket = secrets.token_urlsafe(16)
                self.hub.state.tickets[ticket] = (repo_id, oid, size)
                verify = f"{self.hub.endpoint}/{repo_id}.git/info/lfs/objects/verify"
                actions = {"upload": {"href": f"{self.hub.endpoint}/.lfs-upload/{ticket}"}, "verify": {"href": verify}}
                objects.append({"oid": oid, "size": size, "authenticated": True, "actions": actions})
        self._json(200, {"transfer": "basic", "objects": objects}, {"Content-Type": "application/vnd.git-lfs+json"})

    def _lfs_put(self, ticket: str) -> None:
        """The basic transfer's upload: the object must hash to the announced sha256 and size."""
        with self.hub.state.lock:
            known = self.hub.state.tickets.get(ticket)
            if known is None:
                raise HubError(403, "Unknown or used LFS upload URL")
            repo_id, oid, size = known
            actual = hashlib.sha256(self.body).hexdigest()
            if actual != oid or len(self.body) != size:
                raise HubError(
                    400, f"LFS object mismatch: announced {oid} ({size} B), got {actual} ({len(self.body)} B)"
                )
            self.hub.state.store_lfs(repo_id, self.body)
            del self.hub.state.tickets[ticket]
        self._send(200)

    def _lfs_verify(self, repo_id: str, user: User | None) -> None:
        payload = self._payload()
        with self.hub.state.lock:
            self._writable(repo_id, user)
            oid, size = payload.get("oid"), payload.get("size")
            stored = self.hub.state.lfs_object(repo_id, oid) if _SHA256.fullmatch(str(oid)) else None
            if stored is None or not stored.is_file() or stored.stat().st_size != size:
                raise HubError(404, f"LFS object {oid} ({size} B) was not uploaded to {repo_id}")
        self._json(200, {"success": True})

    def _commit(self, repo_id: str, user: User | None, rev: str, query: Mapping[str, str]) -> None:
        """create_commit: POST /api/models/{id}/commit/{rev}, application/x-ndjson (HH/hf_api.py:4304-4344),
        lines header / file / lfsFile / deletedFile / deletedFolder (HH/_commit_api.py:873-960); applied all
        or nothing; answers commitUrl, commitOid, pullRequestUrl (read at HH/hf_api.py:4337-4344)."""
        if query.get("create_pr"):
            raise HubError(400, "FakeHub does not implement pull requests (create_pr)")
        if self.headers.get("Content-Type", "").split(";")[0].strip() != "application/x-ndjson":
            raise HubError(400, f"FakeHub commits are NDJSON only, got {self.headers.get('Content-Type')!r}")
        try:
            lines = [json.loads(line) for line in self.body.splitlines() if line.strip()]
        except ValueError as e:
            raise HubError(400, f"Commit payload is not NDJSON: {e}") from e
        if not lines or lines[0].get("key") != "header":
            raise HubError(400, "Commit payload must start with a header line")
        with self.hub.state.lock:
            meta = self._writable(repo_id, user)
            self._revision(meta, rev)
            sha = self.hub.state.commit(repo_id, lines[1:], lines[0]["value"].get("parentCommit"))
        url = f"{HUB_URL}/{repo_id}/commit/{sha}"
        self._json(200, {"success": True, "commitUrl": url, "commitOid": sha, "pullRequestUrl": None})


def _byte_range(header: str | None, size: int) -> tuple[int, int] | tuple[()] | None:
    """`Range: bytes=a-b | a- | -n` -> (first, last); () when unsatisfiable; None: no (single) range."""
    if not header or not header.startswith("bytes=") or "," in header:
        return None
    first_s, _, last_s = header[len("bytes=") :].strip().partition("-")
    try:
        if first_s == "":
            first, last = max(size - int(last_s), 0), size - 1
        else:
            first, last = int(first_s), min(int(last_s), size - 1) if last_s else size - 1
    except ValueError:
        return None
    return () if first > last or first >= size else (first, last)
