"""FAKE `model.pt` (the TorchScript archive with embedded NEFFs that torch-neuronx / neuronx-distributed
trace and that optimum-neuron 0.4.5 and NxD Inference 0.6 save), shared by the fake SDKs.

A real `model.pt` is bound to what it was traced for: its graphs are the NEFFs of that exact
NeuronConfig, and loading it with another config, or loading a placeholder, fails. The fake keeps
exactly that observable fact: the archive records the sha256 of the `neuron_config.json` it was
compiled with and the NEFFs of its graphs (`neuronxcc.neff_bytes`), and `load` refuses a file that
is not such an archive (as `torch.jit.load` refuses a file that is no zip) or whose
`neuron_config.json` is not the one it was compiled with.
"""

import hashlib
import json
from pathlib import Path

MAGIC = b"FAKE-TORCHSCRIPT-NEFF-ARCHIVE 1\n"


def save(path, neuron_config_json: Path, neffs: dict) -> None:
    """Write the archive for the compiled `neuron_config.json` and its NEFFs (graph -> bytes)."""
    body = {
        "neuron_config_sha256": hashlib.sha256(Path(neuron_config_json).read_bytes()).hexdigest(),
        "neffs": {graph: hashlib.sha256(data).hexdigest() for graph, data in sorted(neffs.items())},
    }
    Path(path).write_bytes(MAGIC + json.dumps(body, sort_keys=True).encode())


def load(path, neuron_config_json: Path) -> dict:
    """Read the archive back for a folder's `neuron_config.json`; what `torch.jit.load` + the
    runtime's NEFF load would refuse raises."""
    data = Path(path).read_bytes()
    if not data.startswith(MAGIC):
        raise RuntimeError(f"PytorchStreamReader failed reading zip archive: failed finding central directory ({path})")
    body = json.loads(data[len(MAGIC) :])
    found = hashlib.sha256(Path(neuron_config_json).read_bytes()).hexdigest()
    if body["neuron_config_sha256"] != found:
        raise RuntimeError(
            f"{path} was compiled for another neuron_config.json than {neuron_config_json}: its graphs do not fit"
        )
    return body
