"""A build's attestations (`attestations/<key>.json`): written beside the build by compare-and-swap,
newest first, the newest one for a release deciding whether the build is attested for it; a build
built on the release counts as attested."""

from __future__ import annotations

from pathlib import Path

import pytest

from neuronforge.artifacts import attestations, layout
from neuronforge.records.attestation import Attestation, AttestationRecord
from neuronforge.records.base import RecordError
from neuronforge.stores import open_store

KEY = "a" * 64


def smoke(release: str, passed: bool = True) -> Attestation:
    return Attestation(release=release, run="re-smoke", passed=passed, at="2026-11-12T00:00:00Z", host="nf-neuron")


def test_attestations_are_kept_newest_first_beside_the_build(tmp_path: Path) -> None:
    store = open_store(f"file://{tmp_path}")
    assert attestations.attestations_of(store, KEY) is None
    assert not attestations.attested_for(store, KEY, "2.33.1", "2.33.0")
    assert attestations.attested_for(store, KEY, "2.33.0", "2.33.0")  # built on it
    attestations.attest(store, KEY, smoke("2.33.1"))
    verify = Attestation(
        release="2.33.2", run="re-verify", passed=True, keys_found=["k1", "k2"], packages={"nrtpy": "2.35.33"}
    )
    record = attestations.attest(store, KEY, verify)
    assert [a.release for a in record.attestations] == ["2.33.2", "2.33.1"]
    assert AttestationRecord.read(store, layout.attestation_entry(KEY)) == record
    assert attestations.attested_for(store, KEY, "2.33.1", "2.33.0")
    assert attestations.attested_for(store, KEY, "2.33.2", "2.33.0")
    attestations.attest(store, KEY, smoke("2.33.1", passed=False))  # a later failure revokes it
    assert not attestations.attested_for(store, KEY, "2.33.1", "2.33.0")
    assert record.to_bytes() == AttestationRecord.from_bytes(record.to_bytes()).to_bytes()


def test_an_attestation_names_what_was_run() -> None:
    with pytest.raises(RecordError):
        AttestationRecord.from_json({"schema_version": 1, "key": KEY, "attestations": [{"release": "2.33.1",
                                     "run": "compile", "passed": True}]})  # fmt: skip
