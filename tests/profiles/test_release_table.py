"""The release table (neuronforge/profiles/releases/): every view neuronforge shows of a Neuron SDK release
is derived from it and agrees with it — the SDK releases an upgrade knows, each line's lifecycle, each
profile's pins, the worker images' files — and a release whose behaviour is known is one data file."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from neuronforge.interfaces import release_files
from neuronforge.profiles import registry, release_table, vllm_native
from neuronforge.profiles.lifecycle import Status, release_key
from neuronforge.profiles.release_table import ReleaseTableError, load
from neuronforge.profiles.sdk_releases import RELEASES, announced, known_release
from neuronforge.records.base import RecordError
from neuronforge.records.sdk_release import SdkReleaseEntry

TABLE = load()


def test_the_generated_worker_files_are_what_the_table_renders() -> None:
    assert release_files.stale() == [], "run `python -m neuronforge.interfaces.release_files`"


def test_every_release_of_the_table_is_known_with_its_compiler_and_sources() -> None:
    assert [r.version for r in RELEASES] == [e.version for e in TABLE.entries]
    for entry in TABLE.entries:
        found = known_release(entry.version) if entry.released else announced(entry.version)
        assert found is not None and found.version == entry.version, entry.version
        cc = entry.package("neuronx-cc")
        assert found.neuronx_cc == (cc.version if cc else "")
        assert [s.url for s in found.sources] == [TABLE.sources[s].url for s in entry.sources]


def test_each_profile_pins_what_the_table_gives_its_release() -> None:
    lines = {e: set() for e in TABLE.lines}
    for entry in TABLE.entries:
        for line, le in entry.lines.items():
            if le.profile is not None:
                lines[line].add(entry.version)
    registered = {p.name: set() for p in registry.all_profiles() if p.neuron}
    for profile in registry.all_profiles():
        if not profile.neuron:
            continue
        registered[profile.name].add(profile.version)
        entry = TABLE.entry(profile.version)
        assert entry is not None and entry.lines[profile.name].profile is not None, profile.ref
        assert profile.pins.compiler_version == entry.package("neuronx-cc").full, profile.ref
        pinned = {p.distribution: p.full for p in entry.packages if p.name in entry.lines[profile.name].profile}
        for package, version in profile.pins.packages.items():
            assert pinned[package] == version, (profile.ref, package)
    assert registered == {line: versions for line, versions in lines.items() if versions}


def test_each_lifecycle_says_what_the_releases_state() -> None:
    for line in TABLE.lines:
        lc = registry.lifecycle_of(line)
        assert lc == release_table.lifecycle(line)
        shipped = [e.version for e in TABLE.entries if line in e.lines and e.lines[line].ships]
        assert [r.sdk for r in lc.releases] == shipped
        for entry in TABLE.entries:
            for group, stated in entry.lines[line].status.items() if line in entry.lines else ():
                for family in group.split("/"):
                    assert lc.status(family, entry.version).value == stated.status, (line, family, entry.version)


def test_consecutive_releases_of_one_status_are_one_phase_and_the_last_serving_release_is_derived() -> None:
    lc = release_table.lifecycle("vllm-neuron")
    inf2 = lc.of("inf2")
    assert [(p.since, p.status) for p in inf2.phases] == [("2.26", Status.ACTIVE), ("2.29", Status.FROZEN)]
    assert inf2.last_release == "2.28"  # 2.28.1 is the newest release before the 2.29 freeze
    # trn2 stays the line's until its end is announced: no last release while nothing released froze it
    assert release_table.lifecycle("vllm-neuron-native").of("trn2").last_release is None
    assert release_table.lifecycle("optimum-neuron").of("trn2").last_release is None  # EOS only announced


def test_the_corrections_are_in_with_their_sources() -> None:
    native = release_table.lifecycle("vllm-neuron-native")
    assert native.phase("trn2", "2.31.0").status is Status.ACTIVE
    assert "vllm-neuron-beta" in native.phase("trn2", "2.31.0").source.url
    assert native.releases[0].sdk == "2.31.0" and "0.21.0.1.0.0" in native.releases[0].ships
    plugin = TABLE.entry("2.31.0").package("vllm-neuron")
    assert plugin.version == "0.5.3" and plugin.source == "dlc-2-31-0"  # what the images carry
    assert [(r.value, r.source) for r in plugin.disputed] == [("0.5.0", "components-2-31-0")]
    nxdi = TABLE.entry("2.31.0").package("neuronx-distributed-inference")
    assert nxdi.version == "0.10.18399" and [r.value for r in nxdi.disputed] == ["0.10.18398"]
    frozen = TABLE.entry("2.29.0").lines["vllm-neuron"].status["inf2"]
    assert frozen.status == "frozen" and frozen.source == "nxdi-2-29"
    assert {r.source for r in frozen.disputed} == {"dlc-readme-2-31-1", "manifest"}


def test_2_33_1_is_known_and_registers_no_profile_version() -> None:
    entry = TABLE.entry("2.33.1")
    assert entry.date == "2026-11-11" and known_release("2.33.1") is not None
    assert {p.full for p in entry.packages if p.distribution == "libtorch-neuronx-lite"} == {
        "2.11.0.1.0.4089",
        "2.12.0.1.0.4089",
        "2.13.0.1.0.4089",
    }
    assert entry.package("aws-neuronx-runtime-lib").version == "2.35.33.0"
    assert entry.package("neuronx-cc").version == TABLE.entry("2.33.0").package("neuronx-cc").version
    assert all(le.profile is None for le in entry.lines.values())
    assert "vllm-neuron-native@2.33.1" not in {p.ref for p in registry.all_profiles()}


def test_every_entry_round_trips_as_the_stored_record() -> None:
    for entry in TABLE.entries:
        assert SdkReleaseEntry.from_json(entry.to_json()) == entry
        assert SdkReleaseEntry.from_bytes(entry.to_bytes()) == entry


def _copy(tmp_path: Path) -> Path:
    folder = tmp_path / "releases"
    shutil.copytree(release_table.TABLE, folder)
    return folder


def test_a_release_of_known_behaviour_is_one_data_file(tmp_path: Path) -> None:
    folder = _copy(tmp_path)
    text = (folder / "2.33.0.toml").read_text().replace('version = "2.33.0"', 'version = "2.33.9"', 1)
    (folder / "2.33.9.toml").write_text(text.replace("sdk2.33.0", "sdk2.33.9"))
    table = load(folder)
    releases = release_table.sdk_releases(table)
    assert known_release("2.33", releases).version == "2.33.9"
    [new] = [r for r in release_table.profile_releases("vllm-neuron-native", table) if r.sdk == "2.33.9"]
    release = vllm_native.release_of(new)  # the 0.29 plugin's behaviour: known
    profile = vllm_native.VllmNativeProfile(release)
    assert profile.ref == "vllm-neuron-native@2.33.9" and profile.pins.compiler_version == "2.28.7631.0"
    assert profile.instance_families == frozenset({"trn2", "trn3"})
    assert release_table.lifecycle("vllm-neuron-native", table).newest == "2.33.9"
    files = release_files.render(table)
    assert "vllm-neuron==0.29.0.1.2.0" in files[Path("docker/neuron-sdk/2.33.9.txt")]
    assert '"2.33.9": {' in files[Path("docker/neuron-sdk/images.json")]


def test_a_plugin_of_unknown_behaviour_is_refused_by_name(tmp_path: Path) -> None:
    folder = _copy(tmp_path)
    text = (folder / "2.33.0.toml").read_text().replace('version = "2.33.0"', 'version = "2.35.0"', 1)
    (folder / "2.35.0.toml").write_text(text.replace('"0.29.0.1.2.0"', '"0.31.0.1.0.0"'))
    [new] = [r for r in release_table.profile_releases("vllm-neuron-native", load(folder)) if r.sdk == "2.35.0"]
    with pytest.raises(Exception, match=r"vLLM Neuron 0\.31\.0\.1\.0\.0 has no known behaviour \(BEHAVIOUR in"):
        vllm_native.release_of(new)


@pytest.mark.parametrize(
    ("edit", "says"),
    [
        (('date = "2026-10-19"', 'date = "19/10/2026"'), "2.33.0.toml: not a valid SDK release entry: date: "),
        (('version = "0.7.0"', "version = 7"), "2.33.0.toml: not a valid SDK release entry: packages.1.version: "),
        (('source = "components-2-33-0"', 'source = "nowhere"'), "2.33.0.toml: packages.0.source: unknown source"),
        (("[[packages]]", "[[package]]"), "2.33.0.toml: not a valid SDK release entry: package: Extra inputs"),
        (('ships = ["vllm-neuron", "vllm"]', 'ships = ["vllm-neuron", "vlm"]'), "package 'vlm' is not in packages"),
        (('version = "2.33.0"', 'version = "2.33.2"'), "2.33.0.toml: version: '2.33.2' is not the file's name"),
    ],
)
def test_a_bad_entry_is_one_line_naming_the_file_and_the_field(tmp_path: Path, edit: tuple, says: str) -> None:
    folder = _copy(tmp_path)
    path = folder / "2.33.0.toml"
    path.write_text(path.read_text().replace(*edit, 1))
    with pytest.raises(ReleaseTableError) as exc:
        load(folder)
    assert says in str(exc.value) and "\n" not in str(exc.value)


def test_a_status_is_one_of_the_five_and_names_a_family_of_the_line(tmp_path: Path) -> None:
    folder = _copy(tmp_path)
    path = folder / "2.32.0.toml"
    text = path.read_text()
    path.write_text(text.replace('status.trn2 = { status = "frozen"', 'status.trn2 = { status = "retired"', 1))
    with pytest.raises(ReleaseTableError, match=r"2\.32\.0\.toml: not a valid SDK release entry: lines\.vllm-neuron"):
        load(folder)
    path.write_text(text.replace("status.trn2 = {", "status.trn9 = {", 1))
    with pytest.raises(ReleaseTableError, match=r"lines\.vllm-neuron\.status\.trn9: not one of the line's families"):
        load(folder)


def test_a_stored_entry_is_a_record_like_any_other() -> None:
    raw = TABLE.entry("2.33.1").to_json()
    with pytest.raises(RecordError, match="schema 2"):
        SdkReleaseEntry.from_json({**raw, "schema_version": 2})
    with pytest.raises(RecordError, match=r"packages\.0\.version"):
        SdkReleaseEntry.from_json({**raw, "packages": [{**raw["packages"][0], "version": None}]})
    assert release_key(raw["version"]) == (2, 33, 1)
