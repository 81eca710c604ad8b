"""A fresh "serving host" for the vllm-neuron-native profile's launch files: its own folders, `vllm` the
FAKE plugin's CLI in the SDK image's Python (tests/fakes/vllm_neuron_native), `aws` / `s5cmd` from this
venv, Neuron devices. `serve` runs the published serve.sh (sync.sh, then `vllm serve`) until the server
says it started, or exits."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path


def serving_host(tmp_path: Path, release: str, endpoint: str, tool: str = "aws", **extra: str) -> dict[str, str]:
    from tests.fakes import VLLM_SDK_2_32_0, VLLM_SDK_2_33_0, fake_python

    bindir = tmp_path / "bin"
    bindir.mkdir(parents=True)
    folders = {"2.32.0": VLLM_SDK_2_32_0, "2.33.0": VLLM_SDK_2_33_0}[release]
    python = fake_python(tmp_path / "image-python", *folders)
    (bindir / "vllm").write_text(f'#!/bin/sh\nexec "{python}" -m vllm.entrypoints.cli.main "$@"\n')
    (bindir / "vllm").chmod(0o755)
    (bindir / "python3").symlink_to(sys.executable)
    venv_bin = Path(sys.executable).parent
    return {
        **os.environ,
        "PATH": f"{bindir}{os.pathsep}{venv_bin}{os.pathsep}{os.environ['PATH']}",
        "AWS_ENDPOINT_URL": endpoint,
        "MODEL_DIR": str(tmp_path / "host" / "model"),
        "VLLM_CACHE_ROOT": str(tmp_path / "host" / "vllm"),
        "FAKE_NEURON_DEVICES": "2",
        "SYNC_TOOL": tool,
        **extra,
    }


def serve(launch: Path, env: dict[str, str], timeout_s: float = 120) -> tuple[bool, list[str]]:
    """Run serve.sh until the server says it started (True) or exits (False); then stop it."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen(
        ["bash", str(launch / "serve.sh"), "--port", str(port)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    lines: list[str] = []
    deadline = time.monotonic() + timeout_s
    assert proc.stdout is not None
    try:
        for line in proc.stdout:
            lines.append(line.rstrip())
            if "Application startup complete." in line:
                return True, lines
            if time.monotonic() > deadline:
                break
        return False, lines
    finally:
        os.killpg(proc.pid, 9)
        proc.wait()
