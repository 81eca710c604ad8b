"""optimum-neuron 0.4.5 (huggingface/optimum-neuron, tag v0.4.5), in its own interpreter.

    neuron_config = NeuronModelForCausalLM.get_neuron_config(model_path, config=config,
        instance_type=..., batch_size=..., sequence_length=..., tensor_parallel_size=...)
    model = NeuronModelForCausalLM.export(model_path, neuron_config, config=config, load_weights=False)
    model.save_pretrained(out)      # config.json, neuron_config.json, model.pt, checkpoint/weights/
    NeuronModelForCausalLM.from_pretrained(out).generate(...)

The export compiles without a Neuron device when the target is given (`instance_type`, and the
worker sets NEURON_PLATFORM_TARGET_OVERRIDE to the same target); loading needs one.
"""

from neuronforge_toolchain.generation import greedy, timed

RUNTIME = ("optimum-neuron", "torch-neuronx", "neuronx-cc")  # what a load runs with, the consumer first


def compile(spec):
    """spec: {"model_path", "out", "export": get_neuron_config's keywords + "dtype"}."""
    import torch
    from optimum.neuron import NeuronModelForCausalLM
    from transformers import AutoConfig

    kw = dict(spec["export"])
    config = AutoConfig.from_pretrained(spec["model_path"]).get_text_config()
    config.dtype = getattr(torch, kw.pop("dtype"))  # get_neuron_config takes the dtype from the config
    neuron_config = NeuronModelForCausalLM.get_neuron_config(spec["model_path"], config=config, **kw)
    print(f"exporting with {neuron_config}", flush=True)
    model = NeuronModelForCausalLM.export(spec["model_path"], neuron_config, config=config, load_weights=False)
    model.save_pretrained(spec["out"])
    print("export finished", flush=True)
    return {}


def generate(spec):
    """spec: {"model_dir", "prompt_ids", "max_new_tokens"}: load the export alone and generate."""
    from optimum.neuron import NeuronModelForCausalLM

    model, load_s = timed(lambda: NeuronModelForCausalLM.from_pretrained(spec["model_dir"]))
    return greedy(model.generate, spec, load_s, "optimum.neuron", RUNTIME)


def registry_entry(spec):
    """The Hub cache registry entry of an export (`optimum_registry.entry`)."""
    from neuronforge_toolchain import optimum_registry

    return optimum_registry.entry(spec)


def registry_lookup(spec):
    """optimum's own lookup of a cache repository (`optimum_registry.lookup`)."""
    from neuronforge_toolchain import optimum_registry

    return optimum_registry.lookup(spec)
