"""The advice of a reader given a key, followed: a word that is no key, a key prefix that is empty, not
hex, too short or matches nothing, a build found damaged, a damage recorded that no longer holds, and a
download that does not match its manifest each suggest a listing or a verify of the store the reader was
given (a copy of the session's compiled store: not the default one), which does what the message says."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from neuronforge.artifacts import reviews
from neuronforge.artifacts.farm_index import read_damage
from neuronforge.artifacts.published import key_prefix
from neuronforge.common import settings
from neuronforge.common.errors import InvalidInput, StoreError
from neuronforge.farm.attest import download
from neuronforge.interfaces.cli import main
from neuronforge.stores import ArtifactStore, open_store
from tests.advice import covers, follow, in_message, suggested
from tests.advice.fresh import home  # noqa: F401 (the fixture)
from tests.conftest import Compiled


@pytest.fixture
def store(compiled: Compiled, home: Path, tmp_path: Path) -> ArtifactStore:  # noqa: F811
    """The session's store, copied (it is read-only): one published build."""
    copy = tmp_path / "store"
    shutil.copytree(Path(compiled.store.root_uri.removeprefix("file://")), copy)
    return open_store(f"file://{copy}")


def _lists(done, key: str) -> None:
    """`ls` ran and printed the build's key as the message said (12 characters)."""
    assert done.returncode == 0, done.stderr
    assert key[:12] in done.stdout, done.stdout


def _error(capsys, *argv: str) -> str:
    """What a command that fails says (its problems on stdout, its error on stderr)."""
    assert main(list(argv)) != 0
    out, err = capsys.readouterr()
    return out + err


@covers("neuronforge.artifacts.opening:_refuse_bad_key")
def test_a_word_that_is_no_key_names_the_listing_of_the_store_given(
    store: ArtifactStore, compiled: Compiled, capsys, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)  # no file of that name here
    said = _error(capsys, "show", "zzzzzz", "--store", store.root_uri)
    (command,) = suggested(said, "neuronforge.artifacts.opening:_refuse_bad_key")
    _lists(follow(command), compiled.first.key)


@covers("neuronforge.artifacts.published:key_prefix", "neuronforge.artifacts.published:find_key")
def test_a_key_prefix_that_names_nothing_names_the_listing_of_the_store_given(
    store: ArtifactStore, compiled: Compiled, capsys
) -> None:
    key = compiled.first.key
    other = "0" * 12 if not key.startswith("0") else "f" * 12
    said = [
        _error(capsys, "show", "abc", "--store", store.root_uri),
        _error(capsys, "show", other, "--store", store.root_uri),
    ]
    for given in ("", "  ", "xyz!", "abc"):  # empty, blank, not hex, too short (as `--to` gives them)
        with pytest.raises(InvalidInput) as refused:
            key_prefix(given, "--to", store=store.root_uri)
        said.append(str(refused.value))
    commands = {c for s in said[:1] + said[2:] for c in suggested(s, "neuronforge.artifacts.published:key_prefix")}
    commands |= set(suggested(said[1], "neuronforge.artifacts.published:find_key"))
    (command,) = commands  # one listing, of the store given
    _lists(follow(command), key)


@covers("neuronforge.artifacts.opening:refusal")
def test_a_damaged_build_names_its_listing_then_the_verify_that_clears_a_damage_gone(
    store: ArtifactStore, compiled: Compiled, capsys
) -> None:
    key, published = compiled.first.key, compiled.first.published
    victim = f"{published.prefix}/{max(published.manifest.files, key=lambda f: f.size).path}"
    whole = store.get_bytes(victim)
    store.put_bytes(whole[:-7], victim)  # truncated: `show` finds it and records it
    (listing,) = suggested(
        _error(capsys, "show", key, "--store", store.root_uri), "neuronforge.artifacts.opening:refusal"
    )
    done = follow(listing + " --json")
    assert done.returncode == 0, done.stderr
    (row,) = [r for r in json.loads(done.stdout) if r["cache_key"] == key]
    assert row["status"] == "damaged", row  # it lists it, as damaged
    store.put_bytes(whole, victim)  # the file restored: the recorded damage no longer holds
    said = _error(capsys, "show", key, "--store", store.root_uri)
    assert "run its build again" in said
    (verify,) = suggested(said, "neuronforge.artifacts.opening:refusal")
    done = follow(verify)
    assert done.returncode == 0, done.stdout + done.stderr
    assert read_damage(store, key) is None  # cleared
    assert main(["show", key, "--store", store.root_uri]) == 0


@covers("neuronforge.farm.attest:download")
def test_a_download_that_does_not_match_names_the_verify_that_finds_the_file(
    store: ArtifactStore, compiled: Compiled, tmp_path: Path
) -> None:
    key, published = compiled.first.key, compiled.first.published
    path = max(published.manifest.files, key=lambda f: f.size).path
    data = store.get_bytes(f"{published.prefix}/{path}")
    store.put_bytes(bytes([data[0] ^ 1]) + data[1:], f"{published.prefix}/{path}")  # same size, other bytes
    with pytest.raises(StoreError) as mismatch:
        download(store, published.prefix, published.manifest, tmp_path / "download")
    (command,) = suggested(str(mismatch.value), "neuronforge.farm.attest:download")
    done = follow(command)
    assert done.returncode == 3, done.stdout + done.stderr  # damaged
    assert path in done.stdout + done.stderr and "sha256" in done.stdout + done.stderr
    assert read_damage(store, key) is not None  # and recorded, as every reader then sees it


@covers("neuronforge.interfaces.cli.recompile:cmd_attest")
def test_attest_at_a_release_nobody_knows_names_the_listing_of_the_store_s_releases(
    store: ArtifactStore, compiled: Compiled, capsys
) -> None:
    said = _error(capsys, "attest", compiled.first.key[:12], "--sdk", "9.99.9", "--store", store.root_uri)
    (command,) = suggested(said, "neuronforge.interfaces.cli.recompile:cmd_attest")
    done = follow(command)
    assert done.returncode == 0, done.stderr
    versions = [line.split()[0] for line in done.stdout.splitlines() if line and not line.startswith(" ")]
    assert "2.33.1" in versions and "9.99.9" not in versions  # the releases it knows, the one given not among them


@covers("neuronforge_catalog_pages.params:cache_key")
def test_the_catalog_s_refused_key_names_the_listing_of_the_store_it_serves(
    store: ArtifactStore, compiled: Compiled, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tests.plugins.conftest import load_plugin

    monkeypatch.setenv("NEURONFORGE_STORE", store.root_uri)  # the store the catalog serves, the default one
    params = load_plugin("neuronforge_catalog").pages.params  # the pages as Airflow's loader imports them
    with pytest.raises(InvalidInput) as refused:
        params.cache_key("zz!")
    (command,) = suggested(str(refused.value), "neuronforge_catalog_pages.params:cache_key")
    _lists(follow(command), compiled.first.key)


def test_the_approval_setting_s_approve_approves_a_build(
    store: ArtifactStore, compiled: Compiled, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The settings page's `approve KEY` (not built by `advice`: test_sites.NOT_ADVICE), with a key."""
    monkeypatch.setenv("NEURONFORGE_STORE", store.root_uri)
    (command,) = in_message(settings.SETTINGS["approval_channels"].meaning)
    assert command.endswith(" KEY")
    done = follow(command.replace("KEY", compiled.first.key[:12]))
    assert done.returncode == 0, done.stderr
    assert reviews.state_of(store, compiled.first.key) == "approved"


@covers("neuronforge.artifacts.farm_index.snapshot:check")
def test_verify_of_a_store_names_the_rebuild_and_the_repair_that_fix_what_it_finds(
    store: ArtifactStore, compiled: Compiled, capsys
) -> None:
    key, published = compiled.first.key, compiled.first.published
    store.delete_prefix("farm-index")  # no farm index: `ls` and the catalog would show nothing
    (rebuild,) = suggested(
        _error(capsys, "verify", "--store", store.root_uri), "neuronforge.artifacts.farm_index.snapshot:check"
    )
    done = follow(rebuild)
    assert done.returncode == 0, done.stdout + done.stderr
    assert main(["verify", "--store", store.root_uri]) == 0  # the index matches the manifests again
    capsys.readouterr()
    store.delete_prefix(f"{published.prefix}/manifest.json")  # indexed, its manifest gone
    said = _error(capsys, "verify", "--store", store.root_uri)
    assert "no complete manifest" in said
    (repair,) = suggested(said, "neuronforge.artifacts.farm_index.snapshot:check")
    done = follow(repair)
    assert done.returncode == 3 and f"DAMAGED {key[:12]}" in done.stdout, done.stdout + done.stderr
    assert read_damage(store, key) is not None  # marked damaged: every reader says so from now on
