"""Where the embedded default lives: the work dir, the store, the demo model.

NEURONFORGE_HOME     work dir (checkpoints, compile cache, builds)   default: <repo>/.neuronforge
NEURONFORGE_STORE    artifact store URI (file:// path or s3://)      default: <home>/store
NEURONFORGE_PROFILE  serving profile of the CLI's targets           default: cpu
"""

from __future__ import annotations

import os
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]

# The embedded default target (trigger form default, demo): small enough to compile in under a
# minute on 2 cores; fp32 so that the smoke test's greedy tokens match eager exactly. A value for each
# of the form's own target fields (`TargetSpec`'s inputs declared `form=True`), in their spelling; the
# form validates it against `TargetSpec` when the DAG file is parsed (operators/compile_params.py).
DEFAULT_TARGET = {
    "instance_type": "inf2.xlarge",
    "tp_degree": 1,
    "batch_size": 1,
    "sequence_length": 64,
    "max_context_length": 32,
    "dtype": "fp32",
    "quantization": "none",
}


def home() -> Path:
    return Path(os.environ.get("NEURONFORGE_HOME") or REPO_ROOT / ".neuronforge").expanduser().resolve()


def store_uri(explicit: str | None = None) -> str:
    if explicit:
        return explicit
    return os.environ.get("NEURONFORGE_STORE") or f"file://{home() / 'store'}"


def work_dir() -> Path:
    return home() / "work"


DEFAULT_PROFILE = "cpu"  # the profile that builds and runs on this machine, no Neuron SDK needed


def default_profile() -> str:
    """The serving profile every CLI command that takes a target uses unless told otherwise."""
    return os.environ.get("NEURONFORGE_PROFILE") or DEFAULT_PROFILE


# A Neuron compile of a large model takes tens of minutes; past this the child is killed (the compile
# stage, and a profile's retrace of its consumer's start-up).
COMPILE_TIMEOUT_S = float(os.environ.get("NEURONFORGE_COMPILE_TIMEOUT_S", 4 * 3600))
BUILTIN_MODELS = ("tiny-llama",)
DEFAULT_MODEL = "builtin:tiny-llama"  # the embedded default: what an empty `model` means


def demo_model() -> Path:
    """The embedded default model on this host: a tiny seeded Llama + tokenizer, generated on first
    use (byte-identical on every host with the same torch, so every worker resolves the source
    `builtin:tiny-llama` to the same revision). Safe when several runs start at once in a fresh
    home: one generates under a lock into a unique temporary folder and renames it into place."""
    import shutil
    import uuid

    from filelock import FileLock

    from neuronforge.tinymodel import make_tiny_llama

    folder = home() / "demo" / "tiny-llama"
    if (folder / "tokenizer.json").exists():
        return folder
    folder.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(str(folder.parent / ".tiny-llama.lock")):
        if not (folder / "tokenizer.json").exists():
            tmp = folder.with_name(f".tiny-llama.{uuid.uuid4().hex[:8]}")
            try:
                make_tiny_llama(tmp, tokenizer=True)  # tokenizer.json last: it marks completion
                shutil.rmtree(folder, ignore_errors=True)
                tmp.rename(folder)
            finally:
                shutil.rmtree(tmp, ignore_errors=True)
    return folder


def builtin_model(name: str) -> Path:
    from neuronforge.errors import InvalidInput

    if name not in BUILTIN_MODELS:
        raise InvalidInput(f"unknown built-in model {name!r}; built-in models: {', '.join(BUILTIN_MODELS)}")
    return demo_model()
