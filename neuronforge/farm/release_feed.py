"""The release feed: every Neuron SDK release AWS's manifest lists that neuronforge does not know yet,
proposed as an entry of the release table (`neuronforge releases sync`), reviewed (`releases accept`,
`releases reject`) and, once accepted, known to every worker and the recompile DAG from the store
(`known_table`) without a neuronforge upgrade.

A proposal holds what the manifest says — every package with its version and `supported_instances` —
and nothing it does not: the release's date, its DLC images, what it ships for each serving line and
that line's status per family, and a package a line ships that the manifest does not list (vLLM) are
left empty and named in `needs_review` with why, never guessed. Its package changes are against the
release before it (from the manifest where it lists that one; else the table's entry).

A manifest is refused whole, with one line and nothing written, when it does not parse
(`release_manifest.ManifestError`) or lists a release neuronforge knows with other packages: a package
the known entry records (or a reading it records as disputed) that the manifest gives another version
of. Releases older than the oldest the table knows are not proposed (neuronforge never built for them).
"""

from __future__ import annotations

import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from neuronforge.artifacts import layout, release_entries
from neuronforge.artifacts.channels import mover, now
from neuronforge.common import advice
from neuronforge.common.deployment_names import RECOMPILE_DAG
from neuronforge.common.errors import InvalidInput, NeuronforgeError, ServiceUnreachable
from neuronforge.common.one_line import one_line
from neuronforge.profiles.lifecycle import Status, release_key, series
from neuronforge.profiles.release_manifest import (
    MAX_BYTES,
    UPSTREAM,
    ManifestError,
    ManifestRelease,
    ReleaseManifest,
    distribution,
    parse,
)
from neuronforge.profiles.release_table import Table, extended, lifecycle, load
from neuronforge.records.proposed_release import (
    ACCEPTED,
    PROPOSED,
    REJECTED,
    FeedDecision,
    ManifestOrigin,
    NeedsReview,
    PackageChange,
    ProposedRelease,
    Reviewed,
)
from neuronforge.records.sdk_release import Package, SdkReleaseEntry, SourcePage
from neuronforge.stores import ArtifactStore, NotFound, open_location

HTTP_TIMEOUT_S = 30.0
FEED_SOURCE = "feed-manifest"  # an entry's own source (the manifest it was read from): `feed-manifest-<version>`
SHIPPED = "shipped"  # a release of the package's table: shipped with neuronforge


# -- where a manifest is read -----------------------------------------------------------------------
def read_manifest(store: ArtifactStore, where: str | None = None) -> ReleaseManifest:
    """The manifest at `where` — a path, `file://…`, `s3://bucket/key`, `https://…` (`http://` too) — or,
    None, the store's mirror (`sdk-releases/n2-manifest.json`), else AWS's upstream file."""
    if not where:
        try:
            raw, _ = store.read_capped(layout.SDK_RELEASE_MANIFEST, MAX_BYTES)
        except NotFound:
            return parse(_http(UPSTREAM), UPSTREAM)
        return parse(raw, store.uri(layout.SDK_RELEASE_MANIFEST))
    scheme = where.partition("://")[0] if "://" in where else ""
    if scheme in ("https", "http"):
        return parse(_http(where), where)
    if scheme and scheme != "file":
        folder, _, name = where.rpartition("/")
        try:
            raw, _ = open_location(folder, probe=True).read_capped(name, MAX_BYTES)
        except NotFound:
            raise InvalidInput(f"--manifest {where}: no such object") from None
        return parse(raw, where)
    path = Path(where.removeprefix("file://")).expanduser()
    try:
        with path.open("rb") as f:
            raw = f.read(MAX_BYTES + 1)
    except OSError as exc:
        raise InvalidInput(f"--manifest {where}: {exc.strerror or exc}") from None
    return parse(raw, path.resolve().as_uri())


def _http(url: str) -> bytes:
    """At most MAX_BYTES + 1 bytes of `url` (parse refuses more), within HTTP_TIMEOUT_S."""
    try:
        with urllib.request.urlopen(url, timeout=HTTP_TIMEOUT_S) as answer:
            return answer.read(MAX_BYTES + 1)
    except (urllib.error.URLError, OSError, ValueError) as exc:
        why = getattr(exc, "reason", None) or exc
        raise ServiceUnreachable(
            f"the Neuron SDK release manifest at {url} could not be read ({why}); pass a copy with "
            "--manifest PATH (or mirror it to the store's sdk-releases/n2-manifest.json)"
        ) from None


# -- what neuronforge knows: the package's table plus the store's accepted releases ------------------
def known_table(store: ArtifactStore, leaving: str = "") -> Table:
    """The release table with the store's accepted releases (`release_table.extended`): read once, at
    the edge (the CLI command, the DAG task), and put in effect for what it decides
    (`profiles.sdk_releases.in_effect(known_table(store))`). `leaving`: a release left out (one being
    accepted again, checked against the others)."""
    held, _ = release_entries.listing(store)
    held = [r for r in held if r.state == ACCEPTED and r.version != leaving]
    accepted = [r.entry for r in sorted(held, key=lambda r: release_key(r.version))]
    return extended(load(), accepted, store.uri(layout.SDK_RELEASE_ENTRIES))


# -- a proposal ---------------------------------------------------------------------------------------
def _versions(entry: SdkReleaseEntry) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for p in entry.packages:
        out.setdefault(distribution(p.distribution), set()).add(p.version)
    return out


def differing(entry: SdkReleaseEntry, release: ManifestRelease) -> list[str]:
    """The packages a known entry records that the manifest gives other versions of (a reading the
    entry records as disputed agrees: the table knows of the disagreement). Packages that share a pip
    name (the vLLM Neuron plugin of the NxD Inference line and the one without it, both `vllm-neuron` at
    2.31) are one distribution: the manifest agrees when it lists a version of any of them."""
    listed = release.versions()
    known: dict[str, set[str]] = {}
    for p in entry.packages:
        known.setdefault(distribution(p.distribution), set()).update({p.version, *(r.value for r in p.disputed)})
    out = []
    for p in entry.packages:
        theirs = listed.get(distribution(p.distribution))
        if theirs and not (known[distribution(p.distribution)] & theirs):
            out.append(f"{p.name} (known {p.version}, manifest {', '.join(sorted(theirs))})")
    return out


def changes(before: dict[str, set[str]], after: dict[str, set[str]]) -> tuple[PackageChange, ...]:
    """Per package (by distribution): added, removed, or changed (one version for another)."""
    out = []
    for name in sorted(set(before) | set(after)):
        gone, new = (
            sorted(before.get(name, set()) - after.get(name, set())),
            sorted(after.get(name, set()) - before.get(name, set())),
        )
        if len(gone) == 1 and len(new) == 1:
            out.append(PackageChange(name=name, before=gone[0], after=new[0]))
            continue
        out += [PackageChange(name=name, before=v) for v in gone] + [PackageChange(name=name, after=v) for v in new]
    return tuple(out)


def _origin(manifest: ReleaseManifest) -> ManifestOrigin:
    return ManifestOrigin(
        uri=manifest.where, sha256=manifest.sha256, manifest_version=manifest.version, manifest_date=manifest.date
    )


def _entry(release: ManifestRelease, manifest: ReleaseManifest) -> SdkReleaseEntry:
    """What the manifest says of `release`, as a table entry citing the manifest (its own source, under an
    id of its release: two accepted entries from two manifests each keep theirs)."""
    own = f"{FEED_SOURCE}-{release.version}"
    named: set[str] = set()
    packages = []
    for p in release.packages:
        name, pip = p.name, ""
        if distribution(name) in named:  # a second version of one package (torch-xla 2.11, 2.12): as the table names it
            name, pip = f"{p.name}-{series(p.version)}", p.name
        named.add(distribution(p.name))
        packages.append(Package(name=name, pip=pip, version=p.version, source=own, instances=p.instances))
    title = (
        "Neuron SDK release manifest (n2-manifest.json"
        + (f", manifest_version {manifest.version}" if manifest.version else "")
        + (f", {manifest.date}" if manifest.date else "")
        + ")"
    )
    return SdkReleaseEntry(
        version=release.version,
        date_note=f"the release manifest gives no release date (the manifest is of {manifest.date or 'no date'})",
        sources=(own,),
        notes=("read from AWS's release manifest; proposed by the release feed (`releases sync`)",),
        packages=tuple(packages),
        own_sources={own: SourcePage(title=title, url=manifest.where, quote=f"sha256 {manifest.sha256}")},
    )


def _needs_review(release: ManifestRelease, table: Table) -> tuple[NeedsReview, ...]:
    """What the manifest does not carry, for each line that still serves a family at `release`."""
    out = [
        NeedsReview(what="date", why="the manifest gives no release date: read it from the release notes"),
        NeedsReview(
            what="images",
            why="the manifest names no container image: the release's DLC tags (and the worker image built FROM "
            "one) are read from its release notes or aws-neuron/deep-learning-containers",
        ),
    ]
    listed = release.versions()
    for line in table.lines:
        lc = lifecycle(line, table)
        served = [f for f in lc.families if f.serves(release.version)]
        if not served:
            continue
        groups = ", ".join("/".join(f.families) for f in served)
        out.append(
            NeedsReview(
                what=f"lines.{line}",
                why=f"what the release ships for {line} and its status for {groups}: the manifest carries no "
                "line statuses (until reviewed, each family keeps the status of the release before)",
            )
        )
        shipped = next((e for e in reversed(table.entries) if e.lines.get(line) and e.lines[line].ships), None)
        latest = max((e.version for e in table.entries if e.released), key=release_key)
        if shipped is not None and series(shipped.version) != series(latest):
            shipped = None  # the line shipped nothing in the newest series: a release without it is no news
        for name in shipped.lines[line].ships if shipped else ():
            p = shipped.package(name)  # type: ignore[union-attr]
            if p is not None and distribution(p.distribution) not in listed:
                out.append(
                    NeedsReview(
                        what=f"packages.{name}",
                        why=f"{table.display.get(name, name)} ({line}): not in the manifest; SDK {shipped.version} "  # type: ignore[union-attr]
                        f"shipped {p.version}",
                    )
                )
    return tuple(out)


@dataclass
class Synced:
    """One release of the manifest the sync looked at, and what it did."""

    version: str
    outcome: str  # proposed | updated | unchanged | rejected (kept out) | accepted
    record: ProposedRelease

    @property
    def line(self) -> str:
        r = self.record
        head = f"Neuron {self.version}: {self.outcome}"
        if self.outcome in ("unchanged", "rejected"):
            return head + (f" ({r.current.reason})" if self.outcome == "rejected" and r.current.reason else "")
        base = f" against {r.base}" if r.base else ""
        return (
            head
            + f"; {len(r.changes)} package change(s){base}"
            + (f"; needs review: {', '.join(n.what for n in r.needs_review)}" if r.state == PROPOSED else "")
        )

    def to_json(self) -> dict[str, Any]:
        return {"version": self.version, "outcome": self.outcome, "record": self.record.to_json()}


@dataclass
class SyncResult:
    manifest: ManifestOrigin
    releases: list[Synced] = field(default_factory=list)
    older: int = 0  # releases older than the table's oldest, not proposed

    @property
    def written(self) -> list[Synced]:
        return [s for s in self.releases if s.outcome in ("proposed", "updated", "accepted")]

    def to_json(self) -> dict[str, Any]:
        return {
            "manifest": self.manifest.model_dump(),
            "releases": [s.to_json() for s in self.releases],
            "older_not_proposed": self.older,
        }


def plan(manifest: ReleaseManifest, table: Table, by: str, at: str) -> tuple[list[ProposedRelease], int]:
    """The proposals `manifest` makes against `table` (what neuronforge knows), oldest first, and how
    many of its releases are older than the table's oldest; a release the table knows with other
    packages refuses the manifest (`ManifestError`, naming them)."""
    oldest = release_key(table.entries[0].version)
    known = {release_key(e.version): e for e in table.entries if e.released}
    for r in manifest.releases:
        entry = known.get(release_key(r.version))
        differ = differing(entry, r) if entry is not None else []
        if differ:
            raise ManifestError(
                f"{manifest.where}: release {r.version} is known with other packages: {'; '.join(differ)} — "
                f"nothing written; record the manifest's reading as disputed in its release file "
                f"(neuronforge/profiles/releases/{entry.version}.toml) or pass a manifest that agrees"  # type: ignore[union-attr]
            )
    new = [r for r in manifest.releases if release_key(r.version) not in known and release_key(r.version) > oldest]
    older = sum(1 for r in manifest.releases if release_key(r.version) < oldest)
    before = [*((k, e.version) for k, e in known.items()), *((release_key(r.version), r.version) for r in new)]
    out = []
    for r in new:
        earlier = [v for k, v in before if k < release_key(r.version)]
        base = max(earlier, key=release_key) if earlier else ""
        listed = manifest.release(base) if base else None
        base_versions = listed.versions() if listed else (_versions(known[release_key(base)]) if base else {})
        out.append(
            ProposedRelease(
                version=r.version,
                entry=_entry(r, manifest),
                base=base,
                changes=changes(base_versions, r.versions()),
                needs_review=_needs_review(r, table),
                manifest=_origin(manifest),
                current=FeedDecision(state=PROPOSED, by=by, at=at),  # type: ignore[arg-type]
            )
        )
    return out, older


def sync(store: ArtifactStore, where: str | None = None, by: str = "", accept: str | None = None) -> SyncResult:
    """Read the manifest, propose every release it adds (`plan`), write each proposal where it changed
    (by compare-and-swap: a racing sync's write is read again), then accept `accept` when given."""
    by, at = by or mover(), now()
    manifest = read_manifest(store, where)
    proposals, older = plan(manifest, known_table(store), by, at)
    result = SyncResult(_origin(manifest), older=older)
    if accept and accept not in {p.version for p in proposals} and release_entries.get(store, accept) is None:
        # refused before anything is written: a sync asked to accept what nobody proposed writes nothing
        raise InvalidInput(
            f"--accept {accept}: the manifest ({result.manifest.uri}) does not list SDK {accept} and the store holds "
            f"no proposal of it: give a release the manifest lists, or leave --accept out"
        )
    for proposal in proposals:
        result.releases.append(_write(store, proposal, by, at))
    if accept:
        result.releases = [s for s in result.releases if s.version != accept]
        result.releases.append(Synced(accept, "accepted", decide(store, accept, ACCEPTED, by, "")))
    return result


def _write(store: ArtifactStore, proposal: ProposedRelease, by: str, at: str) -> Synced:
    for _ in range(release_entries.TRIES):
        held = release_entries.get(store, proposal.version)
        if held is None:
            if release_entries.put(store, proposal, None):
                return Synced(proposal.version, "proposed", proposal)
            continue
        record, version = held
        if record.same_proposal(proposal) or record.state == ACCEPTED:
            # the same release again (a rejected one stays out; an accepted one is known: `plan` skips it)
            return Synced(proposal.version, "rejected" if record.state == REJECTED else "unchanged", record)
        why = "the manifest changed" + (
            f" since it was rejected ({record.current.reason})" if record.state == REJECTED else ""
        )
        updated = proposal.model_copy(
            update={
                "current": FeedDecision(state=PROPOSED, by=by, at=at, reason=why),  # type: ignore[arg-type]
                "history": (record.current, *record.history),
            }
        )
        if release_entries.put(store, updated, version):
            return Synced(proposal.version, "updated", updated)
    raise InvalidInput(f"SDK {proposal.version}: {release_entries.TRIES} conflicting syncs in a row; sync again")


def decide(store: ArtifactStore, version: str, state: str, by: str, reason: str, same_as: str = "") -> ProposedRelease:
    """Accept (the release is known from now on: checked to extend the table first) or reject it.
    `same_as` (accepting): every package and line the manifest did not carry is taken as release
    `same_as` has it (`settle_same_as`), recorded with who decided."""
    one_line("--reason", reason)
    one_line("--by", by)
    by, at = by or mover(), now()
    held = release_entries.get(store, version)
    table = known_table(store, leaving=version)
    review = None
    if same_as:
        if state != ACCEPTED:
            raise InvalidInput("--same-as settles what a release needs reviewed as it is accepted: give it to accept")

        def review(record: ProposedRelease) -> dict[str, Any]:
            return settle_same_as(record, table, same_as, by, at, store.root_uri)

    if state == ACCEPTED and held is not None:
        # refused here, before anything is written: the entry as settled must extend the table
        entry = review(held[0])["entry"] if review else held[0].entry
        extended(table, [entry], store.uri(layout.sdk_release_entry(version)))
    return release_entries.decide(store, version, state, by, reason, at, review)


# What `--same-as` settles: a package, a line's release (a date or an image tag is the release's own).
SETTLED_BY_ANOTHER_RELEASE = ("packages.", "lines.")


def settle_same_as(
    record: ProposedRelease, table: Table, same_as: str, by: str, at: str, store: str | None = None
) -> dict[str, Any]:
    """The fields of `record` that settle, as release `same_as` of `table` has them, every package and
    line it needs reviewed (`SETTLED_BY_ANOTHER_RELEASE`): its `entry` with them, what still needs
    review, and the `reviewed` fields with who decided. A patch release's notes say "All other packages
    are the same as in Neuron <R>": this records that reading instead of leaving the package absent (an
    absent package counts as changed, `upgrade_decisions`: the line would rebuild). `store`: the URI of
    the store the release is decided in, which the commands its refusals suggest read."""
    source = table.entry(same_as)
    if source is None or not source.released:
        raise InvalidInput(
            f"--same-as {same_as}: not a release neuronforge knows; {advice.command('releases ls', store=store)} lists "
            "the ones it does"
        )
    if release_key(same_as) >= release_key(record.version):
        raise InvalidInput(f"--same-as {same_as}: not older than {record.version}; name the release it follows")
    settled = [n for n in record.needs_review if n.what.startswith(SETTLED_BY_ANOTHER_RELEASE)]
    if not settled:
        raise InvalidInput(
            f"SDK {record.version}: no package or line of it needs review, so --same-as {same_as} settles nothing; "
            f"{advice.command('releases accept', record.version, store=store)} without it"
        )
    entry = record.entry
    packages, lines, cited = list(entry.packages), dict(entry.lines), set()
    for n in settled:
        kind, name = n.what.split(".", 1)
        if kind == "packages":
            package = source.package(name)
            if package is None:
                raise InvalidInput(
                    f"--same-as {same_as}: SDK {same_as} lists no {name}, so it cannot settle {n.what} of "
                    f"{record.version}; name a release that ships it ({advice.command('releases ls', store=store)})"
                )
            if all(p.name != package.name for p in packages):  # a line settled before may have brought it
                packages.append(package)
                cited.add(package.source)
        else:
            line = source.lines.get(name)
            if line is not None:  # None: it ships nothing for the line and keeps its statuses, as `same_as` did
                lines[name] = line.model_copy(update={"profile": None})  # a fed release is no registered profile
                cited |= {line.source, *(f.source for f in line.status.values())}
                listed = {p.distribution for p in packages}
                for shipped in (source.package(s) for s in line.ships):  # what it ships, where the manifest lacks it
                    if shipped is not None and shipped.distribution not in listed:
                        packages.append(shipped)
                        cited.add(shipped.source)
    own = {**entry.own_sources, **{k: v for k, v in source.own_sources.items() if k in cited}}
    try:
        filled = SdkReleaseEntry.model_validate(
            {**entry.model_dump(), "packages": packages, "lines": lines, "own_sources": own}
        )
    except ValidationError as exc:
        first = exc.errors()[0]["msg"].removeprefix("Value error, ") if exc.errors() else str(exc)
        why = f"--same-as {same_as}: {record.version} with {same_as}'s packages does not read: {first}"
        raise InvalidInput(why) from None
    return {
        "entry": filled,
        "needs_review": tuple(n for n in record.needs_review if n not in settled),
        "reviewed": (*record.reviewed, *(Reviewed(what=n.what, same_as=same_as, by=by, at=at) for n in settled)),
    }


# -- what `releases ls` shows ---------------------------------------------------------------------------
@dataclass
class Row:
    version: str
    state: str  # shipped | accepted | proposed | rejected
    date: str
    compiler: str
    statuses: dict[str, dict[str, str]]  # line -> family group -> status ("needs review" for a proposal)
    needs_review: list[str] = field(default_factory=list)
    released: bool = True

    def to_json(self) -> dict[str, Any]:
        return {
            "version": self.version,
            "state": self.state,
            "date": self.date,
            "neuronx_cc": self.compiler,
            "released": self.released,
            "lines": self.statuses,
            "needs_review": self.needs_review,
        }


def rows(store: ArtifactStore) -> tuple[list[Row], list[Exception]]:
    """Every release the table and the store hold, oldest first, and the store's records that do not read."""
    held, damaged = release_entries.listing(store)
    table = known_table(store)
    cycles = {line: lifecycle(line, table) for line in table.lines}
    accepted = {r.version for r in held if r.state == ACCEPTED}
    out: list[Row] = []

    def statuses(version: str, review: tuple[str, ...] = ()) -> dict[str, dict[str, str]]:
        """Each line's status per family at `version` (a line ended for every family left out); a line a
        proposal flags: the status carried from the release before, marked as needing review."""
        found: dict[str, dict[str, str]] = {}
        for line, lc in cycles.items():
            for fam in lc.families:
                phase = fam.phase(version)
                if phase is None or phase.status is Status.NOT_SERVED:
                    continue
                flag = " (needs review)" if f"lines.{line}" in review else ""
                found.setdefault(line, {})["/".join(fam.families)] = phase.status.value + flag
        return found

    for e in table.entries:
        cc = e.package("neuronx-cc")
        state = ACCEPTED if e.version in accepted else SHIPPED
        date = e.date or ("announced" if not e.released else "")
        out.append(Row(e.version, state, date, cc.version if cc else "", statuses(e.version), released=e.released))
    for r in held:
        if r.state == ACCEPTED:
            continue
        cc = r.entry.package("neuronx-cc")
        review = [n.what for n in r.needs_review] if r.state == PROPOSED else []
        out.append(
            Row(
                r.version,
                r.state,
                r.entry.date,
                cc.version if cc else "",
                statuses(r.version, tuple(review)),
                review,
            )
        )
    out.sort(key=lambda row: release_key(row.version))
    return out, list(damaged)


def proposed(store: ArtifactStore) -> list[ProposedRelease]:
    """The store's releases still waiting for review, oldest first."""
    held, _ = release_entries.listing(store)
    return sorted((r for r in held if r.state == PROPOSED), key=lambda r: release_key(r.version))


def accept_command(version: str, store: ArtifactStore) -> str:
    """The command that accepts proposed release `version` of `store`, backticked (`advice.command`)."""
    return advice.command("releases accept", version, store=store.root_uri)


def proposed_line(record: ProposedRelease, store: ArtifactStore) -> str:
    """How a report names a proposed release: what needs review, and the command that accepts it."""
    review = ", ".join(n.what for n in record.needs_review)
    accept = accept_command(record.version, store)
    return f"Neuron {record.version} proposed, needs review: {review}; accept with {accept}"


def sync_mirror(store: ArtifactStore, by: str = RECOMPILE_DAG) -> dict[str, Any] | None:
    """The recompile DAG's sync, before it decides: from the store's mirror only (None when there is
    none: a task reads no network), and what the report says of it — the manifest, each release still
    proposed (`proposed_line`) or the problem. A sync that fails is the problem, never the run's failure."""
    if not store.exists(layout.SDK_RELEASE_MANIFEST):
        return None
    said: dict[str, Any] = {"manifest": store.uri(layout.SDK_RELEASE_MANIFEST), "proposed": [], "problem": ""}
    try:
        said["synced"] = [s.line for s in sync(store, None, by=by).releases]
    except NeuronforgeError as exc:
        said["problem"] = str(exc)
    said["proposed"] = [proposed_line(r, store) for r in proposed(store)]
    return said
