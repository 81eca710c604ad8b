"""The arithmetic of `bench/neuron_host_time.py`: seconds per kind of host now and as placed before
(every toolchain stage of a Neuron profile on the Neuron host), and the cost of each at its price."""

from __future__ import annotations

import importlib.util
import json
import subprocess
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


def _ti(task: str, i: int, queue: str, host: str, seconds: float) -> dict:
    return {
        "task_id": task,
        "map_index": i,
        "queue": queue,
        "hostname": host,
        "duration": seconds,
        "start_date": "2026-01-01T00:00:00Z",
        "end_date": "2026-01-01T00:01:00Z",
        "state": "success",
    }


def _run(label: str, compile_host: str, compile_queue: str) -> dict:
    group = "neuron_2_26_1_target"
    tis = [_ti("expand_targets", -1, "default", "nf-worker-a", 2.0)]
    for i in range(2):
        tis += [
            _ti(f"{group}.fetch_checkpoint", i, "default", "nf-worker-b", 3.0),
            _ti(f"{group}.prepare", i, compile_queue, compile_host, 1.0),
            _ti(f"{group}.compile_graphs", i, compile_queue, compile_host, 10.0 + i),
            _ti(f"{group}.smoke", i, "neuron-2.26.1", "nf-neuron", 4.0),
            {**_ti(f"{group}.quantize_weights", i, "default", "", 0.0), "state": "skipped"},
        ]
    run = {"dag_id": "d", "dag_run_id": f"deploy-{label}-1", "start_date": "2026-01-01T00:00:00Z",
           "end_date": "2026-01-01T00:02:30Z"}  # fmt: skip
    return {"label": label, "run": run, "tis": tis}


def test_measured_seconds_per_worker_from_task_instances(bench, tmp_path: Path, capsys) -> None:
    """A stage-times file as the deployment scenario writes it: per build, the seconds on the Neuron
    host are its tasks' durations there (only the smoke test when placed; prepare, compile and smoke
    in the baseline), the rest is on CPU workers; skipped tasks and run-level tasks are not a build's."""
    from tests.deployment.stage_times import RunTimes, StageTimes, read, write

    runs = [
        RunTimes.from_api(r["label"], r["run"], r["tis"], ("optimum-neuron", "vllm-neuron@2.26.1"))
        for r in (_run("placed", "nf-compile", "neuron-compile-2.26.1"), _run("baseline", "nf-neuron", "neuron-2.26.1"))
    ]
    path = tmp_path / "times.json"
    write(path, StageTimes(tuple(runs), ("nf-neuron",)))
    assert read(path) == StageTimes(tuple(runs), ("nf-neuron",))
    assert runs[0].wall_s == 150.0 and not any(t.stage == "quantize_weights" for t in runs[0].tasks)
    placed, baseline = (bench.build_rows(r, ("nf-neuron",)) for r in runs)
    assert [(r["cpu_s"], r["neuron_s"]) for r in placed] == [(14.0, 4.0), (15.0, 4.0)]
    assert [(r["cpu_s"], r["neuron_s"]) for r in baseline] == [(3.0, 15.0), (3.0, 16.0)]
    assert placed[1]["stages"]["compile_graphs"] == [11.0, "nf-compile"]
    prices = json.loads(bench.PRICES.read_text())
    rows = bench.measured(path, [("trn1.32xlarge", "c7i.8xlarge")], prices)
    assert [r["run"] for r in rows] == ["placed", "placed", "baseline", "baseline"]
    out = capsys.readouterr().out
    assert "Neuron-host seconds: placed 8.0s = 21.6% of the builds' task seconds, baseline 31.0s = 83.8%: 0.26x" in out
    assert "optimum-neuron 0.27x, vllm-neuron@2.26.1 0.25x" in out


def test_a_file_that_is_not_stage_times_is_said_in_one_line(bench, tmp_path: Path) -> None:
    from tests.deployment.stage_times import read

    path = tmp_path / "other.json"
    path.write_text('{"schema": 7}')
    with pytest.raises(ValueError, match=r"other.json: stage-times schema 7, expected 1"):
        read(path)
    path.write_text("[1, 2")
    with pytest.raises(ValueError, match=r"other.json: not a stage-times file"):
        read(path)
    done = subprocess.run([sys.executable, str(BENCH), "--from", str(path)], capture_output=True, text=True)
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    assert done.stderr.startswith(f"neuron_host_time: {path}: not a stage-times file"), done.stderr
