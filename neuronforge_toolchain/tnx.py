"""transformers-neuronx 0.13 (SDK 2.21.1, the LMI image's), in its own interpreter.

neuron_config = NeuronConfig(group_query_attention=..., quant=QuantizationConfig(...), ...)
model = <Arch>ForSampling.from_pretrained(path, batch_size=..., tp_degree=..., n_positions=...,
                                          amp=..., context_length_estimate=..., neuron_config=...)
model.to_neuron()        # one NEFF per bucket, through libneuronxla's persistent cache
model.save(dir)          # <sha256 of the HLO>[:20].neff per graph: what model.load(dir) reads
model.sample(input_ids, sequence_length, top_k=1)

`save` / `load` exist only on base.NeuronModelBase classes; GPT-J and GPT-NeoX derive from
module.PretrainedModel and have neither (nor `serialization_enabled`): the spec's "serializable"
(neuronforge.compilation.backends.tnx.CLASSES) says which, and nothing else is called on the others.
"""

import importlib
import os
import tempfile

from neuronforge_toolchain import measure
from neuronforge_toolchain.generation import timed

RUNTIME = ("transformers-neuronx", "torch-neuronx", "neuronx-cc")  # what a load runs with, the consumer first


def _build(spec):
    from transformers_neuronx import ContinuousBatchingConfig, NeuronConfig, QuantizationConfig

    nc = dict(spec["neuron_config"])
    if nc.get("quant") is not None:
        nc["quant"] = QuantizationConfig(**nc["quant"])
    if nc.get("continuous_batching") is not None:
        nc["continuous_batching"] = ContinuousBatchingConfig(**nc["continuous_batching"])
    cls = getattr(importlib.import_module(spec["module"]), spec["class"])
    print(f"loading {spec['class']} from {spec['model_path']}", flush=True)
    model = cls.from_pretrained(spec["model_path"], **spec["kwargs"], neuron_config=NeuronConfig(**nc))
    if spec.get("load_dir"):  # LMI with a local compiled_graph_path: the NEFFs of a `model.save`
        if not spec["serializable"]:
            raise ValueError(f"{spec['class']} has no load(dir): its NEFFs come from the persistent cache only")
        model.load(spec["load_dir"])
    model.to_neuron()  # compiles, or loads every graph from the persistent cache (or load_dir)
    return model


def compile(spec):
    """spec: {"module", "class", "model_path", "kwargs", "neuron_config", "save_dir"}."""
    model = _build(spec)
    print("to_neuron finished", flush=True)
    saved = bool(spec["serializable"]) and model.serialization_enabled()  # GPT-J / GPT-NeoX: no such method
    if saved:
        model.save(spec["save_dir"])
    return {"serialized": saved}


def generate(spec):
    """Load like LMI does, then `sample` greedily (top_k=1) at the compiled batch size (the prompt
    repeated: transformers-neuronx refuses a batch it was not compiled for). Also names the NEFF
    files a `save` of the loaded model writes (what `model.load(dir)` would look for)."""
    import time

    import torch

    model, load_s = timed(lambda: _build(spec))
    rows = []
    for ids in spec["prompt_ids"]:
        started = time.perf_counter()
        batch = torch.tensor([ids] * spec["batch"])
        out = model.sample(batch, sequence_length=len(ids) + spec["max_new_tokens"], top_k=1)
        tokens = out[0, len(ids) :].tolist()[: spec["max_new_tokens"]]
        rows.append({"prompt_ids": ids, "tokens": tokens, "seconds": time.perf_counter() - started})

    def run(ids, n):
        model.sample(torch.tensor([ids] * spec["batch"]), sequence_length=len(ids) + n, top_k=1)

    measured = measure.result(spec, measure.two_point(run), load_s, "transformers_neuronx", RUNTIME)
    neffs = None
    if spec["serializable"] and model.serialization_enabled():
        with tempfile.TemporaryDirectory() as tmp:
            model.save(tmp)
            neffs = sorted(os.listdir(tmp))
    return {"load_s": load_s, "rows": rows, "neffs": neffs, "measurement": measured}
