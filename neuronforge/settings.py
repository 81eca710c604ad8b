"""Where the embedded default lives: the work dir, the store, the demo model.

NEURONFORGE_HOME   work dir (checkpoints, compile cache, builds)   default: <repo>/.neuronforge
NEURONFORGE_STORE  artifact store URI (file:// path or s3://)      default: <home>/store
"""

from __future__ import annotations

import os
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]

# The embedded default target (trigger form default, demo): small enough to compile in under a
# minute on 2 cores; fp32 so that the smoke test's greedy tokens match eager exactly.
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


def demo_model() -> Path:
    """The embedded default model: a tiny seeded Llama + tokenizer, generated on first use."""
    from neuronforge.tinymodel import make_tiny_llama

    folder = home() / "demo" / "tiny-llama"
    if not (folder / "tokenizer.json").exists():
        tmp = folder.with_name(".tiny-llama.partial")
        import shutil

        shutil.rmtree(tmp, ignore_errors=True)
        make_tiny_llama(tmp, tokenizer=True)
        shutil.rmtree(folder, ignore_errors=True)
        tmp.rename(folder)
    return folder
