"""optimum-neuron's Hub cache registry, computed and read by optimum-neuron itself (v0.4.5).

A registry entry is what `optimum-cli neuron cache lookup`, `optimum-cli neuron serve` and
optimum's vLLM platform read to find an export configuration in a cache repository
(optimum/neuron/cache/hub_cache.py `get_hub_cached_entries`, `select_hub_cached_entries`). Its
folder (the "arch digest") is a sha256 over the model type, the task and the model config's
`to_diff_dict()`, so it depends on the consumer's transformers: it is computed here, in the
toolchain's own interpreter, with optimum-neuron's own classes — never re-implemented.

`entry`: the entry optimum's export writes for a Hub model (NxDPreTrainedModel._export,
optimum/neuron/models/inference/backend/pretrained_model.py: `config.torch_dtype` set to the
neuron dtype, `head_dim` filled, `SingleModelCacheEntry(model_id, task, config, neuron_config)`),
with the export's `neuron_config.json` as its neuron part and the Hub id and revision a Hub export
records (modeling_utils.py get_neuron_config). Beside it, the digest the LOOKUP computes for the
same model (`ModelCacheEntry.create` -> `SingleModelCacheEntry.from_hub`: the Hub config as is):
when the two differ, optimum's lookup cannot see the entry.

`lookup`: optimum's own lookup against the repository (HF_ENDPOINT, HF_TOKEN and HF_HOME come in
the environment: huggingface_hub reads HF_ENDPOINT when it is imported).
"""


def entry(spec):
    """spec: {"checkpoint_dir", "model_id", "revision", "task", "neuron_config": the export's dict}."""
    import copy

    import torch
    import transformers
    from optimum.neuron.cache.entries.single_model import SingleModelCacheEntry
    from optimum.neuron.cache.hub_cache import REGISTRY_FOLDER
    from optimum.neuron.utils.version_utils import get_pinned_version
    from optimum.neuron.version import __version__
    from transformers import AutoConfig

    task = spec["task"]
    config = AutoConfig.from_pretrained(spec["checkpoint_dir"])
    if task == "text-generation":
        config = config.get_text_config() or config  # as from_hub does for text generation
    looked_up = SingleModelCacheEntry(spec["model_id"], task, copy.deepcopy(config))
    neuron = dict(spec["neuron_config"])
    neuron["checkpoint_id"] = spec["model_id"]
    neuron["checkpoint_revision"] = spec["revision"]
    config.torch_dtype = getattr(torch, str(neuron["torch_dtype"]).replace("torch.", ""))
    if hasattr(config, "head_dim") and config.head_dim is None:
        config.head_dim = config.hidden_size // config.num_attention_heads
    built = SingleModelCacheEntry(spec["model_id"], task, config, neuron_config=neuron)
    return {
        "registry_folder": REGISTRY_FOLDER,
        "arch_digest": built.arch_digest(),
        "lookup_digest": looked_up.arch_digest(),
        "hash": built.hash,
        "model_type": built.model_type,
        "json": built.serialize(),
        "neuron": built.neuron_config,
        "versions": {
            "optimum-neuron": __version__,
            "transformers": transformers.__version__,
            "neuronx-cc (pinned by optimum-neuron)": get_pinned_version("neuronx-cc"),
        },
    }


def lookup(spec):
    """spec: {"model_id", "task", "repo_id", "instance_type", "batch_size", "sequence_length",
    "tp_degree", "dtype"}: what optimum's lookup functions answer for the model."""
    from optimum.neuron.cache.hub_cache import get_hub_cached_entries, get_hub_cached_models, select_hub_cached_entries

    repo = spec["repo_id"]
    entries = get_hub_cached_entries(spec["model_id"], task=spec["task"], cache_repo_id=repo)
    selected = select_hub_cached_entries(
        spec["model_id"],
        task=spec["task"],
        cache_repo_id=repo,
        instance_type=spec["instance_type"],
        batch_size=spec["batch_size"],
        sequence_length=spec["sequence_length"],
        tensor_parallel_size=spec["tp_degree"],
        torch_dtype=spec["dtype"],
    )
    models = sorted("/".join(m) for m in get_hub_cached_models(cache_repo_id=repo))
    return {"entries": entries, "selected": selected, "models": models}
