"""One way to open an artifact (issue 51): a published artifact named by its key, a prefix of it, its
manifest's URI, its folder's URI or its folder's local path, on a folder store and on the S3 endpoint, is
checked the same way by every reader, and what one finds damaged is recorded the same way (`ls` lists it
damaged afterwards). `show <folder URI>` exited 0 on a truncated file and `verify <URI>` recorded nothing.

The matrix: each reader × each way of naming it takes × each damage × both stores. Not every reader takes
every name: `show` and `verify` take all five (the local path only on the folder store); `promote` takes
a key or a prefix (`--build`); the catalog's artifact page (`farm_row`) a key or a prefix of at least 12
characters (`/artifacts/{key}`); the pipeline's lookup a whole key; `ls --check` checks the rows it lists
(no name). The damages: the manifest deleted, one file truncated, one byte of it flipped (the same size:
only `verify`'s sha256 sees it; every other reader finds it through the damage record `verify` left, and
must then refuse or flag it the same way whatever the name).

One published artifact (the session's compiled build) is copied once per store and damage; each case
starts from that copy's records as they were (`Damaged.reset`): the farm index and the damage records
put back, the damaged files left as they are — so a flipped file keeps its later write time, which is
what makes a size-checking reader read the damage record."""

from __future__ import annotations

import json
import shutil
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from neuronforge.artifacts import layout
from neuronforge.artifacts.farm_index import read_damage
from neuronforge.artifacts.opening import lookup
from neuronforge.farm.rows import damage_message, farm_row
from neuronforge.interfaces.cli import ExitCode, main
from neuronforge.spec.source import model_name
from neuronforge.stores import ArtifactStore, open_store
from tests.conftest import Compiled
from tests.farm_index.test_read_costs import Counted

DAMAGES = ("deleted", "truncated", "flipped")
NAMINGS = ("key", "prefix", "manifest", "folder", "path")
KINDS = ("file", "s3")
STATE_FOLDERS = ("farm-index", layout.DAMAGED)  # what a reader writes when it records a damage


@dataclass
class Damaged:
    """A copy of the session's store with its one artifact damaged one way."""

    kind: str
    damage: str
    store: ArtifactStore
    key: str
    prefix: str
    victim: str  # the damaged file, relative to the artifact's folder
    files: int  # how many files its manifest lists
    model: str
    work: Path
    states: dict[str, dict[str, bytes]] = field(default_factory=dict)

    @property
    def uri(self) -> str:
        return self.store.root_uri

    @property
    def manifest_key(self) -> str:
        return f"{self.prefix}/{layout.ARTIFACT_MANIFEST}"

    def name(self, naming: str, prefix_length: int = 8) -> str:
        return {
            "key": self.key,
            "prefix": self.key[:prefix_length],
            "manifest": self.store.uri(self.manifest_key),
            "folder": self.store.uri(self.prefix),
            "path": self.store.uri(self.prefix).removeprefix("file://"),
        }[naming]

    def snapshot(self) -> dict[str, bytes]:
        return {o.key: self.store.get_bytes(o.key) for f in STATE_FOLDERS for o in self.store.list(f)}

    def reset(self, state: str = "fresh") -> None:
        """Its records as they were (`fresh`: as damaged, nothing recorded; `verified`: after `verify
        KEY` recorded what its re-hash found)."""
        for folder in STATE_FOLDERS:
            self.store.delete_prefix(folder)
        for key, data in self.states[state].items():
            self.store.put_bytes(data, key)
        assert (read_damage(self.store, self.key) is None) == (state == "fresh")

    def start(self, reader: str) -> None:
        """A case starts: the flipped byte is found by verify's re-hash, and only then by a reader that
        checks sizes (through the record verify left)."""
        self.reset("verified" if self.damage == "flipped" and reader != "verify" else "fresh")

    # what every reader must find, whatever the name
    def reason(self, reader: str) -> str:
        if self.damage == "deleted":
            return f"manifest gone: {self.manifest_key}"
        if self.damage == "flipped":
            return f"1 file(s) do not match the manifest (e.g. {self.victim}: sha256 mismatch)"
        if reader == "verify":
            return f"1 file(s) do not match the manifest (e.g. {self.victim}: missing or wrong size)"
        return f"1 of {self.files} file(s) missing or of another size (e.g. {self.victim})"

    def found_by(self, reader: str) -> str:
        return "verify" if self.damage == "flipped" else reader

    def recorded(self, reader: str) -> dict[str, str]:
        """The damage record, as `ls` lists the build afterwards: damaged, why, by whom."""
        record = read_damage(self.store, self.key)
        assert record is not None, f"{reader} recorded nothing"
        assert (record.reason, record.by) == (self.reason(reader), self.found_by(reader))
        rows = cli(None, "ls", self.uri, "--json")[1]
        (row,) = [r for r in json.loads(rows) if r["cache_key"] == self.key]
        assert row["status"] == "damaged" and row["damage"]["reason"] == record.reason, row
        return row["damage"]

    def refused(self, reader: str) -> str:
        """The one line `show` (and `verify`, for a manifest gone) refuses it with."""
        short, record = self.key[:12], read_damage(self.store, self.key)
        if self.damage == "flipped":
            assert record is not None
            return (
                f"error: damaged: {short} in {self.uri}: {self.reason(reader)} (found by verify at {record.at}); run "
                f"its build again to publish it afresh, or `neuronforge verify {short} --store {self.uri}` clears it "
                "if every file matches again"
            )
        return (
            f"error: damaged: {short} in {self.uri}: {self.reason(reader)}; recorded in the farm index "
            f"(`neuronforge ls --store {self.uri}` lists it): run its build again to publish it afresh"
        )


def cli(capsys, *argv: str) -> tuple[int, str, list[str]]:
    """Exit code, stdout, and the lines of stderr the command said (the S3 endpoint's own request log
    may land on stderr too, when an earlier test configured logging)."""
    if capsys is None:  # inside a helper: the output is read, not asserted on
        import contextlib
        import io

        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = main(list(argv))
        return code, out.getvalue(), err.getvalue().splitlines()
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, [line for line in err.splitlines() if line.startswith(("error:", "warning:"))]


def _copy_store(compiled: Compiled, store: ArtifactStore) -> None:
    source = compiled.store
    for o in source.list():
        if not o.key.startswith(("locks/", "checkpoints/")):
            store.put_bytes(source.get_bytes(o.key), o.key)


def _damage(d: Damaged) -> None:
    victim = f"{d.prefix}/{d.victim}"
    if d.damage == "deleted":
        d.store.delete_prefix(d.manifest_key)
    elif d.damage == "truncated":
        d.store.put_bytes(d.store.get_bytes(victim)[:-7], victim)
    else:
        if d.kind == "s3":
            time.sleep(1.1)  # S3's LastModified counts seconds: the rewrite must come after the manifest
        data = d.store.get_bytes(victim)
        d.store.put_bytes(bytes([data[0] ^ 1]) + data[1:], victim)


@pytest.fixture(scope="module")
def damaged(compiled: Compiled, tmp_path_factory: pytest.TempPathFactory, s3_endpoint: str) -> Iterator[dict]:
    """(kind, damage) -> `Damaged`: the session's store copied once per store and damage, the S3
    endpoint the AWS environment's for the module."""
    import boto3

    base = tmp_path_factory.mktemp("opening")
    bucket = f"nf-{uuid.uuid4().hex[:12]}"
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("AWS_ENDPOINT_URL", s3_endpoint)
        boto3.client("s3", endpoint_url=s3_endpoint).create_bucket(Bucket=bucket)
        published = compiled.first.published
        manifest = published.manifest
        assert manifest is not None
        victim = max(manifest.files, key=lambda f: f.size).path
        out = {}
        for kind in KINDS:
            for damage in DAMAGES:
                uri = f"file://{base / kind / damage}" if kind == "file" else f"s3://{bucket}/{damage}"
                if kind == "file":  # a copy that keeps the files' times (as a copied folder does)
                    shutil.copytree(Path(compiled.store.root_uri.removeprefix("file://")), base / kind / damage)
                store = open_store(uri)
                if kind == "s3":
                    _copy_store(compiled, store)
                d = Damaged(
                    kind,
                    damage,
                    store,
                    compiled.first.key,
                    published.prefix,
                    victim,
                    len(manifest.files),
                    model_name(manifest.source.model_dump()),
                    base / "work" / kind / damage,
                )
                _damage(d)
                d.states["fresh"] = d.snapshot()
                code, out_text, _ = cli(None, "verify", d.key, "--store", d.uri, "--work-dir", str(d.work))
                assert code == ExitCode.REJECTED, out_text
                d.states["verified"] = d.snapshot()
                out[kind, damage] = d
        yield out


def _cases(namings: tuple[str, ...]) -> list:
    return [
        pytest.param(kind, damage, naming, id=f"{kind}-{damage}-{naming}")
        for kind in KINDS
        for damage in DAMAGES
        for naming in namings
        if not (naming == "path" and kind == "s3")
    ]


@pytest.mark.parametrize(("kind", "damage", "naming"), _cases(NAMINGS))
def test_show_refuses_and_records_whatever_names_it(capsys, damaged: dict, kind: str, damage: str, naming: str) -> None:
    d: Damaged = damaged[kind, damage]
    d.start("show")
    code, out, said = cli(capsys, "show", d.name(naming), "--store", d.uri)
    assert code == ExitCode.REJECTED and out == "" and said == [d.refused("show")], said
    d.recorded("show")


@pytest.mark.parametrize(("kind", "damage", "naming"), _cases(NAMINGS))
def test_verify_records_whatever_names_it(capsys, damaged: dict, kind: str, damage: str, naming: str) -> None:
    d: Damaged = damaged[kind, damage]
    d.start("verify")
    store = ("--store", d.uri) if naming in ("key", "prefix") else ()  # verify takes a URI or --store
    code, out, said = cli(capsys, "verify", d.name(naming), *store, "--work-dir", str(d.work))
    assert code == ExitCode.REJECTED
    if damage == "deleted":  # nothing to re-hash: refused as show refuses it
        assert out == "" and said == [d.refused("verify")], said
    else:
        problem = "sha256 mismatch" if damage == "flipped" else "missing or wrong size"
        lines = out.splitlines()
        assert lines[0] == f"artifact  {d.store.uri(d.prefix)}" and lines[-1] == "FAILED", out
        assert f"  FAIL {d.victim}: {problem}" in lines and said == [], (out, said)
    record = d.recorded("verify")
    assert read_damage(d.store, d.key).checked == ("sizes" if damage == "deleted" else "sha256"), record


@pytest.mark.parametrize(("kind", "damage"), [(k, dm) for k in KINDS for dm in DAMAGES])
def test_ls_check_lists_it_damaged(capsys, damaged: dict, kind: str, damage: str) -> None:
    """`ls --check` takes no name: it checks the rows it lists, and shows what it records as the next
    `ls` shows it."""
    d: Damaged = damaged[kind, damage]
    d.start("ls --check")
    code, out, _ = cli(capsys, "ls", d.uri, "--check", "--json")
    (row,) = [r for r in json.loads(out) if r["cache_key"] == d.key]
    assert code == ExitCode.OK and row["status"] == "damaged", row
    assert row["message"] == damage_message(d.recorded("ls --check")), row
    if damage != "flipped":  # a row listed damaged already is not checked again
        assert row["complete"] is False
        lacking = [] if damage == "deleted" else [f"{d.victim}: missing or wrong size"]
        assert row["missing_or_truncated"] == lacking, row
    code, out, _ = cli(capsys, "ls", d.uri, "--check")
    line = next(x for x in out.splitlines() if x.startswith(d.key[:12]))
    assert code == ExitCode.OK and f"DAMAGED: {d.reason('ls --check')} (found by {d.found_by('ls --check')} " in line


@pytest.mark.parametrize(("kind", "damage", "naming"), _cases(("key", "prefix")))
def test_promote_refuses_and_records(capsys, damaged: dict, kind: str, damage: str, naming: str) -> None:
    d: Damaged = damaged[kind, damage]
    d.start("promote")
    argv = (
        "promote",
        d.model,
        "--profile",
        "cpu",
        "--channel",
        "candidate",
        "--build",
        d.name(naming),
        "--store",
        d.uri,
    )
    code, out, said = cli(capsys, *argv)
    short = d.key[:12]
    assert out == ""
    if damage == "flipped":
        at = read_damage(d.store, d.key).at
        why = f"{d.reason('promote')}; found by verify at {at}): no channel takes a damaged build; run its build"
    else:
        why = f"{d.reason('promote')}); recorded in the farm index: no channel takes a damaged build, run its build"
    assert code == ExitCode.REJECTED and len(said) == 1, said
    assert said[0].startswith(f"error: refused: build {short} is damaged ({why} again"), said
    assert d.store.list(layout.CHANNELS) == []  # nothing moved
    d.recorded("promote")


@pytest.mark.parametrize(("kind", "damage", "naming"), _cases(("key", "prefix")))
def test_the_catalog_artifact_page_shows_it_damaged(damaged: dict, kind: str, damage: str, naming: str) -> None:
    d: Damaged = damaged[kind, damage]
    d.start("catalog")
    found = farm_row(d.store, d.name(naming, prefix_length=12))
    assert found is not None
    row, _ = found
    assert row.status == "damaged" and row.message == damage_message(d.recorded("catalog")), row


@pytest.mark.parametrize(("kind", "damage"), [(k, dm) for k in KINDS for dm in DAMAGES])
def test_the_pipeline_lookup_is_a_miss_and_records(damaged: dict, kind: str, damage: str) -> None:
    """The pipeline looks a build up by its whole key: a damaged one is no cache hit (it is built again),
    a flipped byte included once verify recorded it."""
    d: Damaged = damaged[kind, damage]
    d.start("lookup")
    assert lookup(d.store, d.key) is None
    d.recorded("lookup")


# -- a folder that is not what its store's index names ------------------------------------------------
@pytest.fixture
def whole(compiled: Compiled, tmp_path: Path) -> Damaged:
    """A copy of the session's store, its artifact whole."""
    root = tmp_path / "store"
    shutil.copytree(Path(compiled.store.root_uri.removeprefix("file://")), root)
    published = compiled.first.published
    manifest = published.manifest
    assert manifest is not None
    victim = max(manifest.files, key=lambda f: f.size).path
    name = model_name(manifest.source.model_dump())
    store = open_store(f"file://{root}")
    return Damaged("file", "", store, compiled.first.key, published.prefix, victim, len(manifest.files), name, tmp_path)


def _truncate(folder: Path, victim: str) -> None:
    (folder / victim).write_bytes((folder / victim).read_bytes()[:-7])


@pytest.mark.parametrize("where", ["outside", "in the store"])
def test_a_folder_the_index_does_not_name_is_checked_but_records_nothing(
    capsys, whole: Damaged, tmp_path: Path, where: str
) -> None:
    """A copied artifact folder (outside any store's layout, or laid out in the store beside the one its
    index names) is shown and verified as itself, and says in one line that what is found there is not
    recorded: the store's own artifact is whole and listed published."""
    original = Path(whole.store.uri(whole.prefix).removeprefix("file://"))
    if where == "outside":
        copy = tmp_path / "elsewhere" / "copied"
        why = f"file://{copy} is not laid out as a store's artifact (<root>/artifacts/"
    else:
        copy = original.parent.parent / "other-target" / original.name
        why = (
            f"file://{copy} is not a published artifact: the index of {whole.uri} names "
            f"{whole.store.uri(whole.prefix)} for {whole.key[:12]}, not this folder"
        )
    shutil.copytree(original, copy)

    code, out, said = cli(capsys, "show", f"file://{copy}")
    assert code == ExitCode.OK and f"cache key  {whole.key}" in out and "channels " not in out, out
    assert len(said) == 1 and said[0].startswith(f"warning: {why}") and "not recorded" in said[0], said

    _truncate(copy, whole.victim)
    code, out, said = cli(capsys, "show", f"file://{copy}/manifest.json")
    assert code == ExitCode.REJECTED and out == "" and len(said) == 1, said
    assert (
        said[0].startswith("error: damaged: ") and f"1 of {whole.files} file(s) missing or of another size" in said[0]
    )
    assert said[0].endswith("what is found here is not recorded"), said
    code, out, said = cli(capsys, "verify", f"file://{copy}", "--work-dir", str(tmp_path / "v"))
    assert code == ExitCode.REJECTED and f"  FAIL {whole.victim}: missing or wrong size" in out.splitlines()
    assert len(said) == 1 and said[0].startswith(f"warning: {why}"), said

    assert whole.store.list(layout.DAMAGED) == []
    rows = json.loads(cli(capsys, "ls", whole.uri, "--json")[1])
    assert [r["status"] for r in rows] in (["published"], ["stale"]), rows


def test_a_damaged_copy_outside_any_store_still_says_nothing_is_recorded(capsys, whole: Damaged, tmp_path) -> None:
    copy = tmp_path / "copied"
    shutil.copytree(Path(whole.store.uri(whole.prefix).removeprefix("file://")), copy)
    (copy / layout.ARTIFACT_MANIFEST).write_text("{not json")
    code, out, said = cli(capsys, "show", str(copy))
    assert code == ExitCode.REJECTED and out == "" and len(said) == 1, said
    assert said[0].startswith(f"error: damaged: file://{copy}: manifest unreadable: ") and "not recorded" in said[0]
    (copy / layout.ARTIFACT_MANIFEST).unlink()
    code, _, said = cli(capsys, "verify", str(copy))
    gone = f"error: file://{copy}/manifest.json: no manifest there (give an artifact's folder or its manifest.json)"
    assert code == ExitCode.USAGE and said == [gone], said


@pytest.mark.parametrize("naming", ["key", "prefix", "folder"])
def test_an_index_pointer_that_does_not_read_is_damage_by_any_name(capsys, whole: Damaged, naming: str) -> None:
    """The pointer itself damaged: recorded, and refused with what does fix it (a new build does not
    replace a pointer that is there: it is removed first)."""
    pointer = layout.index_entry(whole.key)
    whole.store.put_bytes(b"[1, 2]", pointer)
    code, out, said = cli(capsys, "show", whole.name(naming), "--store", whole.uri)
    assert code == ExitCode.REJECTED and out == "" and len(said) == 1, said
    short = whole.key[:12]
    assert said[0].startswith(f"error: damaged: {short} in {whole.uri}: index pointer unreadable: "), said
    assert said[0].endswith(
        f"recorded in the farm index (`neuronforge ls --store {whole.uri}` lists it): "
        f"remove {whole.store.uri(pointer)} (not an index pointer), then run its build again to publish it afresh"
    ), said
    record = read_damage(whole.store, whole.key)
    assert record is not None and record.by == "show" and record.reason.startswith("index pointer unreadable: ")
    rows = json.loads(cli(capsys, "ls", whole.uri, "--json")[1])
    assert [(r["cache_key"], r["status"]) for r in rows] == [(whole.key, "damaged")], rows


# -- what a name costs ----------------------------------------------------------------------------------
@pytest.mark.parametrize("naming", ["key", "manifest", "folder"])
def test_a_uri_costs_what_a_key_costs_on_s3(
    capsys, damaged: dict, naming: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A whole key costs its pointer, manifest and folder listing; a URI reads the manifest, then the
    pointer of its key, then the listing: the same three requests, not one more."""
    from neuronforge import stores

    d: Damaged = damaged["s3", "flipped"]
    d.reset("fresh")  # sizes whole; the rewritten file makes the damage record one more read, by any name
    opened: list = []
    real: Callable = stores.open_location

    def counting(uri: str, **kwargs):
        store = real(uri, **kwargs)
        opened.append(Counted(store))
        return store

    monkeypatch.setattr("neuronforge.artifacts.opening.open_location", counting)
    code, out, _ = cli(capsys, "show", d.name(naming), "--store", d.uri, "--json")
    assert code == ExitCode.OK and json.loads(out)["cache_key"] == d.key
    sent = [op for c in opened for op, _ in c.log]
    assert sent == ["GetObject", "GetObject", "ListObjectsV2", "GetObject"], sent  # ..., the damage record
