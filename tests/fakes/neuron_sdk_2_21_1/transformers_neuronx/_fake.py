"""Not part of transformers-neuronx: the fake's stand-in for HLO, NEFFs and NeuronCores, shared by
the fake model classes (which keep the real class names, bases and signatures; see module.py).

A model describes its compilation with `describe(...)`: the material its HLO depends on, the graphs
`to_neuron()` builds, the batch sizes `sample` accepts. `compile_or_load` sends every graph through
the persistent cache the way compiler.py + libneuronxla do (or reads a `model.save` folder), and
`sample` generates with transformers on the CPU in the `amp` dtype."""

import hashlib
import json
import os
from pathlib import Path

_AMP = {"f32": "float32", "f16": "float16", "bf16": "bfloat16"}
_QUANTIZED = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")


def describe(model, config, *, graphs, batches, max_positions, amp, neuron_config, **hlo_inputs):
    """Record what the fake needs. `hlo_inputs` are the load arguments the real HLO depends on."""
    if amp not in _AMP:
        raise ValueError(f"amp {amp!r} is not supported (f32, f16, bf16)")
    hf = {k: v for k, v in config.to_dict().items() if k not in ("_name_or_path", "transformers_version")}
    model._fake_material = json.dumps(
        {"class": type(model).__name__, "config": hf, "amp": amp, **hlo_inputs}, sort_keys=True, default=str
    )
    model._fake_graphs = list(graphs)
    model._fake_batches = list(batches)
    model._fake_max_positions = max_positions
    model._fake_amp = amp
    model._fake_quant = getattr(neuron_config, "quant", None)
    model._fake_hf = None


def neuron_config_json(neuron_config):
    return neuron_config.to_json() if neuron_config is not None else None


def neff_name(model, graph):
    """base.py hash_hlo: sha256 of the serialized HLO module, 20 hex + '.neff' (not the cache key)."""
    return hashlib.sha256(b"HLO " + (model._fake_material + graph).encode()).hexdigest()[:20] + ".neff"


def save_neffs(model, directory):
    from neuronxcc import neff_bytes

    if os.path.isfile(directory):
        raise FileExistsError(f"Artifacts should be saved to a directory. Found existing file: {directory}")
    os.makedirs(directory, exist_ok=True)
    for graph in model._fake_graphs:
        Path(directory, neff_name(model, graph)).write_bytes(neff_bytes(model._fake_material, graph))


def compile_or_load(model, directory=None):
    """`to_neuron()`: needs a Neuron device (`fake_nrt`) whether it compiles or finds the NEFFs; with
    `directory` (a `load(dir)`), reads `<hlo hash>.neff` from it and never compiles; otherwise every
    graph goes through the persistent cache with the flags compiler.py adds."""
    import fake_nrt
    from neuronxcc import check_neff, write_cache_entries

    fake_nrt.nrt_init(f"{type(model).__name__} graphs")
    load_weights(model)
    if directory is not None:
        if not os.path.isdir(directory):
            raise FileNotFoundError(f"Did not find directory: {directory}.")
        for graph in model._fake_graphs:
            neff = Path(directory, neff_name(model, graph))
            if not neff.is_file():
                raise FileNotFoundError(
                    "Could not find a matching NEFF for your HLO in this directory. Ensure that the model you "
                    "are trying to load is the same type and has the same parameters as the one you saved or "
                    'call "save" on this model to reserialize it.'
                )
            check_neff(neff.read_bytes(), model._fake_material, graph, str(neff))
        return
    flags = os.environ.get("NEURON_CC_FLAGS", "").strip()
    for flag in ("--model-type=transformer", "--auto-cast=none"):
        if flag.split("=")[0] not in flags:
            flags = f"{flags} {flag}".strip()
    write_cache_entries(model._fake_material, model._fake_graphs, flags=f"{flags} --execute-repetition=1")


def load_weights(model):
    import torch
    from transformers import AutoModelForCausalLM

    dtype = getattr(torch, _AMP[model._fake_amp])
    hf = AutoModelForCausalLM.from_pretrained(str(model._fake_weights_path), dtype=dtype).eval()
    if model._fake_quant is not None:
        with torch.no_grad():
            for name, module in hf.named_modules():
                if name.rsplit(".", 1)[-1] in _QUANTIZED and hasattr(module, "weight"):
                    w = module.weight.float()
                    scale = (w.abs().amax(dim=1, keepdim=True) / 127.0).clamp_min(torch.finfo(torch.float32).eps)
                    q = torch.clamp(torch.round(w * (1.0 / scale)), -128, 127)
                    module.weight.copy_((q * scale).to(module.weight.dtype))
    object.__setattr__(model, "_fake_hf", hf)  # not a submodule of the fake


def sample(model, input_ids, sequence_length, top_k):
    import torch

    if model._fake_hf is None:
        raise RuntimeError("to_neuron() was not called")
    batch = input_ids.shape[0]
    if batch not in model._fake_batches:
        raise ValueError(
            f"Model not compiled for batch_size : {batch}. "
            f"Acceptable batch_size is one of the following {model._fake_batches}"
        )
    sequence_length = min(sequence_length, model._fake_max_positions)
    ids = input_ids
    with torch.no_grad():
        while ids.shape[1] < sequence_length:
            logits = model._fake_hf(input_ids=ids).logits[:, -1].float()
            if top_k == 1:
                nxt = logits.argmax(dim=-1, keepdim=True)
            else:
                values, index = logits.topk(top_k, dim=-1)
                nxt = index.gather(-1, torch.multinomial(values.softmax(-1), 1))
            ids = torch.cat([ids, nxt], dim=1)
    return ids


def decoder(model, config, *, n_positions, batch_size, amp, tp_degree, context_length_estimate, neuron_config):
    """`describe` for the NeuronModelBase decoders (DecoderLmHeadForSamplingNoEmbedding): a token
    graph per token bucket and batch size, a context graph per context bucket (batch 1 under
    continuous batching); `context_length_estimate=None` gives no context graphs (GPT-2)."""
    from transformers_neuronx import bucket

    tokens = bucket.token_sizes(n_positions)
    batches = bucket.batch_sizes(batch_size)
    contexts = [] if context_length_estimate is None else bucket.context_sizes(context_length_estimate, tokens)
    continuous = neuron_config is not None and neuron_config.continuous_batching is not None
    graphs = [f"context-seqlen{c}-batch{b}" for c in contexts for b in ([1] if continuous else batches)]
    graphs += [f"token-seqlen{n}-batch{b}" for n in tokens for b in batches]
    describe(
        model,
        config,
        graphs=graphs,
        batches=batches,
        max_positions=max(tokens),
        amp=amp,
        neuron_config=neuron_config,
        n_positions=n_positions,
        batch_size=batch_size,
        tp_degree=tp_degree,
        context_length_estimate=context_length_estimate,
        neuron_config_fields=neuron_config_json(neuron_config),
    )
