"""`make demo`: the core library on the embedded default, end to end on this machine.

1. generates a tiny Llama checkpoint (the embedded default model; no network),
2. fetches it into the embedded file store (verified, manifest last),
3. plans it and a real Llama-3.1-8B config against inf2.xlarge, with the fix for what does not fit,
4. prints the cache key a compile of it would publish under.

A second run finds the checkpoint in the store and only checks it against its manifest.
Store: `NEURONFORGE_STORE` (default `./demo-store`); work dir: `NEURONFORGE_HOME` (default `./.neuronforge`).
"""

from __future__ import annotations

import os
from pathlib import Path

from neuronforge import layout
from neuronforge.modelconfig import ModelArch
from neuronforge.planner import gib, plan
from neuronforge.request import CompileRequest, cache_key
from neuronforge.stages.fetch import FetchRequest, fetch
from neuronforge.stores import open_store
from neuronforge.target import TargetSpec
from neuronforge.tinymodel import make_tiny_llama
from neuronforge.toolchain import detect_toolchain

# meta-llama/Llama-3.1-8B config.json (architecture fields as published)
LLAMA_3_1_8B = {
    "architectures": ["LlamaForCausalLM"],
    "model_type": "llama",
    "hidden_size": 4096,
    "intermediate_size": 14336,
    "num_attention_heads": 32,
    "num_hidden_layers": 32,
    "num_key_value_heads": 8,
    "max_position_embeddings": 131072,
    "vocab_size": 128256,
    "tie_word_embeddings": False,
    "torch_dtype": "bfloat16",
}


def main() -> None:
    home = Path(os.environ.get("NEURONFORGE_HOME", ".neuronforge")).resolve()
    store_uri = os.environ.get("NEURONFORGE_STORE", f"file://{Path('demo-store').resolve()}")
    model_dir = home / "demo" / "tiny-llama"
    if not (model_dir / "config.json").exists():
        print(f"generating the embedded default model in {model_dir}")
        make_tiny_llama(model_dir)

    result = fetch(FetchRequest(source=str(model_dir), store_uri=store_uri, work_dir=home / "work"))
    state = "already in the store, checked against its manifest" if result.reused else "fetched and verified"
    print(f"\n[fetch] {result.source.location}: {state} in {result.seconds:.2f}s")
    print(f"        revision {result.source.resolved_revision}")
    print(f"        manifest {result.manifest_uri}")

    target = TargetSpec.parse({"instance_type": "inf2.xlarge", "tp_degree": 1, "sequence_length": 256})
    from neuronforge.checkpoint import verify_checkpoint

    verified = verify_checkpoint(result.local_dir)
    tiny = plan(verified.arch, target, tensors=verified.tensors)
    print(
        f"\n[plan]  tiny Llama on {target.instance_type} tp=1: {'fits' if tiny.ok else 'REJECTED'}, "
        f"{gib(tiny.per_core_bytes)} per core"
    )
    big = ModelArch.from_config(LLAMA_3_1_8B)
    for tp in (1, 2):
        t = TargetSpec.parse(
            {"instance_type": "inf2.xlarge", "tp_degree": tp, "sequence_length": 4096, "backend": "nxdi"}
        )
        p = plan(big, t)
        memory = next(c for c in p.checks if c.name == "memory")
        print(f"        Llama-3.1-8B bf16 on inf2.xlarge tp={tp}: {memory.message}")

    request = CompileRequest(result.source, target)
    key = cache_key(request, detect_toolchain("cpu"))
    store = open_store(store_uri)
    print(f"\n[key]   {key}")
    print(f"        artifacts would publish under {store.uri(layout.artifact_prefix(result.source, target, key))}/")
    objects = store.list()
    print(f"\n[store] {len(objects)} objects, {sum(o.size for o in objects)} bytes in {store.root_uri}")


if __name__ == "__main__":
    main()
