"""The release feed's advice, followed: accepting a release nobody proposed names the sync that proposes
it (from the store's mirror of AWS's manifest), the sync names the accept, a `--same-as` that cannot
settle anything names the listing or the accept without it, and `attest --sdk` of a release nobody knows
names the listing of the releases the store knows. Each in a store that is not the default one."""

from __future__ import annotations

from pathlib import Path

import pytest

from neuronforge.artifacts import layout
from neuronforge.interfaces.cli import main
from neuronforge.records.proposed_release import ProposedRelease
from neuronforge.stores import ArtifactStore, open_store
from tests.advice import covers, follow, suggested
from tests.advice.fresh import home  # noqa: F401 (the fixture)

MANIFEST = Path(__file__).resolve().parents[1] / "data" / "release-manifests" / "adds-2.33.9.json"
NEW = "2.33.9"  # what the manifest adds to the table: aws-neuronx-runtime-lib changed


@pytest.fixture
def store(home: Path, tmp_path: Path) -> ArtifactStore:  # noqa: F811
    """A store holding its mirror of AWS's manifest (what `releases sync` reads by default)."""
    store = open_store(f"file://{tmp_path / 'store'}")
    store.put_bytes(MANIFEST.read_bytes(), layout.SDK_RELEASE_MANIFEST)
    return store


def _state(store: ArtifactStore) -> str:
    return ProposedRelease.read(store, layout.sdk_release_entry(NEW)).state


def _said(capsys, *argv: str, code: int = 2) -> str:
    assert main(list(argv)) == code
    out, err = capsys.readouterr()
    return out + err


def _lists_releases(done) -> None:
    assert done.returncode == 0, done.stderr
    versions = [line.split()[0] for line in done.stdout.splitlines() if line and not line.startswith(" ")]
    assert "2.33.1" in versions and "2.21.1" in versions, done.stdout


@covers("neuronforge.artifacts.release_entries:decide", "neuronforge.farm.release_feed:accept_command")
def test_accepting_an_unproposed_release_names_the_sync_whose_accept_then_works(store: ArtifactStore, capsys) -> None:
    said = _said(capsys, "releases", "accept", NEW, "--store", store.root_uri)
    (sync,) = suggested(said, "neuronforge.artifacts.release_entries:decide")
    done = follow(sync)
    assert done.returncode == 0 and f"Neuron {NEW}: proposed" in done.stdout, done.stdout + done.stderr
    assert _state(store) == "proposed"
    # The sync says how to accept it: run in-process, to see where its suggestion was built.
    store.delete_prefix(layout.sdk_release_entry(NEW))
    said = _said(capsys, "releases", "sync", "--store", store.root_uri, code=0)
    (accept,) = suggested(said, "neuronforge.farm.release_feed:accept_command")
    done = follow(accept)
    assert done.returncode == 0 and done.stdout.startswith(f"Neuron {NEW} accepted by "), done.stdout + done.stderr
    assert _state(store) == "accepted"


@covers("neuronforge.farm.release_feed:settle_same_as")
def test_a_same_as_that_cannot_settle_names_the_listing_or_the_accept_without_it(store: ArtifactStore, capsys) -> None:
    _said(capsys, "releases", "sync", "--store", store.root_uri, code=0)
    for same_as in ("2.40.0", "2.21.1"):  # a release nobody knows; one that ships no vllm
        said = _said(capsys, "releases", "accept", NEW, "--same-as", same_as, "--store", store.root_uri)
        (listing,) = suggested(said, "neuronforge.farm.release_feed:settle_same_as")
        _lists_releases(follow(listing))
    assert _state(store) == "proposed"  # nothing decided by a refusal
    _said(capsys, "releases", "accept", NEW, "--same-as", "2.33.1", "--store", store.root_uri, code=0)
    said = _said(capsys, "releases", "accept", NEW, "--same-as", "2.33.1", "--store", store.root_uri)
    assert "settles nothing" in said  # everything it could settle is settled
    (accept,) = suggested(said, "neuronforge.farm.release_feed:settle_same_as")
    done = follow(accept)
    assert done.returncode == 0 and done.stdout.startswith(f"Neuron {NEW} accepted by "), done.stdout + done.stderr
    assert _state(store) == "accepted"
