"""FAKE NxD Inference model: compile() writes a persistent-cache tree, load()+generate run on CPU."""

import json
from pathlib import Path


class InferenceConfig:
    def __init__(self, neuron_config, load_config=None):
        self.neuron_config = neuron_config
        self.hf_config = load_config() if callable(load_config) else load_config


class NeuronCausalLM:
    def __init__(self, model_path, config=None):
        self.model_path = str(model_path)
        self.config = config

    def compile(self, out):
        out = Path(out)
        out.mkdir(parents=True, exist_ok=True)
        nc = self.config.neuron_config
        record = {
            "class": type(self).__name__,
            "config_class": type(self.config).__name__,
            "neuron_config_class": type(nc).__name__,
            "neuron_config": nc.to_json(),
            "model_path": self.model_path,
        }
        (out / "neuron_config.json").write_text(json.dumps(record, indent=2))
        (out / "model.pt").write_bytes(b"FAKE TorchScript with NEFFs")
        if nc.kwargs.get("save_sharded_checkpoint"):
            (out / "weights").mkdir(exist_ok=True)
            for rank in range(nc.kwargs["tp_degree"]):
                (out / "weights" / f"tp{rank}_sharded_checkpoint.safetensors").write_bytes(b"FAKE")
        from neuronxcc import write_cache_entries

        material = json.dumps([self.config.hf_config, nc.to_json()], sort_keys=True, default=str)
        graphs = ["context_encoding_model", "token_generation_model"]
        write_cache_entries(material, graphs, f"(bucket {nc.kwargs.get('max_context_length')})")

    def load(self, out):
        record = json.loads((Path(out) / "neuron_config.json").read_text())
        from transformers import AutoModelForCausalLM

        self.hf = AutoModelForCausalLM.from_pretrained(record["model_path"]).eval()
        nc = record["neuron_config"]
        if nc.get("quantized"):  # weights from the quantized checkpoint: q * scale, NxD names
            self.hf.load_state_dict(_dequantized(Path(nc["quantized_checkpoints_path"])), strict=False)


def make(model_class_name, config_class_name):
    return type(model_class_name, (NeuronCausalLM,), {}), type(config_class_name, (InferenceConfig,), {})


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
