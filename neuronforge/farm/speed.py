"""A build compared with what a channel serves: the comparison (`artifacts.comparison.compare`) the
catalog's confirmation page shows before a promotion and the upgrade report gives each rebuilt or
re-smoked target against `stable`, from the same few reads wherever it is shown.

Reads are bounded by the channel: the channel's record (the caller's, or one read), the manifest of
the build it points to (one read: the record names it), and the candidate's smoke result (its index
pointer and manifest, or an attestation's measurement the caller hands in). Never a listing.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from neuronforge.artifacts import channels
from neuronforge.artifacts.comparison import Comparison, compare
from neuronforge.common.errors import NeuronforgeError
from neuronforge.records.smoke import SmokeRecord
from neuronforge.stores import ArtifactStore


def smoke_of(store: ArtifactStore, key: str, manifest_key: str = "") -> SmokeRecord | None:
    """Build `key`'s smoke result from its manifest (`manifest_key` when the caller knows it: one read;
    else its index pointer first); None when it cannot be read (the comparison then says so)."""
    from neuronforge.artifacts.published import index_pointer, read_manifest
    from neuronforge.records.index_entry import IndexEntry

    try:
        if not manifest_key:
            pointer = index_pointer(store, key)
            if not isinstance(pointer, IndexEntry):
                return None
            manifest_key = pointer.manifest
        return read_manifest(store, manifest_key).smoke
    except NeuronforgeError:  # the store, or a record that does not read (`RecordError`)
        return None


@dataclass(frozen=True)
class AgainstChannel:
    """A candidate compared with the build `channel` points to (`comparison` None: nothing to compare:
    the channel points nowhere, or to the candidate itself, or a smoke result did not read: `note`)."""

    channel: str
    base: str  # the key the channel points to ("": none)
    comparison: Comparison | None = None
    note: str = ""

    @property
    def verdict(self) -> str:
        return self.comparison.verdict if self.comparison is not None else "not compared"

    @property
    def summary(self) -> str:
        return self.comparison.summary() if self.comparison is not None else self.note

    @property
    def refused(self) -> bool:
        """Whether the channel's policy refuses the candidate (a gated channel and a regression)."""
        return self.comparison is not None and channels.gate(self.channel) is not None and self.comparison.refuses


def against_channel(
    store: ArtifactStore,
    record: Any,
    key: str,
    candidate: SmokeRecord | None = None,
    base_smoke: SmokeRecord | None = None,
) -> AgainstChannel:
    """Build `key` (its smoke result `candidate`, else read from its manifest) against the build the
    channel `record` (a `ChannelRecord`, or None for a channel not made yet) points to (its smoke result
    `base_smoke`, else read from the manifest the record names), under the channel's policy
    (`channels.gate`, the one promote applies, or the default policy for an ungated channel: shown, not gated)."""
    channel = record.channel if record is not None else ""
    if record is None:
        return AgainstChannel(channel, "", note="the channel points to no build yet: nothing to compare with")
    base = record.current.build
    if base.key == key and candidate is None:
        return AgainstChannel(channel, base.key, note=f"{channel} already points to {key[:12]}")
    base_smoke = base_smoke or smoke_of(store, base.key, base.manifest)
    cand_smoke = candidate if candidate is not None else smoke_of(store, key)
    if base_smoke is None or cand_smoke is None:
        which = base.key if base_smoke is None else key
        return AgainstChannel(channel, base.key, note=f"the smoke result of {which[:12]} could not be read")
    policy = channels.judging(channel)  # the gate, or the default threshold for an ungated channel (shown only)
    found = compare(base_smoke, cand_smoke, base_key=base.key, candidate_key=key, policy=policy)
    return AgainstChannel(channel, base.key, found)


SERVING = "stable"  # what the upgrade report compares each rebuilt or re-smoked build with


def against_stable(store: ArtifactStore, states: list[Any], release: str, channel: str = SERVING) -> None:
    """The upgrade report's speed column: each row rebuilt (its new build's manifest) or re-smoked at
    `release` (the attestation's measurement, when it recorded one) compared with the build `channel`
    (`stable`) serves for its model and profile line, set on the row as `speed`
    (`records.recompile_report.SpeedAgainst`).
    Reads: per model and line the channel and its build's manifest, once; per row its build's index
    pointer and manifest, or its attestations."""
    from neuronforge.artifacts import channels
    from neuronforge.farm import recompile
    from neuronforge.spec.source import model_name

    served: dict[tuple[str, str], tuple[Any, SmokeRecord | None] | str] = {}
    for s in states:
        resmoked = s.outcome in (recompile.ATTESTED, recompile.NOT_ATTESTED)
        if not s.key or (s.outcome != recompile.REBUILT and not resmoked):
            continue
        line = (s.profile or "").partition("@")[0]
        ref = (model_name(s.pinned or s.source), line)
        if ref not in served:
            try:
                record, _ = channels.read(store, channels.ChannelRef.parse(*ref, channel))
            except NeuronforgeError as exc:
                served[ref] = f"{channel} of {ref[0]} · {line} not read: {exc}"
            else:
                base = record.current.build if record is not None else None
                served[ref] = (record, smoke_of(store, base.key, base.manifest) if base is not None else None)
        found = served[ref]
        if isinstance(found, str):
            s.speed = {"channel": channel, "verdict": "not compared", "summary": found}
            continue
        record, base_smoke = found
        candidate = _resmoke(store, s.key, release) if resmoked else None
        if resmoked and candidate is None:
            note = f"the re-smoke at {release} recorded no measurement: nothing to compare"
            s.speed = {"channel": channel, "verdict": "not compared", "summary": note}
            continue
        compared = against_channel(store, record, s.key, candidate, base_smoke)
        s.speed = {"channel": channel, "base": compared.base, "verdict": compared.verdict, "summary": compared.summary}


def _resmoke(store: ArtifactStore, key: str, release: str) -> SmokeRecord | None:
    """Build `key`'s newest attestation at `release` as a smoke result: its measurement and numerics
    (`Attestation.measurement`, `.numerics`: absent from an attestation made before the protocol)."""
    from neuronforge.artifacts.attestations import attestations_of

    record = attestations_of(store, key)
    newest = next((a for a in record.attestations if a.release == release), None) if record else None
    measured = getattr(newest, "measurement", None)
    if newest is None or measured is None:
        return None
    return SmokeRecord.model_validate(
        {"passed": newest.passed, "measurement": measured, "numerics": getattr(newest, "numerics", None)}
    )
