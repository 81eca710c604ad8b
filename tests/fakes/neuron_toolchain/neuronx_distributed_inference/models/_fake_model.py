"""FAKE NxD Inference model: compile() writes a persistent-cache tree, load()+generate run on CPU."""

import hashlib
import json
import os
import time
from pathlib import Path

COMPILER_VERSION = "2.21.33363.0"


class InferenceConfig:
    def __init__(self, neuron_config, load_config=None):
        self.neuron_config = neuron_config
        self.hf_config = load_config() if callable(load_config) else load_config


class NeuronCausalLM:
    def __init__(self, model_path, config=None):
        self.model_path = str(model_path)
        self.config = config

    def compile(self, out):
        if os.environ.get("FAKE_NEURON_SLEEP"):
            time.sleep(float(os.environ["FAKE_NEURON_SLEEP"]))
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
        root = Path(os.environ.get("NEURON_COMPILE_CACHE_URL", "/var/tmp/neuron-compile-cache"))
        base = root / f"neuronxcc-{COMPILER_VERSION}"
        flags = os.environ.get("NEURON_CC_FLAGS", "")
        flags_hash = hashlib.md5(flags.encode()).hexdigest()[:8]
        material = json.dumps([self.config.hf_config, nc.to_json()], sort_keys=True, default=str)
        for graph in ("context_encoding_model", "token_generation_model"):
            entry = base / f"MODULE_{hashlib.sha256((material + graph).encode()).hexdigest()[:20]}+{flags_hash}"
            if (entry / "model.done").exists():
                print(f"Using a cached neff for {graph} at {entry}", flush=True)
                continue
            entry.mkdir(parents=True, exist_ok=True)
            print(f"Compiling {graph} (bucket {nc.kwargs.get('max_context_length')})", flush=True)
            (entry / "model.hlo_module.pb").write_bytes(b"HLO " + graph.encode())
            (entry / "compile_flags.json").write_text(json.dumps(flags.split()))
            (entry / "model.neff").write_bytes(b"NEFF " + graph.encode())
            (entry / f"{graph}.lock").write_text("stale lock")  # locks left behind by crashed compiles
            (entry / "model.done").write_text("")
            if os.environ.get("FAKE_NEURON_COMPILE_LOG"):
                with open(os.environ["FAKE_NEURON_COMPILE_LOG"], "a") as f:
                    f.write(f"{entry.name}\n")
        failed = base / "MODULE_00000000000000000bad+00000000"
        failed.mkdir(parents=True, exist_ok=True)
        (failed / "model.log").write_text("ERROR: Estimated peak HBM usage exceeds 16GB")

    def load(self, out):
        record = json.loads((Path(out) / "neuron_config.json").read_text())
        from transformers import AutoModelForCausalLM

        self.hf = AutoModelForCausalLM.from_pretrained(record["model_path"]).eval()


def make(model_class_name, config_class_name):
    return type(model_class_name, (NeuronCausalLM,), {}), type(config_class_name, (InferenceConfig,), {})
