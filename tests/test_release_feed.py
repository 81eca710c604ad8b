"""The release feed (issue 52): `neuronforge releases sync` reads AWS's release manifest (its own format,
tests/data/release-manifests/adds-2.33.9.json: the table's releases plus 2.33.9, where only
aws-neuronx-runtime-lib changed) and proposes what it adds as a stored record; `accept` makes it known
to `recompile`, `reject` keeps it out; a manifest that does not parse or contradicts a known release is
refused with one line and nothing written; the recompile DAG syncs from the store's mirror first."""

from __future__ import annotations

import http.server
import json
import shlex
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from neuronforge.artifacts import layout
from neuronforge.farm import recompile, release_feed
from neuronforge.interfaces.cli import main
from neuronforge.profiles import sdk_releases
from neuronforge.profiles.release_manifest import ManifestError, parse
from neuronforge.records.proposed_release import ProposedRelease
from neuronforge.stores import open_store
from tests.test_upgrades import catalog  # noqa: F401 (the fixture)

MANIFEST = Path(__file__).resolve().parent / "data" / "release-manifests" / "adds-2.33.9.json"


def _manifest(edit=None) -> dict:
    data = json.loads(MANIFEST.read_text())
    if edit:
        edit(data)
    return data


def _write(path: Path, data: dict) -> str:
    path.write_text(json.dumps(data))
    return str(path)


def _entries(store_dir: Path) -> dict[str, bytes]:
    folder = store_dir / "sdk-releases" / "entries"
    return {p.name: p.read_bytes() for p in sorted(folder.glob("*"))} if folder.exists() else {}


def _sync(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(["releases", "sync", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_a_manifest_adding_a_runtime_patch_proposes_it_with_exactly_that_package_change(tmp_path: Path, capsys) -> None:
    store = tmp_path / "store"
    code, out, _ = _sync(capsys, "--manifest", str(MANIFEST), "--store", str(store))
    assert code == 0
    lines = out.splitlines()
    head = next(x for x in lines if x.startswith("Neuron 2.33.9"))
    assert head.startswith("Neuron 2.33.9: proposed; 1 package change(s) against 2.33.1; needs review: date, images")
    assert [x for x in lines if x.startswith("  ~ ") or x.startswith("  + ") or x.startswith("  - ")] == [
        "  ~ aws-neuronx-runtime-lib 2.35.33.0 -> 2.35.40.0"
    ]
    record = ProposedRelease.read(open_store(str(store)), layout.sdk_release_entry("2.33.9"))
    assert record.state == "proposed" and record.base == "2.33.1"
    assert record.entry.package("aws-neuronx-runtime-lib").version == "2.35.40.0"
    assert record.entry.package("neuronx-cc").instances == ("trn1", "inf2", "trn2", "trn3")
    # What the manifest does not carry is named, never guessed: no image, no line status, no vLLM.
    review = {n.what for n in record.needs_review}
    assert {"date", "images", "lines.vllm-neuron-native", "packages.vllm"} <= review
    assert not record.entry.images and not record.entry.lines and record.entry.package("vllm") is None
    assert "lines.vllm-neuron" not in review  # frozen or ended for every family: nothing to review
    # Its own source: the manifest it came from, with its sha256.
    ((sid, page),) = record.entry.own_sources.items()
    assert record.entry.sources == (sid,) and page.url == MANIFEST.as_uri() and record.manifest.sha256 in page.quote
    # The same manifest again writes nothing.
    before = _entries(store)
    code, out, _ = _sync(capsys, "--manifest", str(MANIFEST), "--store", str(store))
    assert code == 0 and "Neuron 2.33.9: unchanged" in out and _entries(store) == before


def test_a_changed_manifest_updates_a_proposal_still_proposed(tmp_path: Path, capsys) -> None:
    store = tmp_path / "store"
    _sync(capsys, "--manifest", str(MANIFEST), "--store", str(store))

    def dkms(data: dict) -> None:
        for p in data["neuron_releases"][0]["packages"]:
            if p["name"] == "aws-neuronx-dkms":
                p["version"] = "2.31.9.0"

    code, out, _ = _sync(capsys, "--manifest", _write(tmp_path / "m.json", _manifest(dkms)), "--store", str(store))
    assert code == 0 and "Neuron 2.33.9: updated; 2 package change(s)" in out
    assert "  ~ aws-neuronx-dkms 2.31.8.0 -> 2.31.9.0" in out
    record = ProposedRelease.read(open_store(str(store)), layout.sdk_release_entry("2.33.9"))
    assert record.state == "proposed" and record.history[0].state == "proposed"


def test_accept_makes_the_release_known_to_recompile_and_the_suggested_command_works(
    catalog: Path,  # noqa: F811
    capsys,
) -> None:
    store = str(catalog.parent / "store")
    assert main(["recompile", str(catalog), "--sdk", "2.33.9", "--dry-run", "--store", store]) == 3
    capsys.readouterr()
    code, out, _ = _sync(capsys, "--manifest", str(MANIFEST), "--store", store)
    said = next(x for x in out.splitlines() if "accept with `" in x)
    command = said.split("`")[1]
    assert command == f"neuronforge releases accept 2.33.9 --store {open_store(store).root_uri}"
    assert main(shlex.split(command)[1:]) == 0
    assert capsys.readouterr().out.startswith("Neuron 2.33.9 accepted by ")
    code = main(["recompile", str(catalog), "--sdk", "2.33.9", "--dry-run", "--store", store])
    out = capsys.readouterr().out
    assert "is not in neuronforge's profile data" not in out and code != 3
    assert "Neuron SDK 2.33.9: 3 row(s)" in out.splitlines()[-1]
    # Known through the same view: with the store's releases in effect, 2.33.9 is the latest.
    with sdk_releases.in_effect(release_feed.known_table(open_store(store))):
        assert sdk_releases.latest_release().version == "2.33.9"
        assert sdk_releases.known_release("2.33.9").neuronx_cc == "2.28.7631.0"
    assert sdk_releases.known_release("2.33.9") is None  # the table alone, outside
    # An accepted release is known: the manifest proposes nothing new, and `ls` says where it came from.
    code, out, _ = _sync(capsys, "--manifest", str(MANIFEST), "--store", store)
    assert "nothing new" in out
    assert main(["releases", "ls", "--store", store, "--json"]) == 0
    rows = {r["version"]: r for r in json.loads(capsys.readouterr().out)["releases"]}
    assert rows["2.33.9"]["state"] == "accepted" and rows["2.33.1"]["state"] == "shipped"
    assert rows["2.33.9"]["lines"]["vllm-neuron-native"] == {"trn2": "active", "trn3": "active"}


def test_a_rejected_release_is_not_proposed_again_by_the_same_manifest(tmp_path: Path, capsys) -> None:
    store = str(tmp_path / "store")
    _sync(capsys, "--manifest", str(MANIFEST), "--store", store)
    with pytest.raises(SystemExit) as exc:  # the reason is required
        main(["releases", "reject", "2.33.9", "--store", store])
    assert exc.value.code == 2
    with pytest.raises(SystemExit) as blank:  # the one rule for text, at parse time
        main(["releases", "reject", "2.33.9", "--reason", " ", "--store", store])
    assert blank.value.code == 2
    capsys.readouterr()
    assert main(["releases", "reject", "2.33.9", "--reason", "a bad runtime", "--store", store]) == 0
    before = _entries(tmp_path / "store")
    code, out, _ = _sync(capsys, "--manifest", str(MANIFEST), "--store", store)
    assert code == 0 and "Neuron 2.33.9: rejected (a bad runtime)" in out and _entries(tmp_path / "store") == before
    assert main(["releases", "ls", "--store", store]) == 0
    row = next(x for x in capsys.readouterr().out.splitlines() if x.startswith("2.33.9"))
    assert row.split()[1] == "rejected" and "NEEDS REVIEW" not in row
    assert main(["releases", "accept", "2.40.0", "--store", store]) == 2
    assert "holds no proposed release" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("raw", "says"),
    [
        (b"{not json", "not a Neuron SDK release manifest: Expecting property name"),
        (b'{"neuron_releases": [{"neuron_version": "two", "packages": []}]}', "neuron_releases.0.neuron_version"),
        (b'{"neuron_releases": [{"neuron_version": "2.40.0", "packages": [{"name": "x"}]}]}', "packages.0.version"),
        (b"[" * 100 + b"]" * 100, "nests lists or objects more than 32 deep"),
    ],
)
def test_a_manifest_that_does_not_parse_is_one_line_and_nothing_is_written(
    tmp_path: Path, capsys, raw: bytes, says: str
) -> None:
    path = tmp_path / "bad.json"
    path.write_bytes(raw)
    code, out, err = _sync(capsys, "--manifest", str(path), "--store", str(tmp_path / "store"))
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1
    assert str(path.resolve().as_uri()) in err and says in err
    assert _entries(tmp_path / "store") == {}


def test_a_manifest_listing_a_known_release_with_other_packages_is_refused_naming_them(tmp_path: Path, capsys) -> None:
    def other_compiler(data: dict) -> None:
        old = next(r for r in data["neuron_releases"] if r["neuron_version"] == "2.32.0")
        next(p for p in old["packages"] if p["name"] == "neuronx-cc")["version"] = "2.27.9999.0"

    path = _write(tmp_path / "m.json", _manifest(other_compiler))
    code, out, err = _sync(capsys, "--manifest", path, "--store", str(tmp_path / "store"))
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1
    assert "release 2.32.0 is known with other packages: neuronx-cc (known 2.27.5334.0, manifest 2.27.9999.0)" in err
    assert "nothing written" in err and _entries(tmp_path / "store") == {}  # 2.33.9 was not proposed either


def test_a_reading_the_table_records_as_disputed_is_no_conflict() -> None:
    """2.31.1's vllm-neuron: the table records 0.5.3 (the images) and the component index's 0.5.0."""
    data = _manifest()
    r = next(r for r in data["neuron_releases"] if r["neuron_version"] == "2.31.1")
    next(p for p in r["packages"] if p["name"] == "vllm-neuron")["version"] = "0.5.0"
    manifest = parse(json.dumps(data).encode(), "file:///m.json")
    proposals, _ = release_feed.plan(manifest, release_feed.load(), "me", "now")
    assert [p.version for p in proposals] == ["2.33.9"]


def test_two_plugins_of_one_pip_name_agree_with_a_manifest_listing_either() -> None:
    """AWS's manifest (aws-neuron/aws-neuron-sdk@81ce03ae src/helperscripts/n2-manifest.json, manifest_version
    2.32.0) lists under 2.31.1 `vllm-neuron` 0.21.0.1.0.0: the plugin without NxD Inference, whose pip name
    the NxD Inference line's plugin (0.5.3 in that release's images) has too. The table records both; a
    version that is neither is still a conflict."""
    data = _manifest()
    r = next(r for r in data["neuron_releases"] if r["neuron_version"] == "2.31.1")
    plugin = next(p for p in r["packages"] if p["name"] == "vllm-neuron")
    plugin["version"] = "0.21.0.1.0.0"
    proposals, _ = release_feed.plan(parse(json.dumps(data).encode(), "file:///m.json"), release_feed.load(), "me", "")
    assert [p.version for p in proposals] == ["2.33.9"]
    plugin["version"] = "0.9.9"
    with pytest.raises(ManifestError, match=r"2\.31\.1 is known with other packages: vllm-neuron \(known 0\.5\.3"):
        release_feed.plan(parse(json.dumps(data).encode(), "file:///m.json"), release_feed.load(), "me", "")


def test_two_fed_releases_are_accepted_in_one_store_each_citing_its_manifest(tmp_path: Path, capsys) -> None:
    store = str(tmp_path / "store")
    code, _, err = _sync(capsys, "--manifest", str(MANIFEST), "--accept", "2.33.9", "--store", store)
    assert code == 0, err

    def adds_2_33_10(data: dict) -> None:
        newest = next(r for r in data["neuron_releases"] if r["neuron_version"] == "2.33.9")
        data["neuron_releases"].insert(0, {**json.loads(json.dumps(newest)), "neuron_version": "2.33.10"})
        data["manifest_version"] = "2.33.10"

    path = _write(tmp_path / "m.json", _manifest(adds_2_33_10))
    code, _, err = _sync(capsys, "--manifest", path, "--accept", "2.33.10", "--store", store)
    assert code == 0, err
    table = release_feed.known_table(open_store(store))
    cited = {v: table.sources[table.entry(v).sources[0]].url for v in ("2.33.9", "2.33.10")}
    assert cited == {"2.33.9": f"file://{MANIFEST}", "2.33.10": f"file://{path}"}


def test_a_sync_asked_to_accept_a_release_nobody_proposed_writes_nothing(tmp_path: Path, capsys) -> None:
    store = tmp_path / "store"
    code, _, err = _sync(capsys, "--manifest", str(MANIFEST), "--accept", "2.99.0", "--store", str(store))
    assert code == 2, err
    assert err.count("\n") == 1 and "does not list SDK 2.99.0" in err and "leave --accept out" in err, err
    assert not store.exists() or not any(p.is_file() for p in store.rglob("*"))  # no proposal written
    code, out, err = _sync(capsys, "--manifest", str(MANIFEST), "--store", str(store))  # as the message says
    assert code == 0 and "2.33.9" in out, err


class _Serve(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args) -> None:  # quiet
        pass


@pytest.fixture
def http_root(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    root = tmp_path / "www"
    root.mkdir()
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), lambda *a: _Serve(*a, directory=str(root)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", root
    finally:
        server.shutdown()
        server.server_close()


def test_a_manifest_read_over_http_and_one_unreachable(tmp_path: Path, capsys, http_root) -> None:
    url, root = http_root
    (root / "n2-manifest.json").write_bytes(MANIFEST.read_bytes())
    code, out, _ = _sync(capsys, "--manifest", f"{url}/n2-manifest.json", "--store", str(tmp_path / "store"))
    assert code == 0 and "Neuron 2.33.9: proposed" in out
    record = ProposedRelease.read(open_store(str(tmp_path / "store")), layout.sdk_release_entry("2.33.9"))
    assert record.manifest.uri == f"{url}/n2-manifest.json"
    code, out, err = _sync(capsys, "--manifest", f"{url}/missing.json", "--store", str(tmp_path / "store"))
    assert code == 1 and len(err.strip().splitlines()) == 1
    assert f"{url}/missing.json could not be read (File not found); pass a copy with --manifest PATH" in err


def test_the_store_mirror_is_the_default_on_s3(s3_bucket: str, capsys) -> None:
    store_uri = f"s3://{s3_bucket}/farm"
    store = open_store(store_uri)
    store.put_bytes(MANIFEST.read_bytes(), layout.SDK_RELEASE_MANIFEST)
    code, out, _ = _sync(capsys, "--store", store_uri)
    assert code == 0 and out.startswith(f"manifest {store_uri}/sdk-releases/n2-manifest.json")
    assert "Neuron 2.33.9: proposed" in out
    # The same object named as an s3:// manifest is the same manifest: nothing new is written.
    code, out, _ = _sync(capsys, "--manifest", f"{store_uri}/{layout.SDK_RELEASE_MANIFEST}", "--store", store_uri)
    assert code == 0 and "Neuron 2.33.9: unchanged" in out
    assert main(["releases", "accept", "2.33.9", "--store", store_uri]) == 0
    assert [r.state for r in release_entries_of(store)] == ["accepted"]


def release_entries_of(store) -> list[ProposedRelease]:
    from neuronforge.artifacts import release_entries

    found, damaged = release_entries.listing(store)
    assert damaged == []
    return found


def test_the_recompile_dag_syncs_from_the_mirror_first_and_a_failing_sync_is_reported(tmp_path: Path) -> None:
    from neuronforge_airflow.operators.recompile import sync_releases

    store_uri = f"file://{tmp_path / 'store'}"
    store = open_store(store_uri)
    assert sync_releases.function(params={"store": store_uri}) is None  # nothing mirrored: no network
    store.put_bytes(MANIFEST.read_bytes(), layout.SDK_RELEASE_MANIFEST)
    feed = sync_releases.function(params={"store": store_uri})
    assert feed["problem"] == "" and feed["manifest"] == store.uri(layout.SDK_RELEASE_MANIFEST)
    (line,) = feed["proposed"]
    assert line.startswith("Neuron 2.33.9 proposed, needs review: date, images, ")
    assert line.endswith(f"accept with `neuronforge releases accept 2.33.9 --store {store.root_uri}`")
    # The report names it, in its SDK section.
    report = recompile.Report("2026-11-28T00-00-00Z", "c.yaml", store.root_uri, {}, [], {"problem": "x", "feed": feed})
    markdown = report.to_markdown()
    assert "## Release feed" in markdown and f"- {line}" in markdown
    assert report.record().sdk_release["feed"]["proposed"] == [line]
    # A mirror that does not parse: the problem is reported, the task does not fail.
    store.put_bytes(b"{", layout.SDK_RELEASE_MANIFEST)
    broken = sync_releases.function(params={"store": store_uri})
    assert broken["problem"].startswith(f"{store.uri(layout.SDK_RELEASE_MANIFEST)}: not a Neuron SDK release")
    assert broken["proposed"] == [line]  # still waiting for review
    assert "release feed: " + broken["problem"] in "\n".join(recompile.feed_markdown(broken))


def test_one_parser_reads_the_manifest_for_the_report_too(tmp_path: Path) -> None:
    store = open_store(f"file://{tmp_path / 'store'}")
    store.put_bytes(MANIFEST.read_bytes(), layout.SDK_RELEASE_MANIFEST)
    status = recompile.sdk_release_status(store, "2.28.7631.0+abc")
    assert status["latest_release"] == "2.33.9" and status["installed_release"] == "2.33.9"
    store.put_bytes(b'{"neuron_releases": 3}', layout.SDK_RELEASE_MANIFEST)
    problem = recompile.sdk_release_status(store, "2.28.7631.0")["problem"]
    assert problem.startswith(store.uri(layout.SDK_RELEASE_MANIFEST)) and "neuron_releases" in problem
    with pytest.raises(ManifestError, match=r"release 2\.1\.0 is listed twice"):
        parse(b'{"neuron_releases": [{"neuron_version": "2.1", "packages": []}, '
              b'{"neuron_version": "2.1.0", "packages": []}]}', "m.json")  # fmt: skip


def test_accept_same_as_settles_what_the_manifest_lacks_and_the_runtime_patch_is_re_smoked(
    tmp_path: Path, capsys
) -> None:
    """AWS's manifest never lists vLLM, which the vLLM Neuron plugin line reads: until reviewed, the
    absent package counts as changed and every build of the line would rebuild. `accept --same-as`
    records the release notes' "all other packages are the same as in <R>" with who decided; then only
    the runtime changed, and the decision is a re-smoke."""
    from neuronforge.farm import upgrade_decisions

    store = str(tmp_path / "store")
    _sync(capsys, "--manifest", str(MANIFEST), "--store", store)
    opened = open_store(store)
    proposed_only = release_feed.known_table(opened)
    assert proposed_only.entry("2.33.9") is None  # proposed: not yet known
    assert main(["releases", "accept", "2.33.9", "--same-as", "2.33.1", "--by", "ana", "--store", store]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "Neuron 2.33.9 accepted by ana"
    assert out[1].startswith("  as in 2.33.1: ") and "packages.vllm" in out[1] and "lines.vllm-neuron-native" in out[1]
    assert out[2] == "  still needs review: date, images"
    record = ProposedRelease.read(opened, layout.sdk_release_entry("2.33.9"))
    assert {r.what for r in record.reviewed} >= {"packages.vllm", "lines.vllm-neuron-native"}
    assert {(r.same_as, r.by) for r in record.reviewed} == {("2.33.1", "ana")}
    assert [n.what for n in record.needs_review] == ["date", "images"]
    table = release_feed.known_table(opened)
    assert table.entry("2.33.9").package("vllm") == table.entry("2.33.1").package("vllm")
    decided = upgrade_decisions.between(table, "vllm-neuron-native", "2.33.1", "2.33.9")
    assert decided is not None and decided.decision == upgrade_decisions.RESMOKE, decided
    assert decided.deciding == ("aws-neuronx-runtime-lib 2.35.33.0 -> 2.35.40.0",)


def test_accepted_without_review_the_absent_package_rebuilds_and_same_as_is_checked(tmp_path: Path, capsys) -> None:
    from neuronforge.farm import upgrade_decisions

    store = str(tmp_path / "store")
    _sync(capsys, "--manifest", str(MANIFEST), "--store", store)
    before = _entries(tmp_path / "store")
    # A release the store does not know, one only announced, one that does not ship the line: one line each,
    # nothing written.
    for same_as, says in (
        ("2.40.0", "not a release neuronforge knows; `neuronforge releases ls --store file:"),
        ("2.34", "--same-as 2.34: not a release neuronforge knows"),  # announced, not shipped
        ("2.21.1", "SDK 2.21.1 lists no vllm, so it cannot settle packages.vllm of 2.33.9"),
    ):
        code = main(["releases", "accept", "2.33.9", "--same-as", same_as, "--store", store])
        err = capsys.readouterr().err.strip()
        assert code == 2 and says in err and "\n" not in err, (same_as, err)
        assert _entries(tmp_path / "store") == before
    # The command `ls` suggests works: accepted as the manifest has it, vLLM absent decides a rebuild.
    assert main(["releases", "ls", "--store", store]) == 0
    assert "NEEDS REVIEW: date, images, " in capsys.readouterr().out
    assert main(["releases", "accept", "2.33.9", "--store", store]) == 0
    assert (
        "still needs review: date, images, lines.optimum-neuron, lines.vllm-neuron-native, packages.vllm\n"
        in capsys.readouterr().out
    )
    decided = upgrade_decisions.between(
        release_feed.known_table(open_store(store)), "vllm-neuron-native", "2.33.1", "2.33.9"
    )
    assert decided is not None and decided.decision == upgrade_decisions.REBUILD and "vllm" in decided.sentence()
    # Reviewed afterwards: accepting again with --same-as settles it (the decision and history kept).
    assert main(["releases", "accept", "2.33.9", "--same-as", "2.33.1", "--store", store]) == 0
    record = ProposedRelease.read(open_store(store), layout.sdk_release_entry("2.33.9"))
    assert record.state == "accepted" and record.history[0].state == "accepted" and record.reviewed
    table = release_feed.known_table(open_store(store))
    assert (
        upgrade_decisions.between(table, "vllm-neuron-native", "2.33.1", "2.33.9").decision == upgrade_decisions.RESMOKE
    )
