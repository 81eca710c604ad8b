"""The Neuron SDK releases neuronforge knows, as the upgrade asks for them: derived from the release
table (`neuronforge.profiles.release_table`, one data file per release with its sources).

An upgrade aims at an SDK release; one not in the table is reported as unknown with what is known
of it (an announced release: the announcements), never guessed at.

A store may add releases (`neuronforge releases sync --accept`: accepted entries, `farm.release_feed`).
The edge — the CLI command, the DAG task — reads them once and puts them in effect for what it runs
(`in_effect`); below it, every question here is answered from the releases in effect (the table's alone
unless an edge said otherwise), so a decision never reads a store by itself.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

from neuronforge.profiles import release_table
from neuronforge.profiles.lifecycle import SdkRelease, release_key, series
from neuronforge.profiles.release_table import Table, sdk_releases

RELEASES: tuple[SdkRelease, ...] = sdk_releases()
_IN_EFFECT: ContextVar[tuple[SdkRelease, ...]] = ContextVar("sdk_releases", default=RELEASES)


@contextmanager
def in_effect(table: Table) -> Iterator[None]:
    """`table` (the package's plus a store's accepted releases) answers every question here, and every
    package decision (`release_table.current`), until the block ends."""
    token = _IN_EFFECT.set(sdk_releases(table))
    try:
        with release_table.in_effect(table):
            yield
    finally:
        _IN_EFFECT.reset(token)


def current() -> tuple[SdkRelease, ...]:
    return _IN_EFFECT.get()


def known_release(version: str, releases: tuple[SdkRelease, ...] | None = None) -> SdkRelease | None:
    """The released SDK `version` names (`2.31` names its newest patch, 2.31.1, as releases are
    spoken of), or None when the data does not know it as released."""
    releases = current() if releases is None else releases
    if version.count(".") == 1:
        in_series = [r for r in releases if r.released and series(r.version) == version]
        if in_series:
            return max(in_series, key=lambda r: release_key(r.version))
    return next((r for r in releases if r.released and release_key(r.version) == release_key(version)), None)


def announced(version: str, releases: tuple[SdkRelease, ...] | None = None) -> SdkRelease | None:
    """An SDK release only announced so far (what is known of it), or None."""
    releases = current() if releases is None else releases
    return next(
        (r for r in releases if not r.released and release_key(r.version) == release_key(version)),
        None,
    )


def latest_release(releases: tuple[SdkRelease, ...] | None = None) -> SdkRelease:
    releases = current() if releases is None else releases
    return max((r for r in releases if r.released), key=lambda r: release_key(r.version))
