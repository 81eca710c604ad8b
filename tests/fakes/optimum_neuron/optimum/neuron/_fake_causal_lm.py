"""FAKE `NeuronModelForCausalLM` with optimum-neuron 0.4.5's public signatures.

- `get_neuron_config` builds the REAL `NxDNeuronConfig` the way 0.4.5's decoder classes do
  (each model class's `_get_neuron_config`: see MODEL_OPTIONS).
- `export` checks the compilation target like the real `_export` (the real
  `align_compilation_target`, so `NEURON_PLATFORM_TARGET_OVERRIDE` must agree) and "compiles" with
  the fake `neuronxcc.write_cache_entries`.
- `save_pretrained` writes the real layout: `neuron_config.json` (real serializer), `config.json`,
  `model.pt` (a fake TorchScript archive bound to that `neuron_config.json` and holding the NEFFs the
  export compiled: `fake_torchscript`), `checkpoint/weights/tp{rank}_sharded_checkpoint.safetensors`
  (the fake keeps every weight in rank 0 so it can generate; the other ranks hold a marker tensor).
- `from_pretrained` needs a Neuron device (`fake_nrt`: the export does not), reads
  `neuron_config.json` with the real reader (version checks included), `model.pt` (refused unless it
  was compiled for that very `neuron_config.json`) and every rank's shard, and `generate` runs the
  shards' weights greedily with transformers on the CPU: it reads the exported folder and nothing else.
"""

import json
import os
from pathlib import Path

import torch
from optimum.neuron.models.inference.backend.config import NxDNeuronConfig
from optimum.neuron.utils.instance import align_compilation_target, normalize_instance_type

# The model types optimum-neuron 0.4.5 registers for text-generation inference (auto_models.py), with
# what each class's `_get_neuron_config` sets beyond the shape (models/inference/<model>/modeling_*.py):
# Llama and its subclasses (granite, phi3, smollm3): on-device sampling + fused QKV; qwen2/qwen3
# (also Llama subclasses) drop on-device sampling with continuous batching at tp 2; mixtral keeps
# NxDNeuronConfig's defaults (no continuous batching at any batch size).
_LLAMA = {"on_device_sampling": True, "fused_qkv": True}
MODEL_OPTIONS = {
    "llama": _LLAMA,
    "granite": _LLAMA,
    "phi3": _LLAMA,
    "smollm3": _LLAMA,
    "llama4_text": {"on_device_sampling": True},
    "mixtral": {"continuous_batching": False},
    "qwen2": {"on_device_sampling": True, "fused_qkv": False, "no_sampling_on_device_at_tp2_cb": True},
    "qwen3": {"on_device_sampling": True, "fused_qkv": True, "no_sampling_on_device_at_tp2_cb": True},
    "qwen3_moe": {"on_device_sampling": True},
}
SUPPORTED = set(MODEL_OPTIONS)
GRAPHS = ["context_encoding", "token_generation"]


class NeuronModelForCausalLM:
    task = "text-generation"

    def __init__(self, config, neuron_config, model_id=None, model=None):
        self.config = config
        self.neuron_config = neuron_config
        self.model_id = model_id
        self.model = model

    @classmethod
    def get_neuron_config(
        cls,
        model_name_or_path,
        config=None,
        token=None,
        revision=None,
        instance_type=None,
        batch_size=None,
        sequence_length=None,
        tensor_parallel_size=None,
    ):
        """0.4.5's `NeuronPreTrainedModel.get_neuron_config` (modeling_utils.py) for a local folder:
        no checkpoint id, dtype from the config, then the model class's own `_get_neuron_config`."""
        from transformers import AutoConfig

        if config is None:
            config = AutoConfig.from_pretrained(model_name_or_path).get_text_config()
        if config.model_type not in MODEL_OPTIONS:
            raise ValueError(f"Model type {config.model_type} is not supported for task text-generation in inference.")
        batch_size = batch_size or 1
        if sequence_length is None:
            sequence_length = min(getattr(config, "max_position_embeddings", 1024), 4096)
        tp = tensor_parallel_size or 2
        continuous_batching = batch_size > 1
        options = dict(MODEL_OPTIONS[config.model_type])
        if options.pop("continuous_batching", True) is False:
            continuous_batching = False
        if options.pop("no_sampling_on_device_at_tp2_cb", False) and continuous_batching and tp == 2:
            options["on_device_sampling"] = False  # qwen2/qwen3: "Neuron SDK 2.24 bug" workaround
        return NxDNeuronConfig(
            checkpoint_id=None,
            checkpoint_revision=None,
            batch_size=batch_size,
            sequence_length=sequence_length,
            tp_degree=tp,
            torch_dtype=config.dtype or torch.float32,
            target=normalize_instance_type(instance_type or "trn1"),
            continuous_batching=continuous_batching,
            **options,
        )

    @classmethod
    def export(cls, model_id, neuron_config, config=None, token=None, revision=None, load_weights=False, **kwargs):
        from neuronxcc import write_cache_entries
        from transformers import AutoConfig

        target = align_compilation_target(neuron_config.target, override=False)
        if target != neuron_config.target:
            raise ValueError(
                f"The compilation target is {neuron_config.target} but the NEURON_PLATFORM_TARGET_OVERRIDE"
                f" environment variable is set to {target}, Please set it to the correct value."
            )
        if config is None:
            config = AutoConfig.from_pretrained(model_id).get_text_config()
        config.torch_dtype = neuron_config.torch_dtype
        # Like an HLO hash: what shapes the graphs, not where the checkpoint lies.
        graph_config = {k: v for k, v in config.to_dict().items() if k != "_name_or_path"}
        material = json.dumps([graph_config, neuron_config.to_dict()], sort_keys=True, default=str)
        entries = write_cache_entries(
            material, GRAPHS, f"(tp {neuron_config.tp_degree}, seq {neuron_config.sequence_length})"
        )
        model = cls(config, neuron_config, model_id=str(model_id))
        model._neffs = {
            graph: (entry / "model.neff").read_bytes() for graph, entry in zip(GRAPHS, entries, strict=True)
        }
        return model

    def save_pretrained(self, save_directory):
        import fake_torchscript
        from safetensors.torch import load_file, save_file

        out = Path(save_directory)
        out.mkdir(parents=True, exist_ok=True)
        self.neuron_config.save_pretrained(out)
        self.config.save_pretrained(out)
        fake_torchscript.save(out / "model.pt", out / "neuron_config.json", self._neffs)
        if self.model_id and os.path.isdir(self.model_id):
            weights = out / "checkpoint" / "weights"
            weights.mkdir(parents=True, exist_ok=True)
            state = {}
            for f in sorted(Path(self.model_id).glob("*.safetensors")):
                state.update(load_file(f))
            for rank in range(self.neuron_config.tp_degree):
                shard = state if rank == 0 else {"rank": torch.tensor([rank])}
                shard = {k: v.contiguous() for k, v in shard.items()}
                save_file(shard, weights / f"tp{rank}_sharded_checkpoint.safetensors")

    @classmethod
    def from_pretrained(cls, model_id, **kwargs):
        import fake_nrt
        import fake_torchscript
        from safetensors.torch import load_file
        from transformers import AutoConfig, AutoModelForCausalLM

        folder = Path(model_id)
        neuron_config = NxDNeuronConfig.from_pretrained(model_id)  # real: checks versions
        fake_nrt.nrt_init(f"{model_id}/model.pt")
        if not (folder / "model.pt").exists():
            raise FileNotFoundError(f"{model_id}/model.pt")
        fake_torchscript.load(folder / "model.pt", folder / "neuron_config.json")
        weights = folder / "checkpoint" / "weights"
        shards = [
            load_file(weights / f"tp{rank}_sharded_checkpoint.safetensors") for rank in range(neuron_config.tp_degree)
        ]
        config = AutoConfig.from_pretrained(model_id)
        model = AutoModelForCausalLM.from_config(config, torch_dtype=neuron_config.torch_dtype).eval()
        model.load_state_dict(shards[0], strict=False)
        model.tie_weights()
        return cls(config, neuron_config, model=model)

    @torch.no_grad()
    def generate(self, input_ids, attention_mask=None, max_new_tokens=16, do_sample=False, **kwargs):
        ids = input_ids
        for _ in range(max_new_tokens):
            logits = self.model(ids).logits[:, -1, :]
            ids = torch.cat([ids, logits.argmax(-1, keepdim=True)], dim=1)
        return ids
