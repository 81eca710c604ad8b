"""A build's attestations: `attestations/<key>.json`, beside the build's manifest and never inside it
(the manifest is immutable; a build is attested again at each release its fleet moves to), like its
review. One attestation says that the published build, unchanged, was proven on a newer Neuron SDK
release without compiling: its smoke test on that release's Neuron host (`re-smoke`: only what a
load reads changed), or its consumer's own re-trace in that release's image against the published
cache, compiling forbidden (`re-verify`: a library the consumer's key may hash changed) — with the
keys found and, when it failed, the keys missing (the build is then rebuilt, not attested).

Written by compare-and-swap (`neuronforge.artifacts.attestations`): two attestations at once keep both.
"""

from __future__ import annotations

from typing import Annotated, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictStr

from neuronforge.records.base import StoredRecord
from neuronforge.records.parts import Text, or_default
from neuronforge.records.smoke import Measurement

KEPT = 50  # attestations a record keeps, newest first (one per release and run is the usual)


class Attestation(BaseModel):
    model_config = ConfigDict(frozen=True, extra="allow")

    release: StrictStr  # the Neuron SDK release the build was proven on
    run: Literal["re-smoke", "re-verify"]  # what was run: the smoke test, or the consumer's re-trace
    passed: bool
    at: Text = ""  # UTC, ISO 8601
    host: Text = ""  # where it ran (hostname; the Neuron host's description for a smoke)
    packages: dict[str, str] = Field(default_factory=dict)  # the release's runtime versions (the line's load)
    keys_found: list[str] = Field(default_factory=list)  # re-verify: the cache keys the re-trace found
    keys_missing: list[str] = Field(default_factory=list)  # re-verify: the keys it would have compiled
    detail: Text = ""  # the smoke's or the re-trace's own sentence
    # The re-smoke's measurement (the smoke protocol's figures at this release), so that the upgrade
    # report compares it with the build's own; None: no smoke ran, or one from before the protocol.
    measurement: Annotated[Measurement | None, or_default(lambda: None)] = None


class AttestationRecord(StoredRecord):
    KIND: ClassVar[str] = "attestations"
    SCHEMA: ClassVar[int] = 1

    key: StrictStr  # the build's full cache key
    attestations: list[Attestation] = Field(default_factory=list)  # newest first

    def attested(self, attestation: Attestation) -> AttestationRecord:
        return self.model_copy(update={"attestations": [attestation, *self.attestations][:KEPT]})

    def passed_for(self, release: str) -> Attestation | None:
        """The newest attestation for `release`, when it passed (a later failure revokes it)."""
        newest = next((a for a in self.attestations if a.release == release), None)
        return newest if newest is not None and newest.passed else None

    def passing(self) -> list[str]:
        """The releases the build is attested for now (the newest attestation of each passed), sorted:
        what the farm index keeps of this record for `ls` and the catalog's rows."""
        return sorted({a.release for a in self.attestations if self.passed_for(a.release) is not None})
