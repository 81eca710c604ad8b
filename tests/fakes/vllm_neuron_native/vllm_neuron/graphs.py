"""FAKE: the graphs the plugin traces for one engine configuration, as (name, graph text, inputs).

Deterministic in the model config and the engine arguments, and changing with every documented key
input: architecture, layers, widths, dtype in the graph text; buckets of --max-num-batched-tokens
(prefill) and --max-num-seqs (decode), --max-model-len, --block-size and the KV block count in the
inputs' shapes (the key: Infinity-AI-Institute/vllm-neuron@7f4cca75 vllm_neuron/compile/cache.py
`create_cache_hash`; the KV size: aws-neuron/aws-neuron-sdk@81ce03ae
vllm-neuron/docs/design/vllm/determine_available_memory_design.md). Two facts of the real plugin are modelled:
- the KV block count: `num_gpu_blocks_override` when given; otherwise sized from HBM — in CPU-compile
  mode from the target's static table, on a device from what the runtime reports (here the table minus
  the runtime's reservation, FAKE_NEURON_RUNTIME_RESERVED_GIB, default 1): the documented reason a
  build and a server can disagree on every key when the count is not pinned (determine_available_memory_design.md;
  the reservation's size is a guess).
- the graph text depends on the process's history: `torch.topk` prints with its keyword spelling unless
  transformers was imported before the trace (foxl-ai/kiln docs/neuron-notes.md, SDK 2.32).
Which graphs call NKI kernels is invented too (a simple rule): every decode graph calls one attention
kernel (`nki_call <kernel>`), whose compile result the cache keeps in `nki/<key>.json`; prefill graphs
call none.
"""

import math
import os
import sys

# per chip, the plugin's static table in CPU-compile mode (determine_available_memory_design.md)
STATIC_HBM_GIB = {"trn2": 96, "trn3": 144}
DTYPE_BYTES = {"bfloat16": 2, "float16": 2, "float32": 4}


def buckets(limit, start):
    out, b = [], start
    while b < limit:
        out.append(b)
        b *= 2
    return [*out, limit]


def kv_blocks(config, args, target, cpu_compile):
    if args.get("num_gpu_blocks_override") is not None:
        return int(args["num_gpu_blocks_override"])
    hbm = STATIC_HBM_GIB.get(target, 96) * 1024**3
    if not cpu_compile:
        hbm -= int(float(os.environ.get("FAKE_NEURON_RUNTIME_RESERVED_GIB", "1")) * 1024**3)
    head_dim = config.get("head_dim") or config["hidden_size"] // config["num_attention_heads"]
    per_block = 2 * config["num_hidden_layers"] * args["block_size"] * config["num_key_value_heads"] * head_dim * 2
    return int(hbm * float(args.get("gpu_memory_utilization", 0.9)) * 0.30) // per_block


def engine_graphs(config, args, target, cpu_compile):
    dtype = args.get("dtype", "bfloat16")
    layers, hidden = config["num_hidden_layers"], config["hidden_size"]
    heads, kv = config["num_attention_heads"], config["num_key_value_heads"]
    head_dim = config.get("head_dim") or hidden // heads
    max_len, seqs, block = args["max_model_len"], args["max_num_seqs"], args["block_size"]
    tokens = args.get("max_num_batched_tokens") or max_len
    blocks = kv_blocks(config, args, target, cpu_compile)
    topk = "torch.topk(logits, 1, -1)" if "transformers" in sys.modules else "torch.topk(input=logits, k=1, dim=-1)"
    body = (
        f"{config['architectures'][0]} layers={layers} hidden={hidden} heads={heads} kv_heads={kv} "
        f"head_dim={head_dim} ffn={config.get('intermediate_size')} vocab={config['vocab_size']} dtype={dtype} "
        f"prefix_caching={bool(args.get('enable_prefix_caching'))} sample={topk}"
    )
    kv_shape = (2 * layers, blocks, block, kv, head_dim)  # the whole pool, block 0 (null) included
    kv_input = (dtype, kv_shape, _stride(kv_shape))
    table = math.ceil(max_len / block)
    out = []
    for n in buckets(tokens, 128):
        inputs = [("int64", (n,), (1,)), ("int64", (n,), (1,)), kv_input, ("int32", (1, table), (table, 1))]
        out.append((f"prefill_{n}", f"graph prefill tokens={n} {body}", inputs))
    for s in buckets(seqs, 1):
        inputs = [("int64", (s,), (1,)), ("int64", (s,), (1,)), kv_input, ("int32", (s, table), (table, 1))]
        kernel = f"attention_tkg seqs={s} kv_heads={kv} head_dim={head_dim} block={block} dtype={dtype}"
        out.append((f"decode_{s}", f"graph decode seqs={s} {body}\nnki_call {kernel}", inputs))
    return out


def _stride(shape):
    out, acc = [], 1
    for dim in reversed(shape):
        out.append(acc)
        acc *= dim
    return tuple(reversed(out))
