"""The artifact manifest (`records.artifact_manifest`): strict where readers rely on it, tolerant where
they only show it, and read back as written."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from neuronforge.artifacts.published import manifest_problem
from neuronforge.records.artifact_manifest import ArtifactManifest
from neuronforge.records.base import RecordError, RecordTooNew
from neuronforge.records.hosts import HostsReport
from neuronforge.records.smoke import SmokeRecord
from neuronforge.stores import open_store

KEY = "ab" * 32
FILES = [
    {"path": "cpu-aoti/model.pt2", "size": 5, "sha256": "0" * 64},
    {"path": "launch/run.sh", "size": 12, "sha256": "1" * 64},
]
WRITTEN: dict[str, Any] = {  # every key the publish stage writes
    "schema_version": 1,
    "cache_key": KEY,
    "request": {"key_schema": 3, "target": {"instance_type": "inf2.xlarge", "batch_size": 1, "sequence_length": 64}},
    "source": {"kind": "hub", "location": "org/model", "revision": "c0ffee"},
    "target_slug": "cpu-inf2.xlarge-tp1-b1-s64-bf16",
    "profile": {"ref": "cpu@local", "title": "CPU", "sdk_release": "-", "name": "cpu", "packages": {"torch": "2.8"}},
    "toolchain": {
        "backend": "cpu",
        "backend_version": "2.8",
        "compiler": "torch-inductor",
        "compiler_version": "2.8",
        "packages": {"torch": "2.8"},
        "compiler_flags": [],
        "worker": {},
    },
    "compiler_flags": ["--O1"],
    "files": FILES,
    "formats": {"cpu-aoti": "cpu-aoti", "launch": "launch"},
    "smoke": {"passed": True, "reason": "ok", "load_s": 0.5, "time_to_first_token_s": 0.01, "per_token_s": 0.002},
    "compile": {"graphs": ["b1"], "compiler_invocations": 1},
    "hosts": {"stages": [], "cpu_seconds": 1.0, "neuron_seconds": 0.0},
    "neuronforge_version": "0.1.0",
    "run_id": "manual__1",
    "published_at": "2026-11-26T00:00:00Z",
}


def test_a_manifest_round_trips_key_for_key(tmp_path: Path) -> None:
    store = open_store(f"file://{tmp_path}")
    store.write_json("a/manifest.json", WRITTEN)
    m = ArtifactManifest.read(store, "a/manifest.json")
    assert m.to_json() == WRITTEN and m.as_stored() == WRITTEN
    assert (m.cache_key, m.source.location, m.toolchain.compiler_version, m.profile and m.profile.ref) == (
        KEY,
        "org/model",
        "2.8",
        "cpu@local",
    )
    assert m.size_bytes == 17 and m.launch_files() == ["run.sh"]
    m.write(store, "b/manifest.json")
    assert store.get_bytes("b/manifest.json") == store.get_bytes("a/manifest.json")  # as `write_json` wrote it
    assert ArtifactManifest.read(store, "b/manifest.json") == m


def test_a_newer_manifest_is_refused_with_one_line(tmp_path: Path) -> None:
    store = open_store(f"file://{tmp_path}")
    store.write_json("a/manifest.json", {**WRITTEN, "schema_version": 2})
    with pytest.raises(RecordTooNew, match=r"artifact manifest has schema 2, this neuronforge reads up to 1; upgrade"):
        ArtifactManifest.read(store, "a/manifest.json")
    assert manifest_problem({**WRITTEN, "schema_version": 2}) is not None  # no reader takes it for an artifact


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"cache_key": 7}, "cache_key"),
        ({"source": "org/model"}, "source"),
        ({"toolchain": None}, "toolchain"),
        ({"files": {"a": 1}}, "files"),
        ({"files": [{**FILES[0], "size": "5"}]}, "files.0.size"),
        ({"files": [{**FILES[0], "size": True}]}, "files.0.size"),
        ({"files": [{**FILES[0], "size": 5.0}]}, "files.0.size"),
        ({"files": [{**FILES[0], "size": -1}]}, "files.0.size"),
        ({"files": [{"path": 3, "size": 1, "sha256": "0"}]}, "files.0.path"),
    ],
)
def test_a_wrong_core_is_a_record_error_naming_field_and_uri(
    tmp_path: Path, changes: dict[str, Any], field: str
) -> None:
    store = open_store(f"file://{tmp_path}")
    store.write_json("a/manifest.json", {**WRITTEN, **changes})
    with pytest.raises(RecordError) as caught:
        ArtifactManifest.read(store, "a/manifest.json")
    assert str(caught.value).startswith(f"{store.uri('a/manifest.json')}: not a valid artifact manifest: {field}: ")
    assert "\n" not in str(caught.value)


def test_a_mistyped_shown_part_costs_that_part_not_the_manifest() -> None:
    """What a forged manifest holds where the writer writes objects and text reads as the default (or
    as the text it is), and `as_stored` still gives the manifest as the store holds it."""
    forged = {
        **WRITTEN,
        "hosts": ["x"],
        "formats": ["<img>"],
        "smoke": "<script>",
        "compile": 3,
        "request": None,
        "profile": "cpu",
        "compiler_flags": "-O1",
        "run_id": {"run": "<script>"},
        "published_at": 7,
    }
    m = ArtifactManifest.from_json(forged)
    assert (m.hosts, m.formats, m.smoke, m.compile, m.request, m.profile, m.compiler_flags) == (
        HostsReport(),
        {},
        SmokeRecord(),
        {},
        {},
        None,
        [],
    )
    assert (m.run_id, m.published_at) == ("{'run': '<script>'}", "7")
    assert m.as_stored() == forged and manifest_problem(forged) is None


def test_what_the_first_manifests_lacked_reads_as_empty() -> None:
    """Manifests before serving profiles, host reports and run ids (and hand-made ones without a
    schema version, which the readers never required)."""
    old = {k: v for k, v in WRITTEN.items() if k not in ("profile", "hosts", "run_id", "schema_version")}
    m = ArtifactManifest.from_json(old)
    assert (m.profile, m.hosts, m.run_id) == (None, HostsReport(), "")


def test_manifest_problem_says_what_is_missing_in_one_line() -> None:
    assert manifest_problem(WRITTEN) is None
    assert manifest_problem({**WRITTEN, "files": [{**FILES[0], "size": "5"}]}) == (
        "not an artifact manifest (its files are not path/size/sha256 entries)"
    )
    assert manifest_problem({**WRITTEN, "cache_key": None}) == "not an artifact manifest (no valid cache_key)"
    assert "found list" in (manifest_problem([WRITTEN]) or "")


def test_a_manifest_built_here_equals_the_same_one_read_back() -> None:
    built = ArtifactManifest(**{k: v for k, v in WRITTEN.items() if k != "schema_version"})
    assert ArtifactManifest.from_json(WRITTEN) == built and built.as_stored() == WRITTEN
    assert ArtifactManifest.from_json({**WRITTEN, "run_id": "other"}) != built


def test_lookup_refuses_an_artifact_a_newer_neuronforge_published(tmp_path: Path) -> None:
    """Not "unpublished" (which would rebuild and overwrite it): the one-line upgrade message."""
    from neuronforge.artifacts.published import lookup

    store = open_store(f"file://{tmp_path}")
    store.write_json("a/manifest.json", {**WRITTEN, "schema_version": 2})
    store.write_json(f"index/{KEY}.json", {"schema_version": 1, "cache_key": KEY, "manifest": "a/manifest.json"})
    with pytest.raises(RecordTooNew, match="upgrade neuronforge on this host"):
        lookup(store, KEY)
    store.write_json("a/manifest.json", {**WRITTEN, "files": "none"})
    assert lookup(store, KEY) is None  # not an artifact: nothing published


def test_a_forged_manifest_costs_what_it_forged_never_a_traceback(tmp_path: Path) -> None:
    """The catalog's artifact page and `ls` read a store's manifests as they are: one whose file sizes
    are text is no artifact (a damaged row with the reason, skipped by the scans); one whose shown parts are of the
    wrong types is shown without them, and its JSON as the store holds it."""
    from neuronforge.artifacts import layout
    from neuronforge.artifacts.farm_index import snapshot
    from neuronforge.farm.rows import farm_row
    from tests.farm_index.publishers import key_of, manifest_only

    store = open_store(f"file://{tmp_path}")
    broken, mistyped = key_of("forged", 0), key_of("forged", 1)
    for key, changes in (
        (broken, {"files": [{**FILES[0], "size": "5"}]}),
        (mistyped, {"smoke": "<script>", "formats": ["<img>"], "hosts": {"cpu_seconds": "<b>"}}),
    ):
        index, manifest = manifest_only(store, key)
        store.write_json(index.manifest, {**manifest.as_stored(), **changes})
    damaged, none = farm_row(store, broken)
    assert (damaged.status, none) == ("damaged", None) and "files.0.size" in damaged.message
    row, shown = farm_row(store, mistyped)
    assert row.key == mistyped and row.uris == {} and row.cpu_seconds is None
    assert shown is not None and shown.smoke == SmokeRecord() and shown.as_stored()["smoke"] == "<script>"
    entries, skipped = snapshot.scan(store)
    assert {k for k, e in entries.items() if e.published} == {mistyped} and entries[broken].status_class == "damaged"
    assert [s.index_key for s in skipped] == [layout.index_entry(broken)]
    assert skipped[0].problem == "not an artifact manifest (its files are not path/size/sha256 entries)"


def test_the_launch_files_text_round_trips_and_older_manifests_have_none(tmp_path: Path) -> None:
    store = open_store(f"file://{tmp_path}")
    store.write_json("a/manifest.json", {**WRITTEN, "launch_text": {"run.sh": "exec serve\n"}})
    m = ArtifactManifest.read(store, "a/manifest.json")
    assert m.launch_text == {"run.sh": "exec serve\n"} and m.to_json()["launch_text"] == m.launch_text
    assert ArtifactManifest.from_json(WRITTEN).launch_text is None  # published before it was recorded
    assert "launch_text" not in ArtifactManifest.from_json(WRITTEN).to_json()  # and written back as it was
    assert ArtifactManifest.from_json({**WRITTEN, "launch_text": ["not", "a", "map"]}).launch_text is None
