"""Nobody outside `neuronforge/records/` reads a stored record by string key: a reader holds the typed
record and uses its attributes, so a record's shape lives in one module (issue 35).

The table `GUARDED` says which names hold which record kind in the code; the scan flags, in every
module outside the records package, a subscript (`manifest["files"]`), a `.get("files")` or an
`"files" in manifest` on one of those names with one of the record's field names. A module where such
a name holds another kind of record, not yet typed, is listed in `NOT_YET` with that kind — typing
the record takes the module off the list.
"""

from __future__ import annotations

import ast
from pathlib import Path

from pydantic import BaseModel

from neuronforge.records.artifact_manifest import ArtifactManifest
from neuronforge.records.farm_index import Entry, FarmIndexHead, FarmIndexTail, LogRecord
from neuronforge.records.index_entry import IndexEntry
from neuronforge.records.payload_manifest import PayloadManifest
from neuronforge.records.smoke_reference import SmokeReference

REPO = Path(__file__).resolve().parents[2]
SCANNED = ("neuronforge", "plugins", "neuronforge_airflow", "dags")
RECORDS = REPO / "neuronforge" / "records"

# record kind -> the names code uses for it (extend for each kind that becomes a StoredRecord)
GUARDED: dict[type[BaseModel], tuple[str, ...]] = {
    ArtifactManifest: ("manifest", "m", "artifact_manifest"),
    IndexEntry: ("index", "entry", "pointer", "index_entry"),
    PayloadManifest: ("manifest", "payload_manifest", "staged"),
    FarmIndexTail: ("tail",),
    FarmIndexHead: ("head",),
    LogRecord: ("record",),
    Entry: ("e", "row_entry"),
    SmokeReference: ("expected", "reference"),
}

# module (repository path) -> the record its guarded names hold there, still a dict
NOT_YET: dict[str, str] = {}  # empty: the checkpoint, quantized and tree manifests are typed too


def _fields() -> dict[str, set[str]]:
    """name -> the field names (as stored) of every record kind the name may hold."""
    out: dict[str, set[str]] = {}
    for cls, names in GUARDED.items():
        stored = {f.alias or name for name, f in cls.model_fields.items()}
        for name in names:
            out.setdefault(name, set()).update(stored)
    return out


def _text(node: ast.AST) -> str | None:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def string_key_reads(source: str, fields: dict[str, set[str]]) -> list[tuple[int, str]]:
    """(line, what) of every read of a guarded name by one of its record's field names."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name):
            name, key = node.value.id, _text(node.slice)
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in ("get", "pop", "setdefault")
            and isinstance(node.func.value, ast.Name)
            and node.args
        ):
            name, key = node.func.value.id, _text(node.args[0])
        elif (
            isinstance(node, ast.Compare)
            and len(node.ops) == 1
            and isinstance(node.ops[0], (ast.In, ast.NotIn))
            and isinstance(node.comparators[0], ast.Name)
        ):
            name, key = node.comparators[0].id, _text(node.left)
        else:
            continue
        if key is not None and key in fields.get(name, ()):
            found.append((node.lineno, f"{name}[{key!r}]"))
    return found


def _modules() -> list[Path]:
    return sorted(p for top in SCANNED for p in (REPO / top).rglob("*.py") if RECORDS not in p.parents and p.is_file())


def test_no_module_reads_a_typed_record_by_string_key() -> None:
    fields = _fields()
    offenders = []
    for path in _modules():
        rel = path.relative_to(REPO).as_posix()
        if rel in NOT_YET:
            continue
        offenders += [f"{rel}:{line}: {what}" for line, what in string_key_reads(path.read_text(), fields)]
    assert offenders == [], "read the typed record's attribute instead:\n" + "\n".join(offenders)


def test_the_scan_sees_each_way_of_reading_by_key_and_nothing_else() -> None:
    fields = _fields()
    source = """
manifest["files"]; manifest.get("cache_key"); "profile" in manifest; index["prefix"]; entry.get("manifest")
m["hosts"]
manifest.files; manifest["tensors"]; other["files"]; manifest.smoke["passed"]; row.get("manifest")
"""
    assert [what for _, what in string_key_reads(source, fields)] == [
        "manifest['files']",
        "manifest['cache_key']",
        "manifest['profile']",
        "index['prefix']",
        "entry['manifest']",
        "m['hosts']",
    ]


def test_every_module_not_yet_typed_exists_and_still_needs_its_exemption() -> None:
    """An exemption outlives its reason only by mistake: each listed module still reads a guarded
    name by a field name (else the entry goes)."""
    fields = _fields()
    for rel in NOT_YET:
        path = REPO / rel
        assert path.is_file(), rel
        assert string_key_reads(path.read_text(), fields), f"{rel} no longer needs its NOT_YET entry"
