"""A serving line's lifecycle per instance family: which SDK releases still serve a family, and
how (active, maintenance, frozen, end of support), each statement with its source.

AWS moves families off a stack before it ends the stack: NxD Inference stopped serving Inf2/Trn1
in SDK 2.29 and ends on Trn2/Trn3 in 2.34, while the vLLM Neuron plugin without NxD Inference has
served only Trn2/Trn3 since its first release. A recompile on an SDK upgrade therefore cannot just
take the newest release of a target's line: for an inf2 target that release may not exist, and for
a trn2 target the line may be the one to leave. This module holds those facts as data (the profile
modules declare their line's `Lifecycle`; the registry collects them), and the answers the planner,
`neuronforge profiles` and the upgrade plan (`neuronforge.farm.upgrades`) read from it.

Value types only: nothing here resolves a profile (the registry does).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum


class Status(StrEnum):
    """What a release of the line is for a family."""

    ACTIVE = "active"  # releases of the line serve the family and gain features
    MAINTENANCE = "maintenance"  # releases still serve the family: fixes only, no features
    FROZEN = "frozen"  # no newer release serves the family; the last one that did stays usable
    END_OF_SUPPORT = "end-of-support"  # no release is supported for the family any more: move off it
    NOT_SERVED = "not-served"  # the line does not serve the family at this release


# What each status means for a target on the line (the profiles page and `neuronforge profiles`).
MEANING = {
    Status.ACTIVE: "new releases serve the family",
    Status.MAINTENANCE: "releases still serve the family, fixes only",
    Status.FROZEN: "no newer release serves the family; pin the last one that did",
    Status.END_OF_SUPPORT: "no longer supported for the family; move to another line",
    Status.NOT_SERVED: "the line does not serve the family",
}
SHORT = {
    Status.ACTIVE: "active",
    Status.MAINTENANCE: "maint.",
    Status.FROZEN: "frozen",
    Status.END_OF_SUPPORT: "EOS",
    Status.NOT_SERVED: "-",
}


def release_key(release: str) -> tuple[int, ...]:
    """`2.31` and `2.31.0` compare equal; `2.31.1` is after both."""
    parts = [int(x) if x.isdigit() else -1 for x in release.split(".")]
    while len(parts) > 2 and parts[-1] == 0:
        parts.pop()
    return tuple(parts)


def series(release: str) -> str:
    """`2.31.1` -> `2.31`: releases are spoken of by series."""
    return ".".join(release.split(".")[:2])


@dataclass(frozen=True)
class Source:
    """Where a statement comes from: a page (its title and address) and the words it says."""

    title: str
    url: str
    quote: str = ""

    def cite(self) -> str:
        return f"{self.title} ({self.url})"


@dataclass(frozen=True)
class Dispute:
    """Another AWS statement that reads the phase otherwise (`status`: what it would make it), with
    its source: the user may choose that reading, with the consequence the phase's source states."""

    status: str
    source: Source
    note: str = ""


@dataclass(frozen=True)
class Phase:
    """From SDK release `since` on (until the next phase), the line is `status` for the family."""

    since: str
    status: Status
    source: Source
    note: str = ""
    disputed: tuple[Dispute, ...] = ()

    @property
    def disputed_serving(self) -> bool:
        """Whether another statement reads the family as served where this phase does not serve it."""
        serving = (Status.ACTIVE.value, Status.MAINTENANCE.value)
        return self.status.value not in serving and any(d.status in serving for d in self.disputed)


@dataclass(frozen=True)
class FamilyLifecycle:
    """One family's phases on a line (oldest first), the last release of the line that serves it
    (None: the line still ships new releases for it) and the line it moves to when this one ends
    for it (None: no line of ours serves it further)."""

    families: tuple[str, ...]  # instance families that share these facts (trn1 and trn1n)
    phases: tuple[Phase, ...]
    last_release: str | None = None  # an SDK series ("2.28"): its patch releases serve the family too
    moves_to: str | None = None

    def phase(self, release: str) -> Phase | None:
        """The phase `release` falls in (None: before the line served the family)."""
        found = None
        for p in self.phases:
            if release_key(p.since) <= release_key(release):
                found = p
        return found

    def past_last(self, release: str) -> bool:
        """Whether `release` (a release or a series) comes after the last release that serves the
        family: no release of the line will serve it there."""
        return self.last_release is not None and release_key(series(release)) > release_key(self.last_release)

    def serves(self, release: str) -> bool:
        """Whether a release of the line at `release` serves the family (its last release or before,
        and in a serving phase)."""
        phase = self.phase(release)
        return phase is not None and phase.status is not Status.NOT_SERVED and not self.past_last(release)


@dataclass(frozen=True)
class LineRelease:
    """One SDK release of a line, with what it shipped (component versions, in words); registered
    profile versions are the ones neuronforge builds for, the rest are listed so a user can tell."""

    sdk: str
    date: str  # YYYY-MM-DD
    ships: str
    source: Source


@dataclass(frozen=True)
class Lifecycle:
    """A profile line's releases and, per family, its status by SDK release."""

    line: str  # the profile name
    families: tuple[FamilyLifecycle, ...]
    releases: tuple[LineRelease, ...] = ()
    summary: str = ""  # one line: where the line stands

    def of(self, family: str) -> FamilyLifecycle | None:
        return next((f for f in self.families if family in f.families), None)

    def phase(self, family: str, release: str) -> Phase | None:
        f = self.of(family)
        return None if f is None else f.phase(release)

    def status(self, family: str, release: str) -> Status:
        phase = self.phase(family, release)
        return Status.NOT_SERVED if phase is None else phase.status

    @property
    def newest(self) -> str | None:
        """The newest SDK release the line shipped (None: none listed)."""
        return max((r.sdk for r in self.releases), key=release_key, default=None)

    def sources(self) -> list[Source]:
        """Every source the line's statements cite, in first-cited order, without repeats."""
        seen: dict[str, Source] = {}
        for f in self.families:
            for p in f.phases:
                seen.setdefault(p.source.url, p.source)
                for d in p.disputed:
                    seen.setdefault(d.source.url, d.source)
        for r in self.releases:
            seen.setdefault(r.source.url, r.source)
        return list(seen.values())


@dataclass(frozen=True)
class SdkRelease:
    """A Neuron SDK release as neuronforge's profile data knows it."""

    version: str
    date: str  # YYYY-MM-DD as its release notes date it; "" when no source read gives it (or only announced)
    neuronx_cc: str = ""
    released: bool = True
    notes: tuple[str, ...] = ()  # what is known of it (for an announced release: all that is known)
    sources: tuple[Source, ...] = field(default_factory=tuple)


def columns(releases: tuple[SdkRelease, ...]) -> list[tuple[str, bool]]:
    """The SDK series a status table shows, oldest first, each with whether it is only announced."""
    out: dict[str, bool] = {}
    for r in sorted(releases, key=lambda r: release_key(r.version)):
        out.setdefault(series(r.version), not r.released)
    return list(out.items())


NO_RELEASE_YET = "none yet"  # a serving status past the line's newest release: no release for that SDK yet


def status_row(family: FamilyLifecycle, cols: list[tuple[str, bool]], newest: str | None = None) -> list[str]:
    """The family's status at each column: its short word, `(last)` on the last release that serves
    it, `none yet` where the line has shipped no release for that SDK (`newest`: its newest release)
    although nothing says it stopped serving the family."""
    cells = []
    for col, _ in cols:
        phase = family.phase(col)
        status = Status.NOT_SERVED if phase is None else phase.status
        if family.past_last(col) and status is not Status.NOT_SERVED:
            status = status if status is Status.END_OF_SUPPORT else Status.FROZEN
        if newest and status in (Status.ACTIVE, Status.MAINTENANCE) and release_key(col) > release_key(series(newest)):
            cells.append(NO_RELEASE_YET)
            continue
        cell = SHORT[status]
        if family.last_release and release_key(col) == release_key(family.last_release):
            cell += " (last)"
        cells.append(cell)
    return cells


def phase_lines(family: FamilyLifecycle, cite: dict[str, int]) -> str:
    """`active from 2.26 [1]; frozen from 2.29 [2] (why)`: each phase with the number of its source."""
    parts = []
    for p in family.phases:
        note = f" ({p.note})" if p.note else ""
        disputed = "".join(f"; disputed: {d.status} [{cite[d.source.url]}] ({d.note})" for d in p.disputed)
        parts.append(f"{p.status.value} from {p.since} [{cite[p.source.url]}]{note}{disputed}")
    return "; ".join(parts)
