"""NxD Inference (neuronx-distributed-inference 0.6.10598, SDK 2.26.1), in its own interpreter.

neuron_config = NeuronConfig(**kwargs)                 # MoENeuronConfig for MoE models
config = <Arch>InferenceConfig(neuron_config, load_config=load_pretrained_config(model_path))
model = Neuron<Arch>ForCausalLM(model_path, config)
model.compile(out)          # NEFFs through the persistent cache, neuron_config.json, model.pt, weights/
model = Neuron<Arch>ForCausalLM(out); model.load(out)  # what vLLM's NEURON_COMPILED_ARTIFACTS does
HuggingFaceGenerationAdapter(model).generate(...)
"""

import importlib

from neuronforge_toolchain.generation import greedy, timed

PACKAGE = "neuronx_distributed_inference"
RUNTIME = ("neuronx-distributed-inference", "torch-neuronx", "neuronx-cc")  # what a load runs with


def _model_class(spec):
    return getattr(importlib.import_module(spec["module"]), spec["model_class"])


def compile(spec):
    """spec: {"module", "model_class", "config_class", "moe", "model_path", "out", "neuron_config"}."""
    import torch
    from neuronx_distributed_inference.models.config import MoENeuronConfig, NeuronConfig, OnDeviceSamplingConfig
    from neuronx_distributed_inference.utils.hf_adapter import load_pretrained_config

    kw = dict(spec["neuron_config"])
    kw["torch_dtype"] = getattr(torch, kw["torch_dtype"])
    if kw.get("on_device_sampling_config") is not None:
        kw["on_device_sampling_config"] = OnDeviceSamplingConfig(**kw["on_device_sampling_config"])
    neuron_config = (MoENeuronConfig if spec["moe"] else NeuronConfig)(**kw)
    module = importlib.import_module(spec["module"])
    config = getattr(module, spec["config_class"])(
        neuron_config, load_config=load_pretrained_config(spec["model_path"])
    )
    model = getattr(module, spec["model_class"])(spec["model_path"], config)
    print(f"compiling {spec['model_class']} into {spec['out']}", flush=True)
    model.compile(spec["out"])
    print("compile finished", flush=True)
    return {}


def generate(spec):
    """spec: {"module", "model_class", "model_dir", "prompt_ids", "max_new_tokens"}: the compiled
    folder alone (its neuron_config.json, model.pt and pre-sharded weights)."""
    from neuronx_distributed_inference.utils.hf_adapter import HuggingFaceGenerationAdapter

    def load():
        model = _model_class(spec)(spec["model_dir"])
        model.load(spec["model_dir"])
        return model

    model, load_s = timed(load)
    return greedy(HuggingFaceGenerationAdapter(model).generate, spec, load_s, PACKAGE, RUNTIME)
