"""A sweep needs the model's `config.json` only (heads, layers, max positions), never its weights:
read from a local folder or file, the embedded model, one Hub file, or one S3 object."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from neuronforge.common.errors import InvalidInput
from neuronforge.spec.modelconfig import ModelArch, load_config
from neuronforge.spec.source import ModelSource


def model_id(text: str, hub_only: bool = False) -> str:
    """The key of the cache-config file: the Hub id without revision, else the source as given
    (with `hub_only`, anything but a Hub id is refused)."""
    source = ModelSource.parse(text)
    if hub_only and source.kind != "hf":
        raise InvalidInput(f"--model-id {text}: not a Hub id; give org/name, the model the config.json is of")
    return source.location if source.kind == "hf" else text.strip()


def read_arch(text: str) -> ModelArch:
    path = Path(text).expanduser()
    bare = path.is_file() and path.suffix == ".json"  # a bare config.json (what the bench and tests sweep)
    config = load_config(path) if bare else _source_config(ModelSource.parse(text))
    return ModelArch.from_config(config, where=f"{text} config.json")


def _source_config(source: ModelSource) -> dict[str, Any]:
    if source.kind in ("local", "builtin"):
        from neuronforge.pipeline.stages.resolve import local_folder

        return load_config(local_folder(source))
    if source.kind == "s3":
        from neuronforge.stores import open_location

        data = open_location(source.location, probe=True).get_bytes("config.json")
    else:
        from neuronforge.common.errors import NeuronforgeError
        from neuronforge.pipeline.stages.resolve import hub_file

        try:
            data = hub_file(source, "config.json").read_bytes()
        except NeuronforgeError as exc:
            # The sweep needs config.json only: say how to sweep without the Hub.
            raise type(exc)(
                f"{exc}; or sweep offline from a copy of its config.json: --model config.json --model-id "
                f"{source.location}"
            ) from None
    try:
        return json.loads(data)
    except ValueError as exc:
        raise InvalidInput(f"{source}: config.json is not valid JSON ({exc})") from None
