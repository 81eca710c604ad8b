"""The Neuron SDK releases neuronforge knows, as the upgrade asks for them: derived from the release
table (`neuronforge.profiles.release_table`, one data file per release with its sources).

An upgrade aims at an SDK release; one not in the table is reported as unknown with what is known
of it (an announced release: the announcements), never guessed at.
"""

from __future__ import annotations

from neuronforge.profiles.lifecycle import SdkRelease, release_key, series
from neuronforge.profiles.release_table import sdk_releases

RELEASES: tuple[SdkRelease, ...] = sdk_releases()


def known_release(version: str, releases: tuple[SdkRelease, ...] = RELEASES) -> SdkRelease | None:
    """The released SDK `version` names (`2.31` names its newest patch, 2.31.1, as releases are
    spoken of), or None when the data does not know it as released."""
    if version.count(".") == 1:
        in_series = [r for r in releases if r.released and series(r.version) == version]
        if in_series:
            return max(in_series, key=lambda r: release_key(r.version))
    return next((r for r in releases if r.released and release_key(r.version) == release_key(version)), None)


def announced(version: str, releases: tuple[SdkRelease, ...] = RELEASES) -> SdkRelease | None:
    """An SDK release only announced so far (what is known of it), or None."""
    return next(
        (r for r in releases if not r.released and release_key(r.version) == release_key(version)),
        None,
    )


def latest_release(releases: tuple[SdkRelease, ...] = RELEASES) -> SdkRelease:
    return max((r for r in releases if r.released), key=lambda r: release_key(r.version))
