"""FAKE NxD Inference model (tests/fakes/README.md), with NeuronApplicationBase's observable behaviour
at v0.6.10598 (models/application_base.py): `Model(path, config)` builds, `Model(compiled_path)`
reads `neuron_config.json` from that folder (`get_config_cls().load`); `compile(out)` writes
`neuron_config.json` (`config.save`), `model.pt`, and with `save_sharded_checkpoint=True`
`weights/tp{rank}_sharded_checkpoint.safetensors` for every rank of `world_size`; `load(out)` reads
`model.pt` and the shards of ranks `start_rank_id .. start_rank_id + local_ranks_size - 1`. Compiling
writes persistent-cache entries (neuronxcc.write_cache_entries); generation runs the checkpoint named
by the saved config's `_name_or_path` with transformers on the CPU."""

import json
import os
from pathlib import Path

from neuronx_distributed_inference.models.config import InferenceConfig, MoENeuronConfig, NeuronConfig

COMPILED_MODEL_FILE_NAME = "model.pt"


class NeuronCausalLM:
    _config_cls = InferenceConfig

    def __init__(self, model_path, config=None, neuron_config=None):
        self.model_path = os.path.join(os.path.normpath(str(model_path)), "")
        if config is None:
            config = self.get_config_cls().load(self.model_path)
        if neuron_config is not None:
            config.neuron_config = neuron_config
        self.config = config
        self.neuron_config = config.neuron_config

    @classmethod
    def get_config_cls(cls):
        return cls._config_cls

    @classmethod
    def get_neuron_config_cls(cls):
        return cls._config_cls.get_neuron_config_cls()

    def compile(self, compiled_model_path, debug=False, pre_shard_weights_hook=None, dry_run=False):
        out = Path(compiled_model_path)
        self.config.save(str(out))
        from neuronxcc import write_cache_entries

        saved = json.loads(self.config.to_json_string())
        # The graphs depend on the model and the NeuronConfig, not on where the checkpoint was read.
        material = json.dumps(
            {k: v for k, v in saved.items() if k not in ("_name_or_path", "transformers_version")}, sort_keys=True
        )
        graphs = ["context_encoding_model", "token_generation_model"]
        write_cache_entries(material, graphs, f"(bucket {self.neuron_config.max_context_length})")
        if dry_run:
            return
        (out / COMPILED_MODEL_FILE_NAME).write_bytes(b"FAKE TorchScript with NEFFs")
        if self.neuron_config.save_sharded_checkpoint and not self.neuron_config.skip_sharding:
            (out / "weights").mkdir(exist_ok=True)
            for rank in range(self.neuron_config.world_size):
                (out / "weights" / f"tp{rank}_sharded_checkpoint.safetensors").write_bytes(b"FAKE")

    def load(self, compiled_model_path, start_rank_id=None, local_ranks_size=None, skip_warmup=False):
        out = Path(compiled_model_path)
        nc = self.neuron_config
        if not (out / COMPILED_MODEL_FILE_NAME).is_file():  # torch.jit.load
            raise FileNotFoundError(str(out / COMPILED_MODEL_FILE_NAME))
        if nc.save_sharded_checkpoint:
            first = nc.start_rank_id if start_rank_id is None else start_rank_id
            size = nc.local_ranks_size if local_ranks_size is None else local_ranks_size
            for rank in range(first, first + size):  # safetensors load_file
                shard = out / f"weights/tp{rank}_sharded_checkpoint.safetensors"
                if not shard.is_file():
                    raise FileNotFoundError(str(shard))
        from transformers import AutoModelForCausalLM

        self.hf = AutoModelForCausalLM.from_pretrained(self.config._name_or_path).eval()
        if nc.quantized:  # weights from the quantized checkpoint: q * scale, NxD names
            self.hf.load_state_dict(_dequantized(Path(nc.quantized_checkpoints_path)), strict=False)


def make(model_class_name, config_class_name, moe=False):
    """A model class and its InferenceConfig class (MoE models' configs build MoENeuronConfig)."""
    neuron_config_cls = MoENeuronConfig if moe else NeuronConfig
    config_cls = type(
        config_class_name, (InferenceConfig,), {"get_neuron_config_cls": classmethod(lambda cls: neuron_config_cls)}
    )
    return type(model_class_name, (NeuronCausalLM,), {"_config_cls": config_cls}), config_cls


def _dequantized(folder):
    from safetensors.torch import load_file

    state = {}
    for f in sorted(folder.glob("*.safetensors")):
        state.update(load_file(f))
    out = {}
    for name, t in state.items():
        if name.endswith(".scale"):
            continue
        scale = state.get(name.removesuffix(".weight") + ".scale") if name.endswith(".weight") else None
        value = t.float() * scale if scale is not None else t.float()
        out[name if name.startswith("lm_head.") else f"model.{name}"] = value
    return out
