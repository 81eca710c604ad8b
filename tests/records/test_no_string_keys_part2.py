"""Nobody outside the records package reads the records of part 2 (checkpoint and quantized manifests,
lease, failure and toolchain records, vLLM cache manifest, sweep record file, recompile report) by
string key: a key only they store, subscripted or `.get` anywhere in the code, is a reader the record's
class does not know about. Tests may still read raw JSON: they check what the store holds."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCANNED = ("neuronforge", "neuronforge_airflow", "dags", "plugins")
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
    }
)  # fmt: skip
# A local manifest parsed by hand instead of read through its class.
HAND_PARSED = re.compile(r"json\.loads\([^\n]*(layout\.MANIFEST|CACHE_MANIFEST|vllm-cache\.json)")
# Not these records, though spelled like their fields.
ALLOWED = {
    (
        "neuronforge_airflow/policies/deployment_checks.py",
        "recorded_at",
    ),  # the Airflow Variable the cluster policy writes
    # `neuronforge quantize`'s own summary (its --json output)
    ("neuronforge/interfaces/cli/build.py", "max_rel_error"),
    ("neuronforge/farm/rows.py", "holder"),  # the farm index's "building" entry (farm_index records, part 1)
    (
        "neuronforge_airflow/operators/sweep.py",
        "candidates",
    ),  # the sweep plan handed between tasks (XCom), not the record file
}


def _sources() -> list[Path]:
    out = []
    for top in SCANNED:
        for path in sorted((ROOT / top).rglob("*.py")):
            if "records" not in path.relative_to(ROOT).parts[:2]:
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
    for path in _sources():
        rel = path.relative_to(ROOT).as_posix()
        text = path.read_text()
        for line, key in _string_key_reads(ast.parse(text)):
            if (rel, key) not in ALLOWED:
                offenders.append(f"{rel}:{line}: [{key!r}]")
        for m in HAND_PARSED.finditer(text):
            offenders.append(f"{rel}:{text.count(chr(10), 0, m.start()) + 1}: {m.group(0)}")
    assert not offenders, "read the record through its class in neuronforge/records/:\n" + "\n".join(offenders)
