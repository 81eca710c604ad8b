"""`launch/neff-cache.json` of an `lmi-neuronx` artifact: where its NEFFs are and what they were
compiled for (`neuronforge.profiles.lmi_neuronx`). LMI never reads it; neuronforge does — the smoke
test (which entries to pull, the load and flags), the profile's preflight and `verify` (the load
LMI would use against the one compiled), and `cache prune` (which entries a published artifact
still needs). Written without a version since the profile was added: every such file reads as
version 1 and is written the same way (it is part of the published payload, hashed into its
manifest)."""

from __future__ import annotations

from typing import Any, ClassVar

from neuronforge.records.base import StoredRecord


class NeffCacheRecord(StoredRecord):
    KIND: ClassVar[str] = "LMI NEFF cache record"
    SCHEMA: ClassVar[int] = 1
    VERSION_FIELD: ClassVar[str | None] = None
    MAX_BYTES: ClassVar[int] = 16 * 1024 * 1024  # ~60 bytes per cache entry

    compiled_graph_path: str | None  # serving.properties' option.compiled_graph_path (None: not set)
    neuron_compile_cache_url: str | None  # lmi.env's, when there is no compiled_graph_path
    kind: str  # "model.save" (NEFFs in split/neff/, loaded by model.load) or "neuron-compile-cache"
    cache_root: str  # the store's neuron-cache/ root the entries were published to
    compiler_dir: str  # neuronxcc-<version>: the folder of the entries under cache_root
    entries: list[str]  # MODULE_<hash>+<flags hash> cache entries the graphs are in
    neuron_cc_flags: str = ""  # the NEURON_CC_FLAGS the NEFFs were compiled with
    load: dict[str, Any]  # the transformers-neuronx load (model_type, kwargs, neuron_config) compiled for

    @property
    def model_save(self) -> bool:
        return self.kind == "model.save"
