"""Where a build is registered for optimum-neuron's own lookup: the `hub_registry` part of its manifest.

optimum-neuron finds export configurations in a Hugging Face cache repository (`CUSTOM_CACHE_REPO`),
never in a store like ours: `optimum-cli neuron cache lookup`, `optimum-cli neuron serve` and its vLLM
platform read `neuronxcc-<ver>/0_REGISTRY/<optimum-neuron ver>/<arch digest>/<entry hash>.json`
(optimum-neuron v0.4.5 optimum/neuron/cache/hub_cache.py `get_hub_cached_entries`). The register
stage (`neuronforge.pipeline.stages.register`) writes that entry and its NEFFs into a repository
before the manifest is written, then runs optimum's lookup against it; this part records what it
wrote and what the lookup answered. A shown part: a forged one reads as absent, never costs the
manifest. No credential is ever part of it (the endpoint is stored masked).
"""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from neuronforge.records.parts import AnyObject, Part, Text, or_default


class LookupCheck(Part):
    """optimum-neuron's own lookup of the repository right after the commit (`select_hub_cached_entries`
    for the build's batch size, sequence length, tensor parallel degree, dtype and instance type)."""

    found: bool = False  # the build's entry is among the selected ones, field for field
    selected: int = 0  # how many entries the selection returned
    entries: int = 0  # how many entries the model's digest folder holds
    listed_model: bool = False  # `get_hub_cached_models` (cache lookup's model list) names the model
    reason: Text = ""  # why not found, in one line
    checked_at: Text = ""  # UTC, ISO 8601


class HubRegistration(Part):
    """One build's registry entry in one cache repository."""

    repo_id: Text  # org/name of the cache repository
    endpoint: Text = ""  # the Hub endpoint (https://huggingface.co or a Hub-compatible one)
    commit: Text = ""  # the repository commit that holds the entry ("" when it was there already)
    compiler_dir: Text = ""  # neuronxcc-<full version>: where the NEFFs and the registry live
    entry_path: Text = ""  # <compiler_dir>/0_REGISTRY/<optimum ver>/<arch digest>/<hash>.json
    alias_path: Text = ""  # <compiler_dir>/0_REGISTRY/<optimum ver>/<model_type>/<org>/<name>/<hash>.json
    arch_digest: Text = ""
    entry_hash: Text = ""
    modules: Annotated[list[Text], or_default(list)] = Field(default_factory=list)  # MODULE_* entries it holds
    uploaded_files: int = 0  # files this build's commit added (0: everything was there)
    uploaded_bytes: int = 0
    # (optimum-neuron, neuronx-cc, transformers) that built the entry: the only consumer that finds it
    versions: Annotated[dict[str, Text], or_default(dict)] = Field(default_factory=dict)
    neuron: AnyObject = Field(default_factory=dict)  # the entry's neuron config, as the lookup returns it
    lookup: Annotated[LookupCheck, or_default(LookupCheck)] = Field(default_factory=LookupCheck)
    registered_at: Text = ""  # UTC, ISO 8601
