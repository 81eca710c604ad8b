"""Every stored record is written by its own writer (issue 51): the bytes a store or a file holds for a
record are its `to_bytes()` — `write`, `write_if_absent`, `localcache.publish_tree`, `local.write_local`
all write those — and nothing else dumps a record's dict. A dict dumped with plain `json.dumps` skips
the escapes of `common.stored_text` (which `from_bytes` undoes): the compile stage staged the payload
manifest that way, so a launch file holding a NUL made publish refuse the build (the manifest read as
damaged), one holding `\\\\` read back altered, failed its sha256 and silently left `launch_text` (no
snippet in the catalog), and the build's folder, named for the sha256 of `to_bytes()`, held other bytes.

Two guards, each catching what the other cannot:

- at run time, a real build on the cpu profile whose launch files hold a NUL and backslashes: every
  JSON object it gives a store (`put_bytes`, `put_if_absent`, `replace_if_version`) must be bytes a
  record's writer returned during the run, whatever code path wrote it — a new writer that dumps a dict
  fails here however it is spelled; and the build publishes with each launch text exactly as written;
- in the source, for what that one build does not run (other profiles, sweeps, releases, the farm
  index's compaction): outside `neuronforge/records/` no record's dict (`.to_json()`, `.stored_json()`,
  `storable_json(...)`) is serialized with `json.dump(s)` or handed to a write, and inside it every
  `to_bytes` a kind overrides dumps `stored_json()`.
"""

from __future__ import annotations

import ast
import hashlib
import json
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from neuronforge.records.base import StoredRecord

REPO = Path(__file__).resolve().parents[2]
SCANNED = ("neuronforge", "neuronforge_airflow", "plugins", "dags")
RECORDS = REPO / "neuronforge" / "records"

# A record's dict, as these calls give it.
DICT_OF_RECORD = {"to_json", "stored_json", "storable_json"}
# Calls that write what they are given (a store's, a file's, a tree's, a helper's).
WRITES = {
    "put_bytes", "put_if_absent", "replace_if_version", "write_json", "publish_tree",
    "write_text", "write_bytes", "write_json_atomic", "write_atomic", "write_local",
}  # fmt: skip
# JSON serialized from a `to_json()` that is no stored record, and never stored: (path, line's text).
NOT_RECORDS = {
    # the release request shown as the run's conf on the catalog's confirmation page
    ("plugins/neuronforge_catalog_pages/release.py", "json.dumps(pinned.to_json(), indent=2, ensure_ascii=False)"),
}


def _called(node: ast.AST) -> str | None:
    if isinstance(node, ast.Call):
        if isinstance(node.func, ast.Attribute):
            return node.func.attr
        if isinstance(node.func, ast.Name):
            return node.func.id
    return None


def _holds_a_record_dict(node: ast.AST) -> bool:
    return any(_called(n) in DICT_OF_RECORD for n in ast.walk(node))


def other_writes(source: str) -> list[tuple[int, str]]:
    """(line, code) of every serialization of a record's dict, and every write handed one directly."""
    found = []
    for node in ast.walk(ast.parse(source)):
        name = _called(node)
        if not isinstance(node, ast.Call) or name is None:
            continue
        dumped = (
            name in ("dumps", "dump")
            and isinstance(node.func, ast.Attribute)
            and isinstance(node.func.value, ast.Name)
            and node.func.value.id == "json"
            and node.args
            and _holds_a_record_dict(node.args[0])
        )
        written = name in WRITES and any(
            _called(a) in DICT_OF_RECORD for a in [*node.args, *(k.value for k in node.keywords)]
        )
        if dumped or written:
            found.append((node.lineno, ast.unparse(node)))
    return found


def own_writer_problems(source: str) -> list[tuple[int, str]]:
    """(line, what) of every `to_bytes` of a records module that does not dump `self.stored_json()`."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.FunctionDef) and node.name == "to_bytes":
            calls = {_called(n) for n in ast.walk(node)}
            if "stored_json" not in calls or "to_json" in calls:
                found.append((node.lineno, "to_bytes does not dump stored_json()"))
    return found


def _modules(inside_records: bool) -> Iterator[tuple[str, str]]:
    for top in SCANNED:
        for path in sorted((REPO / top).rglob("*.py")):
            if (RECORDS in path.parents) == inside_records:
                yield path.relative_to(REPO).as_posix(), path.read_text()


def test_no_code_writes_a_record_but_its_writer() -> None:
    offenders = [
        f"{rel}:{line}: {code}"
        for rel, text in _modules(inside_records=False)
        for line, code in other_writes(text)
        if (rel, code) not in NOT_RECORDS
    ]
    assert offenders == [], "write the record's bytes (`to_bytes`, `write`, `write_local`):\n" + "\n".join(offenders)


def test_a_kind_writing_its_own_layout_dumps_its_stored_json() -> None:
    offenders = [
        f"{rel}:{line}: {what}"
        for rel, text in _modules(inside_records=True)
        for line, what in own_writer_problems(text)
    ]
    assert offenders == []


def test_the_scans_find_the_writes_this_issue_removed() -> None:
    """Each line below is one this change replaced (a scan that cannot fail is none)."""
    removed = """
ref = publish_tree(ctx.store, payload, prefix, manifest.to_json(), stored=stored)
(payload / EXPECTED).write_text(json.dumps(expected.to_json(), indent=2) + "\\n")
write_json_atomic(self.path, body.to_json())
lines = (json.dumps(storable_json(e.to_json()), sort_keys=True, separators=(",", ":")) for e in chunk)
data = json.dumps(head.stored_json(), sort_keys=True, separators=(",", ":")).encode()
"""
    assert sorted(line for line, _ in other_writes(removed)) == [2, 3, 4, 5, 6]
    lease = """
class LeaseRecord:
    def to_bytes(self):
        return json.dumps(self.to_json(), sort_keys=True).encode()
"""
    assert own_writer_problems(lease) == [(3, "to_bytes does not dump stored_json()")]
    assert other_writes("store.put_bytes(record.to_bytes(), key)\nprint_json(row.to_json())") == []


# -- at run time ------------------------------------------------------------------------------------
# Launch text a profile may write: a NUL, a backslash before another, before `x00`, before `xe9`.
HOSTILE_LAUNCH = {
    "nul.sh": 'printf "a\\0b" # a NUL: \x00 (bash drops it)\n',
    "backslash.sh": 'printf "%s\\n" "C:\\\\build" "\\x00" "\\xe9"  # \\\\ \\x00 \\xe9\n',
}
# JSON a store is given that is no record: the smoke test's result, listed in the artifact's manifest.
NOT_RECORD_FILES = {"smoke.json"}


def _record_classes() -> list[type[StoredRecord]]:
    import importlib
    import pkgutil

    import neuronforge.records as package

    for info in pkgutil.iter_modules(package.__path__):
        importlib.import_module(f"neuronforge.records.{info.name}")
    found, todo = [], [StoredRecord]
    while todo:
        cls = todo.pop()
        found.append(cls)
        todo += cls.__subclasses__()
    return found


def _watch_writers(monkeypatch: pytest.MonkeyPatch) -> set[bytes]:
    """Every `to_bytes` of every record kind records what it returned (the set returned)."""
    written: set[bytes] = set()
    for cls in _record_classes():
        if "to_bytes" in vars(cls):
            original = vars(cls)["to_bytes"]

            def to_bytes(self: StoredRecord, _original: Callable[..., bytes] = original) -> bytes:
                data = _original(self)
                written.add(data)
                return data

            monkeypatch.setattr(cls, "to_bytes", to_bytes)
    return written


def _watch_store_writes(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, bytes]]:
    """(key, bytes) of every object given to a store from memory."""
    from neuronforge.stores.file import FileStore

    given: list[tuple[str, bytes]] = []

    def watched(name: str) -> None:
        original = getattr(FileStore, name)

        def write(self: FileStore, data: bytes, key: str, *args: Any, **kwargs: Any) -> Any:
            given.append((key, data))
            return original(self, data, key, *args, **kwargs)

        monkeypatch.setattr(FileStore, name, write)

    for name in ("put_bytes", "put_if_absent", "replace_if_version"):
        watched(name)
    return given


def _json_object(data: bytes) -> bool:
    try:
        return isinstance(json.loads(data), dict)
    except ValueError:  # a gzipped page, a text file
        return False


def test_a_build_whose_launch_files_hold_a_nul_and_backslashes_publishes_them_exactly(
    compiled, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from neuronforge.artifacts import layout
    from neuronforge.pipeline.runner import run_target
    from neuronforge.profiles.cpu import CpuProfile
    from neuronforge.stores import open_store

    rendered = CpuProfile.launch_spec
    monkeypatch.setattr(CpuProfile, "launch_spec", lambda self, ctx: {**rendered(self, ctx), **HOSTILE_LAUNCH})
    work = tmp_path / "work"
    shutil.copytree(compiled.work_dir / "compile-cache", work / "compile-cache")  # graphs reused: no compile
    store = open_store(f"file://{tmp_path / 'store'}")  # a store of its own: the same key is not published there
    by_writers = _watch_writers(monkeypatch)
    given = _watch_store_writes(monkeypatch)

    out = run_target(str(compiled.checkpoint), compiled.target, store, work)

    assert out.status == "published", out
    launch = out.published.manifest.launch_text or {}
    assert {name: launch.get(name) for name in HOSTILE_LAUNCH} == HOSTILE_LAUNCH
    # The build's folder is named for the sha256 of its manifest's bytes: the bytes the store was given
    # (the folder itself is gone once published).
    build = out.state.compiled.build
    (staged,) = [data for key, data in given if key == build.manifest_key]
    digest = hashlib.sha256(staged).hexdigest()
    assert build.manifest_sha256 == digest and build.prefix == layout.build_prefix(out.key, digest)
    # Every record the run wrote, it wrote through its kind's writer.
    others = [
        key
        for key, data in given
        if _json_object(data) and data not in by_writers and key.rsplit("/", 1)[-1] not in NOT_RECORD_FILES
    ]
    assert {key for key, _ in given} >= {build.manifest_key, layout.index_entry(out.key)}
    assert others == [], f"written without their record's writer: {others}"
