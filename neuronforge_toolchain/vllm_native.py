"""The vLLM Neuron plugin (vllm-neuron 0.24+ with libtorch-neuronx-lite, SDK 2.32+), in its own interpreter.

    import transformers                        # first, always: see IMPORT ORDER below
    from vllm import LLM, SamplingParams
    llm = LLM(model=<folder>, **<the `vllm serve` flags as engine arguments>)
    # compile: VLLM_NEURON_CPU_COMPILE=1 + NEURON_PLATFORM_TARGET_OVERRIDE: warm-up compiles every graph
    #          into $VLLM_CACHE_ROOT/neuron/compile_cache, executing nothing
    # generate: on a Neuron host, compiling forbidden (VLLM_NEURON_DISABLE_WARMUP_COMPILE=1): greedy tokens

IMPORT ORDER: the plugin's cache key hashes the traced FX graph's text, and that text has been seen
to depend on the process's history — whether transformers was imported before vLLM traced (a
`torch.topk` call printed with or without its keyword spelling: foxl-ai/kiln docs/neuron-notes.md,
measured on SDK 2.32). The compile worker and the server must trace in the same state; both sides of
neuronforge import transformers before vLLM, and the published serve.sh runs `vllm serve`, whose
CLI imports transformers before building the engine.
"""

from neuronforge_toolchain import measure
from neuronforge_toolchain.generation import timed

VERSIONED = ("vllm", "vllm-neuron", "libtorch-neuronx-lite", "nki", "neuronx-cc", "torch-neuronx")
RUNTIME = ("vllm-neuron", "vllm", "libtorch-neuronx-lite", "neuronx-cc")  # what a load runs with, the plugin first
INT_FLAGS = (
    "tensor_parallel_size",
    "max_model_len",
    "max_num_seqs",
    "max_num_batched_tokens",
    "block_size",
    "num_gpu_blocks_override",
)


def engine_args(argv):
    """`vllm serve` flags (after the model) as `LLM(...)` keyword arguments (vLLM's EngineArgs fields:
    the CLI flag with dashes turned into underscores; `--no-X` is X=False)."""
    kwargs = {}
    i = 0
    while i < len(argv):
        word = argv[i]
        i += 1
        name, eq, value = word[2:].partition("=")
        name = name.replace("-", "_")
        if not eq:
            if i < len(argv) and not argv[i].startswith("--"):
                value = argv[i]
                i += 1
            else:
                if name.startswith("no_"):
                    kwargs[name[3:]] = False
                else:
                    kwargs[name] = True
                continue
        kwargs[name] = int(value) if name in INT_FLAGS else value
    return kwargs


def _versions():
    return measure.runtime(VERSIONED)


def _llm(spec):
    import transformers  # noqa: F401  (IMPORT ORDER, module doc)
    from vllm import LLM

    return LLM(model=spec["model"], **engine_args(spec["argv"]))


def compile(spec):
    """spec: {"model", "argv"}. The env holds VLLM_NEURON_CPU_COMPILE=1, the target override and
    VLLM_CACHE_ROOT; the plugin logs each graph's key, which the worker reads."""
    print(f"vLLM Neuron CPU compile of {spec['model']}: vllm serve {' '.join(spec['argv'])}", flush=True)
    _llm(spec)
    print("vLLM Neuron CPU compile finished", flush=True)
    return {"versions": _versions()}


def generate(spec):
    """spec: {"model", "argv", "prompt_ids", "max_new_tokens"}: greedy tokens, one prompt at a time."""
    import time

    llm, load_s = timed(lambda: _llm(spec))
    from vllm import SamplingParams

    params = SamplingParams(temperature=0.0, max_tokens=spec["max_new_tokens"], ignore_eos=True)
    rows = []
    for ids in spec["prompt_ids"]:
        started = time.perf_counter()
        out = llm.generate([{"prompt_token_ids": ids}], params)
        rows.append(
            {"prompt_ids": ids, "tokens": list(out[0].outputs[0].token_ids), "seconds": time.perf_counter() - started}
        )

    def run(ids, n):
        batch = (spec.get("measure") or {}).get("batch_size", 1)
        llm.generate(
            [{"prompt_token_ids": ids}] * batch, SamplingParams(temperature=0.0, max_tokens=n, ignore_eos=True)
        )

    measured = measure.result(spec, measure.two_point(run), load_s, "vllm", RUNTIME)
    return {"load_s": load_s, "rows": rows, "versions": _versions(), "measurement": measured}
