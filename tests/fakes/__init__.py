"""FAKE Neuron SDKs for tests (see README.md): the folders each fake worker image puts on the path.

One tuple per SDK release a profile pins, like one worker image per release: the release's own
package folder first, then the fake compiler package (`neuronxcc`, shared: it reads its version
from the release's `neuronx_cc-<version>.dist-info`, as the real wheel reports its own).
"""

import os
import sys
from pathlib import Path

FAKES = Path(__file__).resolve().parent
COMPILER = FAKES / "neuronx_cc"  # the `neuronxcc` package (version from the dist-info first on the path)
SDK_2_26_1 = (FAKES / "neuron_toolchain", COMPILER)  # neuronx-cc 2.21.33363.0+82129205, NxD Inference 0.6.10598
SDK_2_21_1 = (FAKES / "neuron_sdk_2_21_1", COMPILER)  # neuronx-cc 2.16.372.0+<label>, transformers-neuronx 0.13.380
# The NxD Inference vLLM line's last releases: the release's dist-infos (neuronx-cc, NxD Inference, NxD,
# torch-neuronx with the labels of its vLLM DLC) first, then the one fake NxD Inference package (it reads
# which release it is from that dist-info: `neuronx_distributed_inference._release`) and the compiler.
SDK_2_28_0 = (FAKES / "nxdi_sdk_2_28_0", FAKES / "neuron_toolchain", COMPILER)  # cc 2.23.6484.0, NxDI 0.8.16251
SDK_2_31_1 = (FAKES / "nxdi_sdk_2_31_1", FAKES / "neuron_toolchain", COMPILER)  # cc 2.26.6360.0, NxDI 0.10.18399
OPTIMUM = FAKES / "optimum_neuron"  # the fake `optimum.neuron` entry point (SDK 2.26.1's image has optimum-neuron)
# The fake `neuron-ls` of SDK 2.26.1's aws-neuronx-tools (`-j` format): a Neuron host's tools folder.
NEURON_TOOLS = FAKES / "neuron_tools"


def neuron_host_path(path: str | None = None) -> str:
    """PATH of a fake Neuron host: the fake `neuron-ls` first (it describes FAKE_NEURON_DEVICES
    devices, of FAKE_NEURON_INSTANCE_TYPE if set), then `path` (default: this process's PATH)."""
    rest = os.environ.get("PATH", "") if path is None else path
    return os.pathsep.join(p for p in (str(NEURON_TOOLS), rest) if p)


def fake_python(path: Path, *folders: Path) -> Path:
    """An executable standing in for a Neuron SDK image's own interpreter: this venv's Python with a
    FAKE SDK's folders first on its path (what the image's site-packages would hold). Name it in
    NEURONFORGE_TOOLCHAIN_PYTHON_<release> and the worker runs that toolchain through it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    entries = os.pathsep.join(str(f) for f in folders)
    path.write_text(
        "#!/bin/sh\n"
        "# FAKE Neuron SDK interpreter (tests/fakes): the test venv's Python with the fake SDK on its path\n"
        f'export PYTHONPATH="{entries}${{PYTHONPATH:+{os.pathsep}$PYTHONPATH}}"\n'
        f'exec "{sys.executable}" "$@"\n'
    )
    path.chmod(0o755)
    return path


def run_in_toolchain(release: str, code: str, env: dict[str, str] | None = None) -> str:
    """Run `code` in the toolchain interpreter the environment names for SDK `release` (a fixture's
    fake), with `env` added; returns its standard output."""
    import subprocess

    var = "NEURONFORGE_TOOLCHAIN_PYTHON_" + release.replace(".", "_")
    done = subprocess.run(
        [os.environ[var], "-c", code], env={**os.environ, **(env or {})}, check=True, capture_output=True, text=True
    )
    return done.stdout


# The vLLM Neuron plugin's SDK images (2.32.0, 2.33.0): the release's dist-infos, the fake plugin
# (vllm, vllm_neuron, libtorch_neuronx_lite) and the fake compiler package (its version from the dist-info).
VLLM_NATIVE = FAKES / "vllm_neuron_native"
VLLM_SDK_2_32_0 = (FAKES / "vllm_sdk_2_32_0", VLLM_NATIVE, COMPILER)
VLLM_SDK_2_33_0 = (FAKES / "vllm_sdk_2_33_0", VLLM_NATIVE, COMPILER)
# SDK 2.33.1's image: 2.33.0's with libtorch-neuronx-lite rebuilt against the new runtime (its release
# table entry: 2.11.0.1.0.4089; every other package the same). Its own dist-info comes first and shadows
# 2.33.0's.
VLLM_SDK_2_33_1 = (FAKES / "vllm_sdk_2_33_1", *VLLM_SDK_2_33_0)
