"""A build's measurement in its farm-index row (`farm_index.entry.measured_summary`, read by
`farm.rows.measured`): what the catalog's speed chart draws without reading a manifest, written at publish
and by `index rebuild`, and read number by number (a forged row costs the number, never the row)."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from neuronforge.artifacts import farm_index
from neuronforge.farm.rows import FarmQuery, farm_page, measured
from neuronforge.records.smoke import PER_TOKEN, TTFT_SHORT
from neuronforge.stores import ArtifactStore, open_store
from tests.releases.builds import publish
from tests.releases.measured import smoke


@pytest.fixture
def store(tmp_path: Path) -> ArtifactStore:
    return open_store(f"file://{tmp_path / 'store'}")


def _rows(store: ArtifactStore) -> dict[str, dict | None]:
    return {r.key: r.measured for r in farm_page(store, FarmQuery(published_only=True)).rows}


def test_a_published_builds_row_keeps_the_charted_figures(store: ArtifactStore) -> None:
    measured_key = publish(store, 1, smoke=smoke(0.010, ttft=0.020, synthetic=True, runtime="torch 2.9").stored_json())
    older = publish(store, 2)  # published before the protocol
    rows = _rows(store)
    assert rows[older] is None
    m = rows[measured_key]
    assert (m["synthetic"], m["instance_type"], m["runtime_line"]) == (True, "cpu", "torch 2.9")
    assert set(m["figures"]) == {TTFT_SHORT, PER_TOKEN}  # the two the chart draws, not every figure
    assert m["figures"][PER_TOKEN] == pytest.approx({"median": 0.010, "p10": 0.0099, "p90": 0.0101})
    # a rebuilt index says the same: the summary is made from the manifest either way
    farm_index.rebuild(store)
    assert _rows(store) == rows


@pytest.mark.parametrize(
    "stored",
    [
        None,
        "fast",
        {"figures": "fast"},
        {"figures": {PER_TOKEN: [0.01, 0.009]}},
        {"figures": {PER_TOKEN: ["<b>", 0.009, 0.011]}},
        {"figures": {PER_TOKEN: [math.nan, 0.009, 0.011]}},
        {"figures": {PER_TOKEN: [-1.0, 0.009, 0.011]}},
        {"figures": {PER_TOKEN: [True, 0.009, 0.011]}},
    ],
)
def test_a_forged_summary_costs_its_figure_not_the_row(stored: object) -> None:
    found = measured(stored)
    assert found is None or found["figures"] == {}


def test_a_sound_figure_beside_a_forged_one_still_reads() -> None:
    found = measured({"synthetic": "yes", "figures": {PER_TOKEN: [0.01, 0.009, 0.011], TTFT_SHORT: "x"}})
    assert found == {
        "synthetic": False,  # only `true` is synthetic
        "instance_type": "",
        "runtime_line": "",
        "figures": {PER_TOKEN: {"median": 0.01, "p10": 0.009, "p90": 0.011}},
    }
