"""Every command that reads a stored record × every hostile record class (issue 51), from one table.

`READS` says which records each command of the failure matrix (`test_matrix.COMMANDS`, and the
scrub's `verify --repair`) reads, `RECORDS` where each kind lives in a store, `CLASSES` what a hostile
store puts there. The table is held to the code three ways:
- a new command fails `test_the_table_says_which_records_every_command_reads` until it has a row
  (or, in `NO_RECORDS`, says why it reads none here);
- a command that starts reading another kind fails `test_each_command_reads_only_what_its_row_says`:
  each command runs once over a store holding one of every planted record, with the readers watched;
- a new record kind (a `StoredRecord` subclass) fails `test_every_record_kind_is_planted_or_says_why`
  until `RECORDS` plants it or `UNPLANTED` says where it is covered.

Each case plants one class at one record a command reads, in a copy of that store, runs the command
as a user would (`harness.cli`) and asserts what the user sees: exit 0 (the record shown as a damaged
row, or not needed for the answer) or an exit code of 1, 2 or 3 with exactly one line on stderr
starting with `error:` — never a traceback; the published build's folder untouched; nothing written
where a forged path points. The whole table takes about a minute on one process.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.farm_index.publishers import key_of
from tests.reliability.harness import cli, snapshot
from tests.reliability.test_matrix import COMMANDS, DONE, FEED, _publish_some, use_home_and_catalog

ARTIFACT, OLD, FAILED = key_of("matrix", 1), key_of("matrix", 0), key_of("matrix", 2)
OTHER = "f" * 64  # a key no record of the store is about
CHANNEL = "channels/org/m1/cpu/candidate/channel.json"

# The commands of the failure matrix, and the scrub (a mode of `verify`).
RECORD_COMMANDS: dict[str, list[str]] = {**COMMANDS, "verify --repair": ["verify", "--store", "{store}", "--repair"]}


# -- where each record lives -----------------------------------------------------------------------
def _manifest_key(root: Path, key: str) -> str:
    return json.loads((root / f"index/{key}.json").read_bytes())["manifest"]


def _page_key(root: Path) -> str:
    return json.loads((root / "farm-index/head.json").read_bytes())["pages"][0]["key"]


# record kind (`StoredRecord.KIND`, or what else a reader reads) -> its path in a store (root, out file)
RECORDS: dict[str, Callable[[Path, Path], Path]] = {
    "index entry": lambda root, out: root / f"index/{ARTIFACT}.json",
    "artifact manifest": lambda root, out: root / _manifest_key(root, ARTIFACT),
    "farm-index tail": lambda root, out: root / "farm-index/tail.json",
    "farm-index head": lambda root, out: root / "farm-index/head.json",
    "farm-index page": lambda root, out: root / _page_key(root),
    "compile lease": lambda root, out: root / f"locks/{ARTIFACT}",
    "release channel": lambda root, out: root / CHANNEL,
    "review state": lambda root, out: root / f"reviews/{ARTIFACT}.json",
    "attestations": lambda root, out: root / f"attestations/{ARTIFACT}.json",
    "proposed SDK release": lambda root, out: root / "sdk-releases/entries/2.33.9.json",
    "damage record": lambda root, out: root / f"damaged/{OLD}.json",
    "failure record": lambda root, out: root / f"failures/{FAILED}.json",
    "scrub state": lambda root, out: root / "scrub/state.json",
    "sweep record file": lambda root, out: out.with_name(out.name.removesuffix(".json") + ".records.json"),
}
# The kinds whose records hold whole numbers (`int`) or fractions (`float`) besides their schema version:
# the number classes of that type apply to them.
NUMBERS: dict[str, set[type]] = {
    "artifact manifest": {int},
    "farm-index tail": {int},
    "farm-index head": {int},
    "farm-index page": {int},
    "compile lease": {int, float},
    "scrub state": {int},
    "sweep record file": {int, float},
}

# Kinds no command of the matrix reads from a store like this one, and where their bounds are tested.
UNPLANTED = {
    "payload manifest": "read by a build's publish stage (tests/records/test_bounds.py)",
    "smoke reference": "read by a build's smoke stage, from the payload (tests/records/test_bounds.py)",
    "checkpoint manifest": "read by a build's fetch and quantize stages (tests/records/test_bounds.py)",
    "quantized checkpoint manifest": "read by a build's quantize stage (tests/records/test_bounds.py)",
    "compile graph set": "read by a Neuron compile (tests/records/test_bounds.py)",
    "stored cache entry note": "a host's local note (tests/records/test_bounds.py)",
    "LMI NEFF cache record": "in an lmi-neuronx artifact only (tests/records/test_bounds.py)",
    "vLLM cache manifest": "in a vllm-neuron-native artifact only (tests/records/test_bounds.py)",
    "toolchain record": "read for Neuron profiles only (tests/records/test_bounds.py)",
    "recompile report": "written by the recompile DAG, read by the catalog (tests/records/test_bounds.py)",
    "SDK release entry": "read from the release table in the package, not from a store (tests/records/test_bounds.py)",
}

# -- what each command reads ----------------------------------------------------------------------
INDEX = {"farm-index head", "farm-index page", "farm-index tail"}
SCAN = {"index entry", "artifact manifest", "compile lease", "damage record", "failure record"}
SCAN |= {"release channel", "review state", "attestations", "farm-index head", "farm-index tail"}
READS: dict[str, set[str]] = {
    "show": {"index entry", "artifact manifest", "release channel", "review state", "attestations"},
    "verify": SCAN | {"farm-index page"},
    "verify --repair": {"index entry", "artifact manifest", "damage record", "scrub state"} | INDEX,
    "ls": INDEX,
    "gc": {"artifact manifest", "release channel"} | INDEX,
    "cache prune": INDEX,
    "catalog stale": INDEX,
    "recompile": INDEX | {"proposed SDK release"},
    "index rebuild": SCAN,
    "approve": {"farm-index tail", "review state"},
    "reject": {"index entry", "artifact manifest", "release channel", "review state", "farm-index tail"},
    "promote": {"index entry", "artifact manifest", "release channel", "review state", "farm-index tail"},
    "rollback": {"release channel"},
    "compare": {"index entry", "artifact manifest"},  # each build opened as `show` opens it
    # each channel's build checked as a move checks it (`channels.pointer`)
    "channels": {"release channel", "review state", "index entry", "artifact manifest", "damage record"},
    "history": {"release channel"},
    "lease ls": {"compile lease"},
    "lease break": {"compile lease"},
    "sweep": {"sweep record file"},
    # the store's release entries (`farm.release_feed`): the releases a decision knows, and the feed's own
    "releases ls": {"proposed SDK release"},
    "releases sync": {"proposed SDK release"},
    "releases accept": {"proposed SDK release"},
    "releases reject": {"proposed SDK release"},
    "attest": {"index entry", "artifact manifest", "attestations", "proposed SDK release"},
    "require-release": {"release channel", "attestations"},
}
NO_RECORDS = {
    "fetch": "reads records only once it builds (its stages: tests/records/test_bounds.py, tests/test_leases.py)",
    "quantize": "reads records only once it builds (its stages: tests/records/test_bounds.py)",
    "run": "reads records only once it builds (its claim: tests/test_leases.py; lookup: tests/farm_index)",
    "plan": "reads the model's config.json only",
    "cache-key": "reads the model's config.json only",
    "store ls": "lists objects, reads none",
    "cache ls": "lists the compile cache; its graph sets only for Neuron compilers (tests/records/test_bounds.py)",
    "cache stats": "lists the compile cache",
}


def test_the_table_says_which_records_every_command_reads() -> None:
    assert set(READS) | set(NO_RECORDS) == set(RECORD_COMMANDS), "add the command to READS (or NO_RECORDS, with why)"
    assert not set(READS) & set(NO_RECORDS)
    assert set().union(*READS.values()) <= set(RECORDS), "say where the record lives in RECORDS"


def test_every_record_kind_is_planted_or_says_why() -> None:
    import importlib
    import pkgutil

    import neuronforge.records as package
    from neuronforge.records.base import StoredRecord

    for info in pkgutil.iter_modules(package.__path__):
        importlib.import_module(f"neuronforge.records.{info.name}")
    kinds: set[str] = set()
    todo = list(StoredRecord.__subclasses__())
    while todo:
        cls = todo.pop()
        todo.extend(cls.__subclasses__())
        if cls.__module__.startswith("neuronforge.records."):  # not a test's own kind
            kinds.add(cls.KIND)
    readers = {"farm-index page", "sweep record file"} | kinds  # a page is lines of rows (`Entry`)
    assert kinds - set(UNPLANTED) <= set(RECORDS) | {"sweep record file"}, "plant the kind in RECORDS, or say why not"
    assert set(RECORDS) | set(UNPLANTED) <= readers


# -- the store every case starts from -------------------------------------------------------------
def _template(root: Path, out: Path, model: Path) -> None:
    """One of every planted record: two published builds (`test_matrix._publish_some`, with the newer
    one's lapsed lease), a farm index with a head, a page and a tail, a channel on the newer build, its
    review and an attestation, a scrub's state, a damage record of the older one, the failure record of a third key, and
    the record file of a sweep (`out`'s, written by the matrix's own sweep) and a proposed SDK release (the
    feed's, from the matrix's manifest file)."""
    from neuronforge.artifacts import farm_index, layout
    from neuronforge.artifacts.attestations import attest
    from neuronforge.records.attestation import Attestation
    from neuronforge.records.damage import DamageRecord
    from neuronforge.stores import open_store

    _publish_some(root)
    store = open_store(f"file://{root}")
    sweep = [str(a).format(model=model, out=out) for a in COMMANDS["sweep"]]
    for argv in (
        ["verify", "--store", root, "--repair"],
        ["index", "rebuild", root],
        ["promote", "org/m1", "--profile", "cpu", "--channel", "candidate", "--build", ARTIFACT[:12], "--store", root],
        ["approve", ARTIFACT[:12], "--store", root],
        ["releases", "sync", "--manifest", FEED, "--store", root],  # proposes 2.33.9
        sweep,
    ):
        done = cli(argv)
        assert done.code == 0, done.text
    attest(store, ARTIFACT, Attestation(release="2.33.1", run="re-smoke", passed=True, host="nf-neuron"))
    farm_index.record_failure(store, FAILED, "compile_graphs", RuntimeError("no such graph"))
    damage = DamageRecord(key=OLD, reason="manifest gone: x", at="2026-11-26T00:00:00Z", by="scrub")
    damage.write(store, layout.damage_entry(OLD))
    assert RECORDS["sweep record file"](root, out).is_file()


@dataclass
class Template:
    root: Path
    out: Path


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory, tiny_llama_template: Path) -> Template:
    home = tmp_path_factory.mktemp("records")
    made = Template(home / "store", home / "out" / "sweep.json")
    with pytest.MonkeyPatch.context() as env:
        env.setenv("NEURONFORGE_HOME", str(home / "home"))
        env.delenv("NEURONFORGE_STORE", raising=False)
        _template(made.root, made.out, tiny_llama_template)
    return made


@dataclass
class Case:
    root: Path
    out: Path
    argv: list[str]


@pytest.fixture
def case(
    template: Template, tmp_path: Path, tiny_llama_template: Path, monkeypatch: pytest.MonkeyPatch
) -> Callable[[str], Case]:
    """A copy of the template (store and sweep output) under `tmp_path/sandbox`, and a command's argv."""
    use_home_and_catalog(monkeypatch, tmp_path, tiny_llama_template)
    root, out = tmp_path / "sandbox" / "store", tmp_path / "sandbox" / "out" / "sweep.json"
    shutil.copytree(template.root, root)
    shutil.copytree(template.out.parent, out.parent)

    def make(command: str) -> Case:
        fill = {"store": root, "model": tiny_llama_template, "work": tmp_path / "work", "out": out}
        return Case(root, out, [str(a).format(**fill, artifact=ARTIFACT[:12]) for a in RECORD_COMMANDS[command]])

    return make


# -- what each command reads, watched ------------------------------------------------------------
def _watch(monkeypatch: pytest.MonkeyPatch) -> set[str]:
    """The kinds every reader of stored JSON reads from now on (`StoredRecord.from_bytes` and the
    readers that parse without a record class: a file list, a farm-index page's lines, `read_json`)."""
    from neuronforge.artifacts.farm_index import snapshot as pages
    from neuronforge.records.base import StoredRecord
    from neuronforge.records.tree import FileListing
    from neuronforge.stores.base import ArtifactStore

    seen: set[str] = set()
    record, listing = StoredRecord.from_bytes.__func__, FileListing.from_bytes.__func__
    json_of, row = ArtifactStore.read_json, pages.page_row
    monkeypatch.setattr(StoredRecord, "from_bytes", classmethod(lambda cls, *a: seen.add(cls.KIND) or record(cls, *a)))
    monkeypatch.setattr(
        FileListing, "from_bytes", classmethod(lambda cls, *a: seen.add("file list") or listing(cls, *a))
    )
    manifest = lambda key: "artifact manifest" if key.endswith("/manifest.json") else f"JSON {key}"  # noqa: E731
    monkeypatch.setattr(ArtifactStore, "read_json", lambda s, key, *a: seen.add(manifest(key)) or json_of(s, key, *a))
    monkeypatch.setattr(pages, "page_row", lambda *a: seen.add("farm-index page") or row(*a))
    return seen


BUILDS = {"fetch", "quantize", "run"}  # they build the model: minutes, not a table's seconds


@pytest.mark.parametrize("command", sorted(set(RECORD_COMMANDS) - BUILDS))
def test_each_command_reads_only_what_its_row_says(command: str, case, monkeypatch: pytest.MonkeyPatch) -> None:
    made = case(command)
    seen = _watch(monkeypatch)
    done = cli(made.argv)
    assert done.traceback is None, done.traceback
    assert seen <= READS.get(command, set()), (
        f"{command} reads {sorted(seen - READS.get(command, set()))}: add to READS"
    )


# -- the hostile classes --------------------------------------------------------------------------
VERSIONS = ("schema_version", "schema")


def _numbers(value: Any, kind: type, number: Callable[[Any], Any], top: bool = True) -> Any:
    """`value` with every number of type `kind` (not a boolean, not a record's schema version) as
    `number` makes it: one type at a time, so a field of the other type does not hide the first."""
    if isinstance(value, dict):
        return {k: v if top and k in VERSIONS else _numbers(v, kind, number, False) for k, v in value.items()}
    if isinstance(value, list):
        return [_numbers(v, kind, number, False) for v in value]
    if type(value) is kind:
        return number(value)
    return value


def _forged(kind: str, data: Any, root: Path) -> Any:
    """The record with what it refers to forged: another key, a path out of its folder."""
    escape = {"path": "../../escape.json", "size": 7, "sha256": hashlib.sha256(b"weights").hexdigest()}
    if kind == "index entry":
        return {**data, "manifest": _manifest_key(root, OLD), "prefix": "../../outside"}
    if kind == "artifact manifest":
        return {**data, "cache_key": OLD, "files": [escape]}
    if kind == "farm-index tail":
        forged = {"seq": data["next_seq"], "kind": "published", "key": "../../escape"}
        forged["published"] = {"at": "2026-11-27T00:00:00Z", "manifest": "../../escape.json"}
        return {**data, "next_seq": data["next_seq"] + 1, "records": [*data["records"], forged]}
    if kind == "farm-index head":
        pages = [{**data["pages"][0], "key": "farm-index/../../escape.jsonl.gz"}, *data["pages"][1:]]
        return {**data, "pages": pages}
    if kind == "farm-index page":
        published = {**(data.get("published") or {}), "at": "2026-11-27T00:00:00Z", "manifest": "../../escape.json"}
        return {**data, "key": OTHER, "published": published}
    if kind == "release channel":
        build = {**data["current"]["build"], "key": OLD, "artifact_prefix": "../../outside"}
        return {**data, "current": {**data["current"], "build": build}}
    if kind == "damage record":
        return {**data, "key": ARTIFACT, "manifest": "../../escape.json"}
    if kind == "scrub state":
        return {**data, "cursor": "zzzz"}  # refused as --cursor
    if kind == "sweep record file":
        return {**data, "model": "another-org/another-model"}
    if kind == "proposed SDK release":  # the record of 2.33.9 says it is another release
        return {**data, "version": "2.99.0", "entry": {**data["entry"], "version": "2.99.0"}}
    assert kind in ("compile lease", "review state", "attestations", "failure record"), kind
    return {**data, "key": OTHER}


# class -> (what it makes of one JSON document of the record: bytes in, bytes out; None: a folder there)
CLASSES: dict[str, Callable[[bytes, str, Path], bytes | None]] = {
    "deep nesting": lambda raw, kind, root: b"[" * 10_000 + b"]" * 10_000,
    "huge whole numbers": lambda raw, kind, root: _dumps(_numbers(json.loads(raw), int, lambda v: 10**30)),
    "negative whole numbers": lambda raw, kind, root: _dumps(_numbers(json.loads(raw), int, lambda v: -1)),
    "huge fractions": lambda raw, kind, root: _dumps(_numbers(json.loads(raw), float, lambda v: 1e300)),
    "NaN": lambda raw, kind, root: _dumps(_numbers(json.loads(raw), float, lambda v: float("nan"))),
    "folder for file": lambda raw, kind, root: None,
    "UTF-16": lambda raw, kind, root: raw.decode().encode("utf-16"),
    "forged reference": lambda raw, kind, root: _dumps(_forged(kind, json.loads(raw), root)),
}
# the number classes, and the type of number each replaces
NUMBER_CLASSES = {"huge whole numbers": int, "negative whole numbers": int, "huge fractions": float, "NaN": float}


def _dumps(value: Any) -> bytes:
    return json.dumps(value).encode()


def _plant(kind: str, hostile: str, made: Case) -> None:
    """`hostile` at the record of `kind`; a page is rewritten line by line and its head's sha256 with it
    (what a forger does: a page whose checksum does not match is rebuilt before any line is read)."""
    path = RECORDS[kind](made.root, made.out)
    raw = path.read_bytes()
    page = kind == "farm-index page"
    docs = gzip.decompress(raw).splitlines() if page else [raw]
    made_docs = [CLASSES[hostile](doc, kind, made.root) for doc in docs if doc.strip()]
    if any(d is None for d in made_docs):
        path.unlink()
        path.mkdir()
        (path / "x").write_bytes(b"{}")
        return
    data = b"\n".join(d for d in made_docs if d is not None) + b"\n" if page else made_docs[0]
    if page:
        data = gzip.compress(data, mtime=0)
        head_path = made.root / "farm-index/head.json"
        head = json.loads(head_path.read_bytes())
        for ref in head["pages"]:
            if made.root / ref["key"] == path:
                ref["sha256"] = hashlib.sha256(data).hexdigest()
        head_path.write_bytes(json.dumps(head).encode())
    assert data is not None
    path.write_bytes(data)


def test_the_number_classes_apply_to_the_kinds_with_numbers(template: Template) -> None:
    made = Case(template.root, template.out, [])
    for kind in RECORDS:
        raw = RECORDS[kind](made.root, made.out).read_bytes()
        docs = gzip.decompress(raw).splitlines() if kind == "farm-index page" else [raw]
        held = {t for t in (int, float) for d in docs if d.strip() and _numbers(json.loads(d), t, str) != json.loads(d)}
        assert held == NUMBERS.get(kind, set()), f"{kind} holds {held or 'no numbers'}: say so in NUMBERS"


# Exit codes that mean a command found what it looks for — damage — and listed it on stdout, row by row.
FOUND = {"verify": {3}, "verify --repair": {3}}


def cases(reads: dict[str, set[str]]) -> list[tuple[str, str, str]]:
    """(reader, record kind, class) for every record each reader reads and every class that applies to it."""
    return [
        (reader, kind, hostile)
        for reader, kinds in sorted(reads.items())
        for kind in sorted(kinds)
        for hostile in CLASSES
        if hostile not in NUMBER_CLASSES or NUMBER_CLASSES[hostile] in NUMBERS.get(kind, set())
    ]


CASES = cases(READS)


@pytest.mark.parametrize(("command", "kind", "hostile"), CASES, ids=[f"{c}|{k}|{h}" for c, k, h in CASES])
def test_hostile_record(command: str, kind: str, hostile: str, case) -> None:
    made = case(command)
    _plant(kind, hostile, made)
    published = made.root / _manifest_key(made.root, ARTIFACT).rpartition("/")[0] if kind != "index entry" else None
    before = snapshot(published) if published else None
    started = time.monotonic()
    outcome = cli(made.argv)
    took = time.monotonic() - started
    assert outcome.traceback is None, outcome.traceback
    assert "Traceback" not in outcome.text, outcome.text
    assert took < 30, f"took {took:.1f} s"
    if outcome.code not in DONE.get(command, {0}) | FOUND.get(command, set()):
        assert outcome.code in (1, 2, 3), (outcome.code, outcome.text)
        lines = outcome.err.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("error:"), outcome.err
    if published is not None:  # nothing published is touched (gc deletes only the older build)
        assert snapshot(published) == before
    sandbox = made.root.parent
    assert not list(sandbox.parent.rglob("escape.json*")) and not (sandbox / "outside").exists()
