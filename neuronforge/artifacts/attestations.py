"""A build's attestations (`attestations/<key>.json`, `neuronforge.records.attestation`): the published
build proven at a newer Neuron SDK release without compiling — by its smoke test there (re-smoke) or
its consumer's re-trace in that release's image (re-verify). `neuronforge recompile --sdk` and the
recompile DAG write them; `show` and channels requiring a release read them.

An attestation is appended by compare-and-swap on the record's store version, retried when another
writer came in between (both are kept).
"""

from __future__ import annotations

from neuronforge.artifacts import layout
from neuronforge.artifacts.farm_index.notes import note_attestation
from neuronforge.artifacts.sidecars import swap
from neuronforge.records.attestation import Attestation, AttestationRecord
from neuronforge.stores import ArtifactStore, NotFound


def attestations_of(store: ArtifactStore, key: str) -> AttestationRecord | None:
    """The build's attestations; None while it has none (one read)."""
    try:
        return AttestationRecord.read(store, layout.attestation_entry(key))
    except NotFound:
        return None


def attest(store: ArtifactStore, key: str, attestation: Attestation) -> AttestationRecord:
    """Record `attestation` for the build `key`, newest first."""
    record = swap(
        store,
        layout.attestation_entry(key),
        AttestationRecord,
        lambda: AttestationRecord(key=key, attestations=[attestation]),
        lambda stored: stored.attested(attestation),
        "writes in a row; attest again",
    )
    note_attestation(store, record)
    return record


def attested_for(store: ArtifactStore, key: str, release: str, built_on: str) -> bool:
    """Whether the build `key`, built on SDK `built_on`, may serve on SDK `release`: built on it, or a
    passing attestation for it (the newest one for the release decides)."""
    if built_on == release:
        return True
    record = attestations_of(store, key)
    return record is not None and record.passed_for(release) is not None
