"""The embedded models (`builtin:<name>` sources): generated on each host, byte-identical, so every
worker resolves them to the same revision."""

from __future__ import annotations

from pathlib import Path

from neuronforge.common.errors import InvalidInput
from neuronforge.common.settings import home

BUILTIN_MODELS = ("tiny-llama",)


def demo_model() -> Path:
    """The embedded default model on this host: a tiny seeded Llama + tokenizer, generated on first
    use (byte-identical on every host with the same torch, so every worker resolves the source
    `builtin:tiny-llama` to the same revision). Safe when several runs start at once in a fresh
    home: one generates under a lock into a unique temporary folder and renames it into place."""
    import shutil
    import uuid

    from filelock import FileLock

    from neuronforge.spec.tinymodel import make_tiny_llama

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
    if name not in BUILTIN_MODELS:
        raise InvalidInput(f"unknown built-in model {name!r}; built-in models: {', '.join(BUILTIN_MODELS)}")
    return demo_model()
