"""Nobody outside `neuronforge/records/` reads a stored record by string key: a reader holds the typed
record and uses its attributes, so a record's shape lives in one module (issue 35).

The table `GUARDED` says which names hold which record kind in the code; the scan flags, in every
module outside the records package, a subscript (`manifest["files"]`), a `.get("files")` or an
`"files" in manifest` on one of those names with one of the record's field names. A module where such
a name holds another kind of record would have to be typed first: none is left.

A second scan below covers the records whose fields no other record stores (leases, failure and
toolchain records, checkpoint and quantized manifests, the vLLM cache manifest, sweep records, the
recompile report): any subscript or `.get` of such a field, whatever the variable is called.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

from pydantic import BaseModel

from neuronforge.records.artifact_manifest import ArtifactManifest
from neuronforge.records.channel import ChannelRecord
from neuronforge.records.farm_index import Entry, FarmIndexHead, FarmIndexTail, LogRecord
from neuronforge.records.index_entry import IndexEntry
from neuronforge.records.payload_manifest import PayloadManifest
from neuronforge.records.review import ReviewRecord
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
    ChannelRecord: ("channel_record", "winner"),
    ReviewRecord: ("review", "review_record"),
}


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


# Fields that only these records store (a field shared with the artifact manifest, such as "files" or
# "source", is part 1's scan's to watch).
THEIR_FIELDS = frozenset(
    {
        "fetched_at", "requested_revision",  # checkpoint manifest
        "kept_modules", "fp8_max", "max_rel_error", "kernel_chunks", "rel_error", "scale_shape",  # quantized
        "holder", "heartbeat", "expires",  # lease
        "recorded_at",  # toolchain record
        "store_prefix", "nki", "built",  # vLLM cache manifest
        "candidates", "updated_at",  # sweep record file
        "published_for", "stale_for", "outcome_detail", "generated_at",  # recompile report
        "profile_line", "requires_approval", "manifest_sha256", "artifact_prefix",  # release channel
    }
)  # fmt: skip
# A local manifest parsed by hand instead of read through its class.
HAND_PARSED = re.compile(r"json\.loads\([^\n]*(layout\.MANIFEST|CACHE_MANIFEST|vllm-cache\.json)")
# Not these records, though spelled like their fields.
ALLOWED = {
    # the Airflow Variable the cluster policy writes
    ("neuronforge_airflow/policies/deployment_checks.py", "recorded_at"),
    # `neuronforge quantize`'s own summary (its --json output)
    ("neuronforge/interfaces/cli/build.py", "max_rel_error"),
    # the farm index's "building" entry (a typed farm-index record, read through its class above)
    ("neuronforge/farm/rows.py", "holder"),
    # the sweep plan handed between tasks (XCom), not the record file
    ("neuronforge_airflow/operators/sweep.py", "candidates"),
}


def _unique_field_sources() -> list[Path]:
    out = []
    for top in SCANNED:
        for path in sorted((REPO / top).rglob("*.py")):
            if "records" not in path.relative_to(REPO).parts[:2]:
                out.append(path)
    return out


def _string_key_reads(tree: ast.AST) -> list[tuple[int, str]]:
    found = []
    for node in ast.walk(tree):
        key = None
        if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant):
            key = node.slice.value
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "get"
            and node.args
            and isinstance(node.args[0], ast.Constant)
        ):
            key = node.args[0].value
        if isinstance(key, str) and key in THEIR_FIELDS:
            found.append((node.lineno, key))
    return found


def test_the_scan_finds_a_string_key_read_and_a_hand_parsed_manifest() -> None:
    """The checks below would catch the readers this change removed (a test that cannot fail is none)."""
    before = 'manifest = json.loads((local / layout.MANIFEST).read_text())\nx = manifest["kept_modules"]\n'
    assert _string_key_reads(ast.parse(before)) == [(2, "kept_modules")]
    assert HAND_PARSED.search(before)
    assert _string_key_reads(ast.parse('lease.get("holder")')) == [(1, "holder")]


def test_no_module_reads_these_records_by_string_key() -> None:
    offenders = []
    for path in _unique_field_sources():
        rel = path.relative_to(REPO).as_posix()
        text = path.read_text()
        for line, key in _string_key_reads(ast.parse(text)):
            if (rel, key) not in ALLOWED:
                offenders.append(f"{rel}:{line}: [{key!r}]")
        for m in HAND_PARSED.finditer(text):
            offenders.append(f"{rel}:{text.count(chr(10), 0, m.start()) + 1}: {m.group(0)}")
    assert not offenders, "read the record through its class in neuronforge/records/:\n" + "\n".join(offenders)
