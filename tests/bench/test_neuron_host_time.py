"""The arithmetic of `bench/neuron_host_time.py`: seconds per kind of host now and as placed before
(every toolchain stage of a Neuron profile on the Neuron host), and the cost of each at its price."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench" / "neuron_host_time.py"


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location("neuron_host_time", BENCH)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


STAGES = [
    {"stage": "prepare", "seconds": 1.0, "host": "cpu"},
    {"stage": "fetch_checkpoint", "seconds": 2.0, "host": "cpu"},
    {"stage": "compile_graphs", "seconds": 90.0, "host": "cpu"},
    {"stage": "smoke", "seconds": 6.0, "host": "neuron"},
    {"stage": "publish_artifact", "seconds": 1.0, "host": "cpu"},
]


def test_now_and_baseline(bench, capsys) -> None:
    row = bench.report("x", STAGES, neuron_profile=True)
    assert (row["cpu_s"], row["neuron_s"], row["neuron_share"]) == (94.0, 6.0, 0.06)
    assert (row["baseline_cpu_s"], row["baseline_neuron_s"]) == (3.0, 97.0)  # prepare + compile + smoke
    prices = json.loads(bench.PRICES.read_text())
    per_hour = {k: v["usd_per_hour"] for k, v in prices["instances"].items()}
    now = bench.cost(row, prices, "trn1.32xlarge", "c7i.8xlarge")
    assert now == pytest.approx((94 * per_hour["c7i.8xlarge"] + 6 * per_hour["trn1.32xlarge"]) / 3600)
    before = bench.cost(row, prices, "trn1.32xlarge", "c7i.8xlarge", baseline=True)
    assert before == pytest.approx((3 * per_hour["c7i.8xlarge"] + 97 * per_hour["trn1.32xlarge"]) / 3600)
    cpu_only = bench.report("cpu", [{**s, "host": "cpu"} for s in STAGES], neuron_profile=False)
    assert cpu_only["neuron_s"] == cpu_only["baseline_neuron_s"] == 0.0
    assert "Neuron host   6.0s =   6.0% of the build" in capsys.readouterr().out


def test_the_price_table_says_when_and_where_from(bench) -> None:
    prices = json.loads(bench.PRICES.read_text())
    assert prices["as_of"] and prices["source"].startswith("https://aws.amazon.com/")
    kinds = {v["kind"] for v in prices["instances"].values()}
    assert kinds == {"cpu", "neuron"} and all(v["usd_per_hour"] > 0 for v in prices["instances"].values())
