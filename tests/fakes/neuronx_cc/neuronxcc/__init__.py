"""FAKE `neuronxcc` (the Neuron compiler's Python package) — a test double, compiles nothing.

`__version__` is what optimum-neuron's `get_neuronxcc_version()` reads (it stamps it into
`neuron_config.json` and checks it on load). It is real-shaped: the full version with its local
label, `2.21.33363.0+82129205` for SDK 2.26.1, which a real wheel reports both as
`neuronxcc.__version__` and as `importlib.metadata.version("neuronx-cc")` (the dist-info folder pip
installs is `neuronx_cc-2.21.33363.0+82129205.dist-info`, as for `torch-2.13.0+cpu.dist-info`). It is
read from the installed distribution's metadata (the fake dist-info says exactly that), so a test can
"upgrade the SDK" by putting a newer `neuronx_cc-*.dist-info` first on the path (the
`upgrade_fake_neuron` fixture). `write_cache_entries` stands in for the compiler
behind `NEURON_COMPILE_CACHE_URL` (the cache ROOT: the folder `neuronxcc-<full version>/`, `+` and all,
is appended here as libneuronxla does): one persistent-cache entry per graph, in the real layout
(`neuronxcc-<ver>/MODULE_<hash>+<flags hash>/{model.hlo_module.pb, compile_flags.json, model.neff,
model.done}`), reusing entries that are complete, plus one failed entry (`model.log`, no
`model.done`) and stale `*.lock` files like crashed compiles leave behind. A NEFF's bytes are what
the compile of that exact graph produces (`neff_bytes`: they depend on the graph's HLO, as a real
NEFF does), so a loader can tell a NEFF of this graph from one of another graph or a placeholder
(`check_neff`). Compiling needs no Neuron device.
"""

import hashlib
import json
import os
import time
from importlib import metadata
from pathlib import Path

__version__ = metadata.version("neuronx-cc")


def neff_bytes(material: str, graph: str) -> bytes:
    """The NEFF the fake compiler makes of one graph: a function of the graph's HLO alone."""
    return b"NEFF " + hashlib.sha256((material + graph).encode()).hexdigest().encode()


def check_neff(data: bytes, material: str, graph: str, where: str) -> None:
    """What loading a NEFF checks: it is the one compiled from this graph (the runtime refuses a NEFF
    of another graph: its inputs and outputs do not match)."""
    if data != neff_bytes(material, graph):
        raise RuntimeError(f"{where}: not the NEFF of graph {graph} (another graph, or not a NEFF)")


def write_cache_entries(material: str, graphs: list[str], progress: str = "", flags: str | None = None) -> list[Path]:
    """Compile (pretend) each graph of a model whose graph-changing inputs are `material`, with the
    compiler flags `flags` (default: `NEURON_CC_FLAGS`, as libneuronxla passes them)."""
    if os.environ.get("FAKE_NEURON_SLEEP"):
        time.sleep(float(os.environ["FAKE_NEURON_SLEEP"]))
    root = Path(os.environ.get("NEURON_COMPILE_CACHE_URL", "/var/tmp/neuron-compile-cache"))
    base = root / f"neuronxcc-{__version__}"
    flags = os.environ.get("NEURON_CC_FLAGS", "") if flags is None else flags
    flags_hash = hashlib.md5(flags.encode()).hexdigest()[:8]
    entries = []
    for graph in graphs:
        entry = base / f"MODULE_{hashlib.sha256((material + graph).encode()).hexdigest()[:20]}+{flags_hash}"
        entries.append(entry)
        if (entry / "model.done").exists():
            print(f"Using a cached neff for {graph} at {entry}", flush=True)
            check_neff((entry / "model.neff").read_bytes(), material, graph, str(entry / "model.neff"))
            continue
        entry.mkdir(parents=True, exist_ok=True)
        print(f"Compiling {graph} {progress}".rstrip(), flush=True)
        (entry / "model.hlo_module.pb").write_bytes(b"HLO " + graph.encode())
        (entry / "compile_flags.json").write_text(json.dumps(flags.split()))
        (entry / "model.neff").write_bytes(neff_bytes(material, graph))
        (entry / f"{graph}.lock").write_text("stale lock")  # locks left behind by crashed compiles
        (entry / "model.done").write_text("")
        if os.environ.get("FAKE_NEURON_COMPILE_LOG"):
            with open(os.environ["FAKE_NEURON_COMPILE_LOG"], "a") as f:
                f.write(f"{entry.name}\n")
    failed = base / "MODULE_00000000000000000bad+00000000"
    failed.mkdir(parents=True, exist_ok=True)
    (failed / "model.log").write_text("ERROR: Estimated peak HBM usage exceeds 16GB")
    return entries
