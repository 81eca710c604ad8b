"""A channel that requires the Neuron SDK release its fleet runs (`require-release`): a promote or
rollback takes only a build built on that release or with a passing attestation for it, refused with
exit 3 and one sentence naming the release and the attest command; `channels`, `ls` and `show` say
which builds are attested; a later failed attestation revokes a pass."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from neuronforge.artifacts import attestations, channels
from neuronforge.interfaces.cli import main
from neuronforge.records.attestation import Attestation
from neuronforge.stores import open_store
from tests.releases.builds import MODEL, publish


@pytest.fixture
def store(tmp_path: Path):
    return open_store(f"file://{tmp_path / 'store'}")


def cli(store, *argv: str) -> int:
    return main([*argv, "--store", store.root_uri])


def smoke(release: str, passed: bool = True) -> Attestation:
    return Attestation(release=release, run="re-smoke", passed=passed, at="2026-11-29T00:00:00Z", host="nf-neuron")


def test_a_channel_requiring_a_release_takes_only_builds_attested_for_it(store, capsys) -> None:
    first, second = publish(store, 1), publish(store, 2)
    assert cli(store, "promote", MODEL, "--profile", "cpu", "--channel", "candidate", "--build", first[:12]) == 0
    capsys.readouterr()
    assert (
        cli(store, "require-release", MODEL, "--profile", "cpu", "--channel", "candidate", "--release", "2.33.1") == 0
    )
    out = capsys.readouterr().out
    assert "requires SDK 2.33.1" in out and f"WARNING: it points to {first[:12]}, not attested" in out
    before = store.get_bytes(channels.ChannelRef.parse(MODEL, "cpu", "candidate").record_key)

    assert cli(store, "promote", MODEL, "--profile", "cpu", "--channel", "candidate", "--build", second[:12]) == 3
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1 and "requires a build attested for Neuron SDK 2.33.1" in err
    assert f"`neuronforge attest {second[:12]} --sdk 2.33.1 --store {store.root_uri}`" in err
    assert store.get_bytes(channels.ChannelRef.parse(MODEL, "cpu", "candidate").record_key) == before

    attestations.attest(store, second, smoke("2.33.2"))  # another release does not count
    assert cli(store, "promote", MODEL, "--profile", "cpu", "--channel", "candidate", "--build", second[:12]) == 3
    attestations.attest(store, second, smoke("2.33.1"))
    capsys.readouterr()
    assert cli(store, "promote", MODEL, "--profile", "cpu", "--channel", "candidate", "--build", second[:12]) == 0
    # the rollback to the first build, not attested, is refused too
    capsys.readouterr()
    assert cli(store, "rollback", MODEL, "--profile", "cpu", "--channel", "candidate") == 3
    assert "requires a build attested for Neuron SDK 2.33.1" in capsys.readouterr().err

    assert cli(store, "channels", MODEL, "--json") == 0
    [shown] = json.loads(capsys.readouterr().out)
    assert shown["requires_release"] == "2.33.1" and shown["attested"] is True
    assert shown["current"]["build"]["sdk_release"] == "none"  # what it was built on, recorded by the move
    assert cli(store, "channels", MODEL) == 0
    assert "SDK 2.33.1: attested" in capsys.readouterr().out

    attestations.attest(store, second, smoke("2.33.1", passed=False))  # a later failure revokes it
    assert cli(store, "channels", MODEL) == 0
    out = capsys.readouterr().out
    assert (
        "SDK 2.33.1: NOT ATTESTED" in out
        and f"`neuronforge attest {second[:12]} --sdk 2.33.1 --store {store.root_uri}`" in out
    )

    assert cli(store, "require-release", MODEL, "--profile", "cpu", "--channel", "candidate", "--release", "none") == 0
    capsys.readouterr()
    assert cli(store, "rollback", MODEL, "--profile", "cpu", "--channel", "candidate") == 0


def test_a_build_built_on_the_release_needs_no_attestation(store) -> None:
    key = publish(store, 1)  # built on "none" (the cpu profile's release)
    channels.promote(store, channels.ChannelRef.parse(MODEL, "cpu", "beta"), build=key, by="ci")
    ref = channels.ChannelRef.parse(MODEL, "cpu", "beta")
    record, attested = channels.require_release(store, ref, "2.33.1")
    assert record.requires_release == "2.33.1" and not attested
    with pytest.raises(Exception, match="Neuron SDK release such as"):
        channels.require_release(store, ref, "latest")
    with pytest.raises(Exception, match="promote a build to it first"):
        channels.require_release(store, channels.ChannelRef.parse(MODEL, "cpu", "never"), "2.33.1")
    assert channels.release_refusal(store, ref, record, record.current.build) is not None
    built_here = record.current.build.model_copy(update={"sdk_release": "2.33.1"})
    assert channels.release_refusal(store, ref, record, built_here) is None


def test_ls_and_show_say_which_releases_a_build_is_attested_for(store, capsys) -> None:
    key = publish(store, 1)
    attestations.attest(store, key, smoke("2.33.1"))
    verify = Attestation(release="2.34.0", run="re-verify", passed=False, keys_found=["a"], keys_missing=["b"])
    attestations.attest(store, key, verify)
    assert cli(store, "ls", "--json") == 0
    [row] = json.loads(capsys.readouterr().out)
    assert row["attested"] == ["2.33.1"]  # from the farm index: no read per row
    assert cli(store, "ls") == 0
    assert "attested 2.33.1" in capsys.readouterr().out
    assert cli(store, "show", key[:12]) == 0
    out = capsys.readouterr().out
    assert "attested   SDK 2.34.0: re-verify FAILED" in out and "1 MISSING" in out
    assert "attested   SDK 2.33.1: re-smoke passed on nf-neuron" in out
    assert cli(store, "index", "rebuild", store.root_uri) == 0  # a rebuilt index finds them again
    capsys.readouterr()
    assert cli(store, "ls", "--json") == 0
    assert json.loads(capsys.readouterr().out)[0]["attested"] == ["2.33.1"]
