"""FAKE transformers_neuronx.module + sampling models (0.13.380) — compiles nothing.

What is reproduced (aws-neuron/transformers-neuronx main 1ade6d74; module.py, base.py, bucket.py,
compiler.py):
- `from_pretrained(path, **kwargs)`: the sanity checks (max `n_positions` >= max
  `context_length_estimate`; under continuous batching `batch_size_for_shared_caches == batch_size`),
  `AutoConfig.from_pretrained(path)`, then the weights file search in the real order
  (`model.safetensors`, `model.safetensors.index.json`, the split `pytorch_model.bin/` folder,
  `pytorch_model.bin`, `pytorch_model.bin.index.json`), else FileNotFoundError.
- `to_neuron()`: one graph per context bucket (context batch size 1 under continuous batching) and per
  token bucket, bucketed as bucket.py does (token buckets: powers of two from 128 below n_positions,
  then n_positions; context buckets: half of each token bucket unless `context_length_estimate`
  says otherwise). Each graph goes through the persistent cache the way compiler.py + libneuronxla
  do: a cache hit under `$NEURON_COMPILE_CACHE_URL/neuronxcc-<neuronxcc.__version__>/` is reused,
  a miss is "compiled" into it, with flags `NEURON_CC_FLAGS` + `--model-type=transformer
  --auto-cast=none` (when absent) + ` --execute-repetition=1`. A graph's hash covers what changes the
  real HLO: the model config (not its path), the class, n_positions, batch_size, amp, tp_degree,
  context_length_estimate and every NeuronConfig field — never the weights.
- `save(dir)` writes one `<sha256 of the HLO>[:20].neff` per graph; after `load(dir)`, `to_neuron()`
  reads them and never compiles (FileNotFoundError "Could not find a matching NEFF …" when one is
  missing). GPT-J / GPT-NeoX have no serialization (an assertion, as in the real classes).
- `to_neuron()` loads every graph onto NeuronCores, so it needs a Neuron device (`fake_nrt`) whether
  it compiles or finds the NEFFs; every NEFF it loads (from the cache or a `load(dir)` folder) must be
  the one compiled from that graph's HLO (`neuronxcc.check_neff`), so a placeholder or a NEFF of other
  settings fails the load.
- `sample(input_ids, sequence_length, start_ids=None, top_k=50, ...)`: refuses a batch it was not
  compiled for (`ValueError("Model not compiled for batch_size : N")`) and returns prompt + generated
  ids, `sequence_length` long. The numbers come from transformers on the CPU in the `amp` dtype; with
  `neuron_config.quant` (s8, vector_dynamic) the attention and MLP weights are quantized per output
  channel (absmax / 127) and dequantized first, as the real load does.
"""

import hashlib
import json
import os
from pathlib import Path

from transformers_neuronx.config import NeuronConfig

_WEIGHTS = ("model.safetensors", "model.safetensors.index.json", "pytorch_model.bin", "pytorch_model.bin.index.json")
_AMP = {"f32": "float32", "f16": "float16", "bf16": "bfloat16"}
_QUANTIZED = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")


def _as_list(value):
    return sorted(value) if isinstance(value, (list, tuple)) else [value]


def token_buckets(n_positions):
    if isinstance(n_positions, (list, tuple)):
        return sorted(n_positions)
    out, size = [], 128
    while size < n_positions:
        out.append(size)
        size *= 2
    return [*out, n_positions]


def context_buckets(context_length_estimate, tokens):
    if context_length_estimate is None:
        return sorted({max(1, t // 2) for t in tokens})
    if isinstance(context_length_estimate, (list, tuple)):
        return sorted(context_length_estimate)
    return [context_length_estimate] if context_length_estimate > 0 else []


class PretrainedModel:
    @classmethod
    def from_pretrained(cls, pretrained_model_path, *model_args, **kwargs):
        from transformers import AutoConfig

        n_positions = max(_as_list(kwargs.get("n_positions", 2048)))
        estimate = kwargs.get("context_length_estimate")
        if estimate is not None:
            assert n_positions >= max(_as_list(estimate)), (
                "n_positions must be greater than or equal to the largest context_length_estimate"
            )
        nc = kwargs.get("neuron_config")
        if nc is not None and nc.continuous_batching is not None:
            assert nc.continuous_batching.batch_size_for_shared_caches == max(_as_list(kwargs.get("batch_size", 1))), (
                "batch_size_for_shared_caches must equal batch_size under continuous batching"
            )
        path = Path(pretrained_model_path)
        config = AutoConfig.from_pretrained(str(path))
        model = cls(config, *model_args, **kwargs)
        found = next((path / name for name in _WEIGHTS if (path / name).exists()), None)
        if found is None:
            raise FileNotFoundError(f"Can not find model.safetensors or pytorch_model.bin in {pretrained_model_path}")
        model._weights_path = path
        return model


class FakeSampling(PretrainedModel):
    """The observable behaviour shared by the fake *ForSampling classes."""

    def _setup(self, config, n_positions, batch_size, amp, tp_degree, context_length_estimate, neuron_config):
        self.config = config
        self.n_positions = n_positions
        self.batch_size = batch_size
        self.amp = (
            amp if amp is not None else {"float16": "f16", "bfloat16": "bf16"}.get(str(config.torch_dtype), "f32")
        )
        if self.amp not in _AMP:
            raise ValueError(f"amp {self.amp!r} is not supported (f32, f16, bf16)")
        self.tp_degree = tp_degree
        self.context_length_estimate = context_length_estimate
        self.neuron_config = neuron_config if neuron_config is not None else NeuronConfig()
        self._hf = None

    # -- compile ----------------------------------------------------------------------------------
    def _material(self):
        config = {k: v for k, v in self.config.to_dict().items() if k not in ("_name_or_path", "transformers_version")}
        return json.dumps(
            {
                "class": type(self).__name__,
                "config": config,
                "n_positions": self.n_positions,
                "batch_size": self.batch_size,
                "amp": self.amp,
                "tp_degree": self.tp_degree,
                "context_length_estimate": self.context_length_estimate,
                "neuron_config": self.neuron_config.to_json(),
            },
            sort_keys=True,
            default=str,
        )

    def _graphs(self):
        tokens = token_buckets(self.n_positions)
        cb = self.neuron_config.continuous_batching is not None
        batches = _as_list(self.batch_size)
        contexts = context_buckets(self.context_length_estimate, tokens)
        graphs = [f"context-seqlen{c}-batch{b}" for c in contexts for b in ([1] if cb else batches)]
        return graphs + [f"token-seqlen{n}-batch{b}" for n in tokens for b in batches]

    # -- serialization (base.py NeuronModelBase.save / load; NeuronBaseSerializer) ------------------
    serializable = True  # GPT-J and GPT-NeoX are not NeuronModelBase models: no save/load

    def serialization_enabled(self):
        return self.serializable

    def _neff_name(self, graph):
        """hash_hlo: sha256 of the serialized HLO module, 20 hex + '.neff' (not the cache key)."""
        return hashlib.sha256(b"HLO " + (self._material() + graph).encode()).hexdigest()[:20] + ".neff"

    def save(self, directory, sharded_weights=False):
        from neuronxcc import neff_bytes

        assert self.serialization_enabled(), "serialization is not enabled for this model"
        os.makedirs(directory, exist_ok=True)
        material = self._material()
        for graph in self._graphs():
            Path(directory, self._neff_name(graph)).write_bytes(neff_bytes(material, graph))

    def load(self, directory):
        assert self.serialization_enabled(), "serialization is not enabled for this model"
        self._compiled_artifacts_directory = directory

    def to_neuron(self):
        import fake_nrt
        from neuronxcc import check_neff, write_cache_entries

        fake_nrt.nrt_init(f"{type(self).__name__} graphs")
        self._load_weights()
        if hasattr(self, "_compiled_artifacts_directory"):  # _load_compiled_artifacts: never compiles
            directory = self._compiled_artifacts_directory
            if not os.path.isdir(directory):
                raise FileNotFoundError(f"Did not find directory: {directory}.")
            material = self._material()
            for graph in self._graphs():
                neff = Path(directory, self._neff_name(graph))
                if not neff.is_file():
                    raise FileNotFoundError(
                        "Could not find a matching NEFF for your HLO in this directory. Ensure that the model you "
                        "are trying to load is the same type and has the same parameters as the one you saved or "
                        'call "save" on this model to reserialize it.'
                    )
                check_neff(neff.read_bytes(), material, graph, str(neff))
            return
        flags = os.environ.get("NEURON_CC_FLAGS", "")
        for flag in ("--model-type=transformer", "--auto-cast=none"):
            if flag.split("=")[0] not in flags:
                flags = f"{flags} {flag}".strip()
        write_cache_entries(self._material(), self._graphs(), flags=f"{flags} --execute-repetition=1")

    def _load_weights(self):
        import torch
        from transformers import AutoModelForCausalLM

        dtype = getattr(torch, _AMP[self.amp])
        hf = AutoModelForCausalLM.from_pretrained(str(self._weights_path), dtype=dtype).eval()
        quant = self.neuron_config.quant
        if quant is not None:
            with torch.no_grad():
                for name, module in hf.named_modules():
                    if name.rsplit(".", 1)[-1] in _QUANTIZED and hasattr(module, "weight"):
                        w = module.weight.float()
                        scale = (w.abs().amax(dim=1, keepdim=True) / 127.0).clamp_min(torch.finfo(torch.float32).eps)
                        q = torch.clamp(torch.round(w * (1.0 / scale)), -128, 127)
                        module.weight.copy_((q * scale).to(module.weight.dtype))
        self._hf = hf

    # -- generate ---------------------------------------------------------------------------------
    def sample(self, input_ids, sequence_length, start_ids=None, top_k=50, **kwargs):
        import torch

        if self._hf is None:
            raise RuntimeError("to_neuron() was not called")
        batch = input_ids.shape[0]
        if batch not in _as_list(self.batch_size):
            raise ValueError(f"Model not compiled for batch_size : {batch}")
        if sequence_length > max(token_buckets(self.n_positions)):
            sequence_length = max(token_buckets(self.n_positions))
        ids = input_ids
        with torch.no_grad():
            while ids.shape[1] < sequence_length:
                logits = self._hf(input_ids=ids).logits[:, -1].float()
                if top_k == 1:
                    nxt = logits.argmax(dim=-1, keepdim=True)
                else:
                    values, index = logits.topk(top_k, dim=-1)
                    nxt = index.gather(-1, torch.multinomial(values.softmax(-1), 1))
                ids = torch.cat([ids, nxt], dim=1)
        return ids


def save_pretrained_split(model, save_directory):
    """The legacy split format: `pytorch_model.bin/` with `key_to_filename.json` and one
    `torch.save` file per tensor named `p{idx}.{key}` (module.py, save_split)."""
    import torch

    folder = Path(save_directory) / "pytorch_model.bin"
    folder.mkdir(parents=True, exist_ok=True)
    model.config.save_pretrained(str(save_directory))
    names = {}
    for idx, (key, tensor) in enumerate(model.state_dict().items()):
        names[key] = f"p{idx}.{key.replace('/', '_')}"
        torch.save(tensor, folder / names[key])
    (folder / "key_to_filename.json").write_text(json.dumps(names, indent=2))


class DecoderSampling(FakeSampling):
    """The keyword-only constructor Mistral, Mixtral and BLOOM share (each `<arch>/model.py` in 0.13)."""

    def __init__(
        self,
        config,
        *,
        n_positions=2048,
        batch_size=1,
        amp="f32",
        tp_degree=2,
        context_length_estimate=None,
        context_unroll=None,
        unroll=None,
        neuron_config=None,
        **kwargs,
    ):
        self._setup(config, n_positions, batch_size, amp, tp_degree, context_length_estimate, neuron_config)


class LegacySampling(FakeSampling):
    """GPT-J and GPT-NeoX (0.13): positional constructor, not NeuronModelBase (no save/load), no int8."""

    serializable = False

    def __init__(
        self,
        config,
        batch_size=1,
        amp="f32",
        tp_degree=2,
        unroll=None,
        init_n_active_tokens=None,
        neuron_config=None,
        n_positions=2048,
        **kwargs,
    ):
        if neuron_config is not None and neuron_config.quant is not None:
            raise NotImplementedError("Support for quantization is not yet implemented")
        self._setup(config, n_positions, batch_size, amp, tp_degree, None, neuron_config)
