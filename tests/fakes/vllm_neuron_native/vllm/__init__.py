"""FAKE vLLM with the vLLM Neuron plugin (tests/fakes/README.md) — `LLM`, `SamplingParams` with the
real names and the keyword arguments neuronforge passes (EngineArgs fields). Building an `LLM` does
what the plugin's worker and warm-up do: register the plugin's models over vLLM's (vllm_neuron.model.
registry), resolve config.json's architecture, trace every graph of the engine configuration
(vllm_neuron.graphs) and take each from the compile cache or compile it
(libtorch_neuronx_lite.compile.cache). In CPU-compile mode (VLLM_NEURON_CPU_COMPILE=1) nothing executes;
otherwise the host needs Neuron devices (fake_nrt) and `generate` runs the served folder's weights with
transformers on the CPU, scheduling the requests of one call over the KV blocks as vLLM v1 does (block
0 is the null block: `--num-gpu-blocks-override N` leaves N - 1 for sequences; a request that finds no
free block preempts the newest running one)."""

import json
import math
import os
from importlib import metadata
from pathlib import Path

__version__ = metadata.version("vllm")
FAKE_OF = "vLLM with the vLLM Neuron plugin 0.24/0.29 (Neuron SDK 2.32/2.33)"  # its smoke measurements are synthetic

# Some of vLLM's own GPU model classes (vllm/model_executor/models/registry.py `_TEXT_GENERATION_MODELS`):
# an architecture here that the plugin does not register resolves to vLLM's class, which has no
# `from_configs` for the plugin's runner.
VLLM_MODELS = frozenset(
    {
        "LlamaForCausalLM",
        "MistralForCausalLM",
        "MixtralForCausalLM",
        "Qwen2ForCausalLM",
        "Qwen3ForCausalLM",
        "Qwen3MoeForCausalLM",
        "GptOssForCausalLM",
        "GraniteForCausalLM",
        "Phi3ForCausalLM",
    }
)


class SamplingParams:
    def __init__(self, n=1, temperature=1.0, top_p=1.0, top_k=0, max_tokens=16, ignore_eos=False, seed=None):
        self.temperature, self.max_tokens, self.ignore_eos = temperature, max_tokens, ignore_eos


class CompletionOutput:
    def __init__(self, token_ids):
        self.index, self.text, self.token_ids, self.finish_reason = 0, "", token_ids, "length"


class RequestOutput:
    def __init__(self, prompt_token_ids, outputs):
        self.prompt_token_ids, self.outputs = prompt_token_ids, outputs


# The runner's compiler arguments (vllm_neuron/vllm/worker/neuron_model_runner.py compile_options
# ["compiler_args"] at vllm-project/vllm-neuron@9fc042ea, the LNL-era runner): `-O` is vLLM's
# --optimization-level, which the plugin defaults to 1 (longdct/vllm-neuron@2a923ca9 platform.py
# apply_config_platform_defaults: "Default optimization_level to O1 on Neuron (vLLM defaults to O2)").
RUNNER_ARGS = (
    "--auto-cast=none",
    "--verbose=35",
    "-O{level}",
    "--internal-hlo2tensorizer-options=--modular-flow-mac-threshold=10",
    "--internal-backend-options=--enable-verifier=false --enable-nested-dynamic-loop",
)


def cache_dir():
    """The local compile cache: `<root>/neuron/compile_cache`. The plugin derives it from VLLM_CACHE_ROOT
    (default ~/.cache/vllm; vllm_neuron/envs.py get_neuron_compile_cache_dir, CODE); libtorch-neuronx-lite
    on its own from NEURON_LIBTORCH_CACHE_ROOT (default ~/.cache/neuron_libtorch; foxl-ai/kiln@a04d1fab
    kiln/compile_cache.py, SDK 2.32). Which one LNL reads under the plugin is UNVERIFIED: the fake takes
    NEURON_LIBTORCH_CACHE_ROOT first (from 0.24, when set), the case in which a root set by an image or
    a pod sends the server outside the synced folder."""
    from libtorch_neuronx_lite.compile.cache import prefix

    lnl = os.environ.get("NEURON_LIBTORCH_CACHE_ROOT") if prefix() == "NEURON_LIBTORCH_" else None
    root = lnl or os.environ.get("VLLM_CACHE_ROOT") or os.path.expanduser("~/.cache/vllm")
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
        optimization_level=None,
        **kwargs,
    ):
        from libtorch_neuronx_lite.compile import cache
        from libtorch_neuronx_lite.compile.backend import _apply_platform_compiler_args
        from vllm_neuron.graphs import engine_graphs

        unknown = set(kwargs) - {"tokenizer", "seed", "served_model_name", "trust_remote_code"}
        if unknown:
            raise TypeError(f"EngineArgs.__init__() got unexpected keyword arguments {sorted(unknown)}")
        self.model = Path(model)
        config = json.loads((self.model / "config.json").read_text())
        _model_class(config)
        cpu_compile = os.environ.get("VLLM_NEURON_CPU_COMPILE") == "1"
        level = 1 if optimization_level is None else int(optimization_level)
        options = _apply_platform_compiler_args({"compiler_args": [a.format(level=level) for a in RUNNER_ARGS]})
        target = cache.resolve_target(options["compiler_args"])
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
        command = " ".join(
            ["neuronx-cc", "compile", "graph.hlo", "--framework", "XLA", "--target", target, *options["compiler_args"]]
        )
        graphs = [
            (name, cache.create_cache_hash(text, inputs, options, replica_groups=groups), text)
            for name, text, inputs in engine_graphs(config, args, target, cpu_compile)
        ]
        # The graph-capture backend compiles what it captured first, unless switched off
        # (<prefix>DISABLE_GRAPH_CAPTURE_BACKEND=1); then warm-up runs each graph through the backend.
        if os.environ.get(f"{cache.prefix()}DISABLE_GRAPH_CAPTURE_BACKEND") != "1":
            for _, key, text in graphs:
                cache.precompile(folder, key, text, command)
        self.graphs = {name: cache.lookup_or_compile(folder, key, text, command) for name, key, text in graphs}
        print(f"INFO [vllm_neuron.worker] warmup done: {len(self.graphs)} graphs", flush=True)
        self.cpu_compile = cpu_compile
        self.max_num_seqs, self.block_size = max_num_seqs, block_size
        self.num_blocks = blocks_of(config, args, target, cpu_compile)
        self.preemptions = 0

    def generate(self, prompts, sampling_params=None):
        if self.cpu_compile:
            raise RuntimeError("VLLM_NEURON_CPU_COMPILE=1 compiles only: nothing executes on the CPU")
        import torch
        from transformers import AutoModelForCausalLM

        params = sampling_params or SamplingParams()
        self.preemptions += schedule(
            [(len(p["prompt_token_ids"]), len(p["prompt_token_ids"]) + params.max_tokens) for p in prompts],
            self.num_blocks,
            self.block_size,
            self.max_num_seqs,
        )
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


def _model_class(config):
    """The class vLLM's ModelRegistry resolves for config.json's architecture once the plugin's worker
    registered its models over vLLM's (NeuronWorker.__init__: `for arch, model_cls in registry.get_models():
    ModelRegistry.register_model(arch, model_cls)`), built as the plugin's runner builds it
    (`model_cls.from_configs(hf_config, neuron_config)`, neuron_model_runner.py load_model)."""
    from vllm_neuron.model.registry import get_models

    plugin = dict(get_models())
    archs = config.get("architectures") or []
    for arch in archs:
        if arch in plugin:
            return plugin[arch].from_configs(config, None)
    for arch in archs:
        if arch in VLLM_MODELS:
            # vLLM's own GPU class: no `from_configs` (the exact text of the real failure is UNVERIFIED:
            # no run log read; this is what Python says for a missing class attribute).
            raise AttributeError(f"type object '{arch}' has no attribute 'from_configs'")
    raise ValueError(
        f"Model architectures {archs} are not supported for now. Supported architectures: "
        f"{sorted(VLLM_MODELS | set(plugin))}"
    )


def blocks_of(config, args, target, cpu_compile):
    from vllm_neuron.graphs import kv_blocks

    return kv_blocks(config, args, target, cpu_compile)


def schedule(requests, num_blocks, block_size, max_num_seqs):
    """vLLM v1's block accounting for the requests of one call ((prompt tokens, final tokens) each), step
    by step: block 0 is the null block (vllm/v1/core/block_pool.py), a request is admitted while fewer
    than max_num_seqs run and its prompt's blocks are free, each step every running request grows by
    one token and takes a block when it fills one, and a request that finds none preempts the newest
    running request (its blocks freed; it is recomputed later). Returns the preemptions; a request
    longer than the whole pool can hold is refused."""
    usable = num_blocks - 1
    need = [math.ceil(total / block_size) for _, total in requests]
    if need and max(need) > usable:
        raise ValueError(
            f"a request needs {max(need)} KV blocks of {block_size} tokens; num_gpu_blocks={num_blocks} leaves "
            f"{usable} (block 0 is vLLM's null block)"
        )
    waiting = list(range(len(requests)))
    running, tokens, held, preempted = [], [0] * len(requests), [0] * len(requests), 0
    while waiting or running:
        while waiting and len(running) < max_num_seqs:
            r = waiting[0]
            blocks = math.ceil(requests[r][0] / block_size)
            if blocks > usable - sum(held):
                break
            waiting.pop(0)
            running.append(r)
            tokens[r], held[r] = requests[r][0], blocks
        for r in list(running):
            if r not in running:
                continue
            tokens[r] += 1
            if tokens[r] > held[r] * block_size:
                while usable - sum(held) < 1 and r in running:
                    victim = running.pop()
                    held[victim], tokens[victim] = 0, 0
                    waiting.insert(0, victim)
                    preempted += 1
                    print(
                        f"WARNING [vllm.v1.core.sched.scheduler] (FAKE log line) request {victim} preempted: no free "
                        f"KV block ({num_blocks} blocks, block 0 is the null block)",
                        flush=True,
                    )
                if r not in running:
                    continue
                held[r] += 1
            if tokens[r] >= requests[r][1]:
                running.remove(r)
                held[r] = 0
    return preempted
