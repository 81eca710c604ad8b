"""What a newer Neuron SDK release costs a build that already exists, from what changed between the
release it was built on and the new one, and what the build's serving line reads of each package
(`lines.<line>.reads` in the release table, `records.sdk_release.PackageReads`):

- `nothing`: no package the line's builds, keys or loads read changed;
- `re-smoke`: only packages a load reads (runtime, collectives, driver, OCI hook) changed: the
  published build is smoke-tested on the new release's Neuron hosts and attested, not compiled;
- `re-verify`: a package the consumer's cache key may hash changed, the compiler did not: the
  consumer's own re-trace in the new release's image against the published cache decides (every key
  found: attested; one missing: rebuild);
- `rebuild`: the compiler or a library that shapes the graphs changed — or a package the line does not
  classify (the safe side; named, so the table gains its role).

A package listed by one release and not by the other is a change: an entry that does not say is not
evidence that nothing moved. Pure: the release entries and the line's roles in, the decision out.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from neuronforge.records.sdk_release import ROLES, PackageReads, SdkReleaseEntry

if TYPE_CHECKING:
    from neuronforge.profiles.release_table import Table

NOTHING, RESMOKE, REVERIFY, REBUILD = "nothing", "re-smoke", "re-verify", "rebuild"
# The decision each role's change forces, cheapest first (`ROLES` order); an unclassified package rebuilds.
BY_ROLE = {"unread": NOTHING, "load": RESMOKE, "key": REVERIFY, "build": REBUILD}
UNCLASSIFIED = "unclassified"
COST = (NOTHING, RESMOKE, REVERIFY, REBUILD)


@dataclass(frozen=True)
class PackageDecision:
    """The decision for one line between two releases, and the package changes that made it."""

    decision: str  # nothing | re-smoke | re-verify | rebuild
    base: str  # the release the build was made on
    release: str  # the release aimed at
    deciding: tuple[str, ...] = ()  # "name old -> new" of the changes of the deciding role
    changed: dict[str, tuple[str, ...]] = field(default_factory=dict)  # role (or "unclassified") -> changes
    unverified: tuple[str, ...] = ()  # the deciding role's readings that are not facts (`PackageReads.verified`)

    def sentence(self) -> str:
        what = "; ".join(self.deciding)
        return {
            NOTHING: f"nothing the line reads changed from {self.base} to {self.release}",
            RESMOKE: f"only what a load reads changed ({what}): smoke the published build on {self.release}",
            REVERIFY: (
                f"a library the consumer's key may hash changed, the compiler did not ({what}): re-trace the "
                f"published build in {self.release}'s image, compiling forbidden"
            ),
            REBUILD: f"what the build reads changed ({what})",
        }[self.decision]


def _changes(base: SdkReleaseEntry, new: SdkReleaseEntry) -> list[tuple[str, str, str]]:
    """(pip name, old, new) for every package whose version differs or that one entry lacks."""
    old = {p.name: p for p in base.packages}
    now = {p.name: p for p in new.packages}
    out = []
    for name in sorted(old.keys() | now.keys()):
        a, b = old.get(name), now.get(name)
        if a is not None and b is not None and a.full == b.full:
            continue
        pip = (b or a).distribution  # type: ignore[union-attr]
        out.append((pip, a.full if a else f"(not in {base.version})", b.full if b else f"(not in {new.version})"))
    return out


def decide_packages(base: SdkReleaseEntry, new: SdkReleaseEntry, reads: tuple[PackageReads, ...]) -> PackageDecision:
    """The decision for a build of a line made on `base`, at release `new`, by the line's `reads`."""
    roles = {name: r for r in reads for name in r.packages}
    changed: dict[str, list[str]] = {}
    unverified: dict[str, set[str]] = {}
    for pip, old, now in _changes(base, new):
        r = roles.get(pip)
        role = r.role if r is not None else UNCLASSIFIED
        note = " (not classified for the line: treated as read by the build)" if r is None else ""
        changed.setdefault(role, []).append(f"{pip} {old} -> {now}{note}")
        if r is not None and not r.verified:
            unverified.setdefault(role, set()).add(r.why)
    decision = max((BY_ROLE.get(role, REBUILD) for role in changed), key=COST.index, default=NOTHING)
    deciding_roles = [role for role in (*ROLES, UNCLASSIFIED) if BY_ROLE.get(role, REBUILD) == decision]
    deciding = tuple(c for role in deciding_roles for c in changed.get(role, ()))
    if decision == NOTHING:
        deciding = ()
    return PackageDecision(
        decision,
        base.version,
        new.version,
        deciding,
        {role: tuple(c) for role, c in changed.items()},
        tuple(sorted(w for role in deciding_roles for w in unverified.get(role, ()))),
    )


def between(table: Table, line: str, built_on: str, release: str) -> PackageDecision | None:
    """The decision for a build of `line` made on `built_on`, at `release`, from `table`'s entries and the
    line's roles; None when the table knows either release or the line not (the callers say so their way:
    `upgrades` as unknown, `attest` as not attestable)."""
    base, new = table.entry(built_on), table.entry(release)
    if base is None or new is None or line not in table.lines:
        return None
    return decide_packages(base, new, table.lines[line].reads)
