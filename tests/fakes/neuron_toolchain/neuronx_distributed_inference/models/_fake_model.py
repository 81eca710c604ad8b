"""FAKE NxD Inference model (tests/fakes/README.md), with NeuronApplicationBase's observable behaviour
at v0.6.10598 (models/application_base.py): `Model(path, config)` builds, `Model(compiled_path)`
reads `neuron_config.json` from that folder (`get_config_cls().load`); `compile(out)` writes
`neuron_config.json` (`config.save`), `model.pt`, and with `save_sharded_checkpoint=True`
`weights/tp{rank}_sharded_checkpoint.safetensors` for every rank of `world_size`; `load(out)` reads
`model.pt` and the shards of ranks `start_rank_id .. start_rank_id + local_ranks_size - 1`. Compiling
writes persistent-cache entries (neuronxcc.write_cache_entries) and needs no Neuron device; `model.pt`
is a fake TorchScript archive bound to the `neuron_config.json` it was compiled with and holding its
NEFFs (`fake_torchscript`). The sharded weights are real safetensors: rank 0 holds every weight as the
model computes with it (for a quantized config: the int8 weights and their scales, as NxD shards
them), the other ranks a marker tensor. Loading needs a Neuron device (`fake_nrt`), refuses a
`model.pt` of another config or a placeholder, reads every shard of its ranks, and generates with
transformers on the CPU from rank 0's weights and the folder's `config.json`: the compiled folder
alone, never the checkpoint it was compiled from."""

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
        import fake_torchscript
        from neuronxcc import write_cache_entries

        out = Path(compiled_model_path)
        self.config.save(str(out))
        saved = json.loads(self.config.to_json_string())
        # The graphs depend on the model and the NeuronConfig, not on where the checkpoint was read.
        material = json.dumps(
            {k: v for k, v in saved.items() if k not in ("_name_or_path", "transformers_version")}, sort_keys=True
        )
        graphs = ["context_encoding_model", "token_generation_model"]
        entries = write_cache_entries(material, graphs, f"(bucket {self.neuron_config.max_context_length})")
        if dry_run:
            return
        neffs = {g: (e / "model.neff").read_bytes() for g, e in zip(graphs, entries, strict=True)}
        fake_torchscript.save(out / COMPILED_MODEL_FILE_NAME, out / "neuron_config.json", neffs)
        if self.neuron_config.save_sharded_checkpoint and not self.neuron_config.skip_sharding:
            from safetensors.torch import save_file

            (out / "weights").mkdir(exist_ok=True)
            for rank in range(self.neuron_config.world_size):
                shard = self._rank0_weights() if rank == 0 else _marker(rank)
                save_file(shard, out / "weights" / f"tp{rank}_sharded_checkpoint.safetensors")

    def _rank0_weights(self):
        """What the fake keeps in rank 0: the checkpoint's weights (HF names), or for a quantized
        config the quantized checkpoint's tensors (NxD names: int8 weights and their scales)."""
        from safetensors.torch import load_file

        nc = self.neuron_config
        folder = Path(nc.quantized_checkpoints_path) if nc.quantized else Path(self.model_path)
        state = {}
        for f in sorted(folder.glob("*.safetensors")):
            state.update(load_file(f))
        return {k: v.contiguous() for k, v in state.items()}

    def load(self, compiled_model_path, start_rank_id=None, local_ranks_size=None, skip_warmup=False):
        import fake_nrt
        import fake_torchscript
        from safetensors.torch import load_file
        from transformers import AutoConfig, AutoModelForCausalLM

        out = Path(compiled_model_path)
        nc = self.neuron_config
        fake_nrt.nrt_init(str(out / COMPILED_MODEL_FILE_NAME))
        if not (out / COMPILED_MODEL_FILE_NAME).is_file():  # torch.jit.load
            raise FileNotFoundError(str(out / COMPILED_MODEL_FILE_NAME))
        fake_torchscript.load(out / COMPILED_MODEL_FILE_NAME, out / "neuron_config.json")
        if not nc.save_sharded_checkpoint:
            raise NotImplementedError("the FAKE NxD Inference loads pre-sharded weights only (save_sharded_checkpoint)")
        first = nc.start_rank_id if start_rank_id is None else start_rank_id
        size = nc.local_ranks_size if local_ranks_size is None else local_ranks_size
        shards = {}
        for rank in range(first, first + size):  # safetensors load_file
            shard = out / f"weights/tp{rank}_sharded_checkpoint.safetensors"
            if not shard.is_file():
                raise FileNotFoundError(str(shard))
            shards[rank] = load_file(shard)
        config = AutoConfig.from_pretrained(str(out))
        self.hf = AutoModelForCausalLM.from_config(config).eval()
        state = _dequantized(shards[0]) if nc.quantized else shards[0]
        self.hf.load_state_dict(state, strict=False)
        self.hf.tie_weights()


def make(model_class_name, config_class_name, moe=False):
    """A model class and its InferenceConfig class (MoE models' configs build MoENeuronConfig)."""
    neuron_config_cls = MoENeuronConfig if moe else NeuronConfig
    config_cls = type(
        config_class_name, (InferenceConfig,), {"get_neuron_config_cls": classmethod(lambda cls: neuron_config_cls)}
    )
    return type(model_class_name, (NeuronCausalLM,), {"_config_cls": config_cls}), config_cls


def _marker(rank):
    import torch

    return {"rank": torch.tensor([rank])}


def _dequantized(state):
    """NxD-named int8 weights and scales as the HF model's float weights (q * scale)."""
    out = {}
    for name, t in state.items():
        if name.endswith(".scale"):
            continue
        scale = state.get(name.removesuffix(".weight") + ".scale") if name.endswith(".weight") else None
        value = t.float() * scale if scale is not None else t.float()
        out[name if name.startswith("lm_head.") else f"model.{name}"] = value
    return out
