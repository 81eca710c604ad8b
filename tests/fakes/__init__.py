"""FAKE Neuron SDKs for tests (see README.md): the folders each fake worker image puts on the path.

One tuple per SDK release a profile pins, like one worker image per release: the release's own
package folder first, then the fake compiler package (`neuronxcc`, shared: it reads its version
from the release's `neuronx_cc-<version>.dist-info`, as the real wheel reports its own).
"""

from pathlib import Path

FAKES = Path(__file__).resolve().parent
COMPILER = FAKES / "neuronx_cc"  # the `neuronxcc` package (version from the dist-info first on the path)
SDK_2_26_1 = (FAKES / "neuron_toolchain", COMPILER)  # neuronx-cc 2.21.33363.0+82129205, NxD Inference 0.6.10598
SDK_2_21_1 = (FAKES / "neuron_sdk_2_21_1", COMPILER)  # neuronx-cc 2.16.372.0+<label>, transformers-neuronx 0.13.380
