"""A LOCAL STAND-IN for trying docs/optimum-registry.md on a machine without a Hub account or Neuron
SDK: the FAKE Hugging Face Hub (tests/fakes/hub: the Hub API as huggingface_hub 0.36.2 calls it) on
127.0.0.1 serving the tiny Llama as `tiny-org/tiny-llama`, and the FAKE Neuron SDK 2.26.1 with
optimum-neuron 0.4.5's entry point (tests/fakes) as SDK 2.26.1's toolchain interpreter, with a fake
`neuron-ls` of 2 devices. Nothing it answers is the Hub or a Neuron device: it proves the commands'
mechanics, not a build a real server would load. `optimum-cli` in the examples is the real
optimum-neuron 0.4.5 that `make setup` installed.

    make registry-standin        # (python -m tests.fakes.standin) in one terminal: runs until Ctrl+C
    . .neuronforge/standin/env.sh   # in another: then docs/optimum-registry.md's examples run as written

The same fakes the docs test starts for the page's `fakes=optimum,hub` blocks (tests/test_docs.py).
"""

from __future__ import annotations

import argparse
import os
import shlex
import signal
import sys
import threading
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
MODEL = "tiny-org/tiny-llama"
TOKEN = "hf_writer"  # user `me`, who may write `me/*` and `my-org/*` (the docs' examples write my-org)


def env_lines(endpoint: str, python: Path, hf_home: Path) -> list[str]:
    """What a shell sets to use the stand-in (the variables the docs test sets for the page's blocks)."""
    from neuronforge.compilation.backends.interpreter import release_var
    from tests.fakes import neuron_host_path

    values = {
        "HF_ENDPOINT": endpoint,
        "HF_TOKEN": TOKEN,
        "HF_HUB_OFFLINE": "0",
        "HF_HOME": str(hf_home),
        "HF_HUB_CACHE": str(hf_home / "hub"),
        release_var("2.26.1"): str(python),
        "FAKE_NEURON_DEVICES": "2",
        "PATH": neuron_host_path(os.pathsep.join((str(python.parent), os.environ.get("PATH", "")))),
    }
    return [
        "# LOCAL STAND-IN (tests/fakes): a fake Hub and a fake Neuron SDK 2.26.1, not the real services",
        *(f"export {name}={shlex.quote(value)}" for name, value in values.items()),
    ]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dir", default=str(ROOT / ".neuronforge" / "standin"), help="where it keeps its files")
    args = ap.parse_args(argv)
    from neuronforge.spec.tinymodel import make_tiny_llama
    from tests.fakes import OPTIMUM, SDK_2_26_1, fake_python
    from tests.fakes.hub.server import FakeHub

    base = Path(args.dir).resolve()
    base.mkdir(parents=True, exist_ok=True)
    checkpoint = base / "tiny-llama"
    if not (checkpoint / "config.json").is_file():
        make_tiny_llama(checkpoint, tokenizer=True)  # the docs session's model: the same generator
    python = fake_python(base / "toolchain-host" / "python", OPTIMUM, *SDK_2_26_1)
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    with FakeHub(base / "hub", tokens={TOKEN: ("me", ["my-org"])}) as hub:
        hub.add_model(MODEL, checkpoint)
        env_file = base / "env.sh"
        env_file.write_text("\n".join(env_lines(hub.endpoint, python, base / "hf")) + "\n", encoding="utf-8")
        print(f"LOCAL STAND-IN: a fake Hub at {hub.endpoint} serving {MODEL}, a fake Neuron SDK 2.26.1", flush=True)
        print(f"in another shell: . {env_file}   (Ctrl+C here stops it)", flush=True)
        stop.wait()
    print("stopped", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
