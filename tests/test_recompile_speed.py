"""The upgrade report speaks of speed (issue 53): each rebuilt or re-smoked row of a recompile is compared
with the build `stable` serves for its model and profile line (`farm.speed.against_stable`), and the
report's row carries the verdict and its sentence — in the stored JSON, the Markdown the DAG's report
task logs, and the CLI's lines. Builds are hand-made and measured by hand (tests/releases/builds.py,
tests/releases/measured.py) until the smoke stage measures them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from neuronforge.artifacts import attestations, channels, layout, reviews
from neuronforge.farm import recompile, speed
from neuronforge.interfaces.cli import recompile as cli
from neuronforge.records.attestation import Attestation
from neuronforge.records.recompile_report import RecompileReport
from neuronforge.stores import ArtifactStore, open_store
from tests.releases.builds import MODEL, publish
from tests.releases.measured import smoke


class Reads:
    """A store that records the keys read through it."""

    def __init__(self, store: ArtifactStore) -> None:
        self._store, self.read = store, []

    def __getattr__(self, name: str) -> Any:
        found = getattr(self._store, name)
        if name not in ("get_bytes", "read_capped", "get_if_exists", "read_versioned", "list", "list_page"):
            return found

        def reading(key: str, *args: Any, **kwargs: Any) -> Any:
            self.read.append(key)
            return found(key, *args, **kwargs)

        return reading


def _row(order: int, key: str, outcome: str) -> recompile.TargetState:
    return recompile.TargetState(
        order, MODEL, 1, f"cpu-b{order}", {}, recompile.STALE, key=key, profile="cpu@1", outcome=outcome
    )


@pytest.fixture
def store(tmp_path: Path) -> ArtifactStore:
    return open_store(f"file://{tmp_path / 'store'}")


def test_rebuilt_and_resmoked_rows_carry_their_comparison_with_stable(store: ArtifactStore) -> None:
    served = publish(store, 1, smoke=smoke(0.010).stored_json())
    reviews.decide(store, served, "approved", "reviewer@test", "ok", channels.now())
    channels.promote(store, channels.ChannelRef.parse(MODEL, "cpu", "stable"), build=served)
    slower = publish(store, 2, smoke=smoke(0.0125).stored_json())  # rebuilt 25 % slower per token
    same = publish(store, 3, smoke=smoke(0.0101).stored_json())  # rebuilt within the noise
    kept = publish(store, 4, smoke=smoke(0.010).stored_json())  # kept, re-smoked at 2.33.1 and slower there
    measured = smoke(0.013).measurement.model_dump(mode="json")
    attestations.attest(store, kept, Attestation(release="2.33.1", run="re-smoke", passed=True, measurement=measured))
    unmeasured = publish(store, 5, smoke=smoke(0.010).stored_json())  # re-smoked before the protocol
    attestations.attest(store, unmeasured, Attestation(release="2.33.1", run="re-smoke", passed=True))
    rows = [
        _row(0, slower, recompile.REBUILT),
        _row(1, same, recompile.REBUILT),
        _row(2, kept, recompile.ATTESTED),
        _row(3, unmeasured, recompile.ATTESTED),
        _row(4, publish(store, 6), recompile.FAILED),  # neither: no comparison
    ]
    reads = Reads(store)
    speed.against_stable(reads, rows, "2.33.1")
    assert [(r.speed or {}).get("verdict") for r in rows] == [
        "regression",
        "no regression",
        "regression",
        "not compared",
        None,
    ]
    assert rows[0].speed["base"] == served and "+25.0 %" in rows[0].speed["summary"]
    assert "recorded no measurement" in rows[3].speed["summary"]
    # bounded: the channel and its build's manifest once; per rebuilt row its pointer and manifest, per
    # re-smoked row its attestations
    manifests = [k for k in reads.read if k.endswith("manifest.json")]
    assert (
        len(manifests) == 1 + 2 and reads.read.count(channels.ChannelRef.parse(MODEL, "cpu", "stable").record_key) == 1
    )
    assert not any(k.startswith("index/") and served in k for k in reads.read)

    # the report's row carries it typed, the Markdown and the CLI's lines say it
    report = recompile.Report("2026-11-29T00-00-00Z", "catalog.yaml", store.root_uri, {}, rows, release="2.33.1")
    uris = recompile.write_report(store, report)
    stored = RecompileReport.read(store, layout.recompile_report(report.stamp, "json"))
    assert stored.targets[0].speed is not None and stored.targets[0].speed.verdict == "regression"
    assert stored.targets[4].speed is None
    markdown = report.to_markdown()
    assert "## Speed against what `stable` serves" in markdown
    assert (
        f"- {MODEL} cpu-b0 (cpu@1): speed against stable: regression: {slower[:12]} against {served[:12]}" in markdown
    )
    assert uris["markdown"].endswith(".md")
    lines = cli._lines(rows)
    assert f"  speed against stable: no regression: {same[:12]} against {served[:12]}" in "\n".join(lines)


def test_a_line_without_stable_says_there_is_nothing_to_compare(store: ArtifactStore) -> None:
    rows = [_row(0, publish(store, 1, smoke=smoke().stored_json()), recompile.REBUILT)]
    speed.against_stable(store, rows, "2.33.1")
    assert rows[0].speed == {
        "channel": "stable",
        "base": "",
        "verdict": "not compared",
        "summary": "the channel points to no build yet: nothing to compare with",
    }


def test_an_older_report_without_speed_still_reads() -> None:
    row = recompile.TargetState(0, MODEL, 1, "s", {}, recompile.FRESH).to_json()
    row.pop("speed")
    assert recompile.TargetState.from_json(row).speed is None
    assert cli._lines([recompile.TargetState.from_json(row)]) == [f"{MODEL} s [] : ", "  fresh"]
