"""`make registry-standin` (`python -m tests.fakes.standin`): the stand-in starts, writes the shell
variables that point neuronforge and optimum-cli at it, serves the tiny Llama on 127.0.0.1, and stops
on Ctrl+C — what docs/optimum-registry.md tells a user without a Hub account to run."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_stand_in_serves_the_model_writes_its_variables_and_stops_on_ctrl_c(tmp_path: Path) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.fakes.standin", "--dir", str(tmp_path)],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        env_file = tmp_path / "env.sh"
        deadline = time.monotonic() + 120
        while not env_file.exists():
            assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
            time.sleep(0.2)
        said = dict(
            line.removeprefix("export ").split("=", 1) for line in env_file.read_text().splitlines() if "=" in line
        )
        assert env_file.read_text().startswith("# LOCAL STAND-IN")
        assert said["HF_TOKEN"] == "hf_writer" and said["FAKE_NEURON_DEVICES"] == "2"
        assert Path(said["NEURONFORGE_TOOLCHAIN_PYTHON_2_26_1"]).is_file()
        with urllib.request.urlopen(f"{said['HF_ENDPOINT']}/api/models/tiny-org/tiny-llama", timeout=10) as answer:
            assert json.load(answer)["id"] == "tiny-org/tiny-llama"
    finally:
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=30)
    assert proc.returncode == 0 and out.startswith("LOCAL STAND-IN:") and out.rstrip().endswith("stopped"), err
