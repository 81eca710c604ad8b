"""FAKE vLLM with the vLLM Neuron plugin (tests/fakes/README.md) — `LLM`, `SamplingParams` with the
real names and the keyword arguments neuronforge passes (EngineArgs fields). Building an `LLM` does
what the plugin's warm-up does: trace every graph of the engine configuration (vllm_neuron.graphs)
and take each from the compile cache or compile it (libtorch_neuronx_lite.compile.cache). In
CPU-compile mode (VLLM_NEURON_CPU_COMPILE=1) nothing executes; otherwise the host needs Neuron
devices (fake_nrt) and `generate` runs the served folder's weights with transformers on the CPU."""

import json
import os
from importlib import metadata
from pathlib import Path

__version__ = metadata.version("vllm")

SUPPORTED = {"LlamaForCausalLM", "Qwen2ForCausalLM", "Qwen3ForCausalLM"}


class SamplingParams:
    def __init__(self, n=1, temperature=1.0, top_p=1.0, top_k=0, max_tokens=16, ignore_eos=False, seed=None):
        self.temperature, self.max_tokens, self.ignore_eos = temperature, max_tokens, ignore_eos


class CompletionOutput:
    def __init__(self, token_ids):
        self.index, self.text, self.token_ids, self.finish_reason = 0, "", token_ids, "length"


class RequestOutput:
    def __init__(self, prompt_token_ids, outputs):
        self.prompt_token_ids, self.outputs = prompt_token_ids, outputs


def cache_dir():
    """$VLLM_CACHE_ROOT/neuron/compile_cache (default ~/.cache/vllm): vllm_neuron/envs.py."""
    root = os.environ.get("VLLM_CACHE_ROOT") or os.path.expanduser("~/.cache/vllm")
    return Path(root) / "neuron" / "compile_cache"


class LLM:
    def __init__(
        self,
        model,
        tensor_parallel_size=1,
        max_model_len=None,
        max_num_seqs=256,
        max_num_batched_tokens=None,
        block_size=32,
        num_gpu_blocks_override=None,
        dtype="auto",
        enable_prefix_caching=None,
        gpu_memory_utilization=0.9,
        additional_config=None,
        **kwargs,
    ):
        from libtorch_neuronx_lite.compile import cache
        from vllm_neuron.graphs import engine_graphs

        unknown = set(kwargs) - {"tokenizer", "seed", "served_model_name", "trust_remote_code"}
        if unknown:
            raise TypeError(f"EngineArgs.__init__() got unexpected keyword arguments {sorted(unknown)}")
        self.model = Path(model)
        config = json.loads((self.model / "config.json").read_text())
        arch = (config.get("architectures") or ["?"])[0]
        if arch not in SUPPORTED:
            raise ValueError(f"Model architectures ['{arch}'] are not supported on Neuron for now")
        cpu_compile = os.environ.get("VLLM_NEURON_CPU_COMPILE") == "1"
        target = cache.resolve_target()
        if not cpu_compile:
            import fake_nrt

            fake_nrt.nrt_init(f"vLLM's engine for {self.model}")
        args = {
            "max_model_len": max_model_len or config.get("max_position_embeddings"),
            "max_num_seqs": max_num_seqs,
            "max_num_batched_tokens": max_num_batched_tokens,
            "block_size": block_size,
            "num_gpu_blocks_override": num_gpu_blocks_override,
            "dtype": config.get("torch_dtype", "bfloat16") if dtype == "auto" else dtype,
            "enable_prefix_caching": enable_prefix_caching,
            "gpu_memory_utilization": gpu_memory_utilization,
        }
        self.dtype = args["dtype"]
        folder = cache_dir()
        folder.mkdir(parents=True, exist_ok=True)
        groups = str([list(range(tensor_parallel_size))])
        flags = os.environ.get("NEURON_CC_FLAGS", "")
        self.graphs = {}
        for name, text, inputs in engine_graphs(config, args, target, cpu_compile):
            key = cache.create_cache_hash(text, inputs, {"compiler_args": flags}, replica_groups=groups)
            self.graphs[name] = cache.lookup_or_compile(
                folder, key, text, f"neuronx-cc compile --target={target} {flags}"
            )
        print(f"INFO [vllm_neuron.worker] warmup done: {len(self.graphs)} graphs", flush=True)
        self.cpu_compile = cpu_compile

    def generate(self, prompts, sampling_params=None):
        if self.cpu_compile:
            raise RuntimeError("VLLM_NEURON_CPU_COMPILE=1 compiles only: nothing executes on the CPU")
        import torch
        from transformers import AutoModelForCausalLM

        params = sampling_params or SamplingParams()
        model = AutoModelForCausalLM.from_pretrained(self.model, dtype=getattr(torch, self.dtype)).eval()
        out = []
        for prompt in prompts:
            ids = torch.tensor([prompt["prompt_token_ids"]])
            new = []
            with torch.no_grad():
                for _ in range(params.max_tokens):
                    token = model(input_ids=ids).logits[0, -1].float().argmax().view(1, 1)
                    new.append(int(token))
                    ids = torch.cat([ids, token], dim=1)
            out.append(RequestOutput(prompt["prompt_token_ids"], [CompletionOutput(new)]))
        return out
