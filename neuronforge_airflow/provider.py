"""What Airflow's providers manager reads of neuronforge (the `apache_airflow_provider` entry point of
pyproject.toml): the connection type `neuronforge`, so the UI's Connection form offers it with the
fields the hook reads (`hooks/store.py`). Only a package's installed metadata is read
(a fresh `pip install`, as `make setup` and the images do, registers it)."""

from __future__ import annotations

from typing import Any

HOOK = "neuronforge_airflow.hooks.store.NeuronforgeStoreHook"


def get_provider_info() -> dict[str, Any]:
    from neuronforge import __version__

    return {
        "package-name": "neuronforge",  # the distribution's name: Airflow refuses a provider whose differs
        "name": "neuronforge",
        "description": "Compile-and-publish pipeline for LLMs on AWS Neuron: its store connection.",
        "versions": [__version__],
        "connection-types": [
            {"connection-type": "neuronforge", "hook-class-name": HOOK, "hook-name": "neuronforge store"}
        ],
    }
